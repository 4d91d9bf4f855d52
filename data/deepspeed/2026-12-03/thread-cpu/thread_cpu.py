"""CPU time per thread of the processes running train.py --dist DIST: samples /proc every 0.5 s
until SIGTERM, then writes to OUT each thread name's CPU seconds summed over those processes (the
main thread apart). Usage: thread_cpu.py DIST OUT (run.sh starts and stops it)."""
import os, sys, time, collections, signal
dist = sys.argv[1]; out = sys.argv[2]
last = {}
stop = False
def h(*a):
    global stop; stop = True
signal.signal(signal.SIGTERM, h)
while not stop:
    for pid in os.listdir('/proc'):
        if not pid.isdigit(): continue
        try:
            cmd = open(f'/proc/{pid}/cmdline','rb').read().split(b'\0')
        except OSError: continue
        if b'train.py' not in b' '.join(cmd) or dist.encode() not in cmd: continue
        if not any(c.endswith(b'python') for c in cmd[:1]): continue
        try: tids = os.listdir(f'/proc/{pid}/task')
        except OSError: continue
        for t in tids:
            try: st = open(f'/proc/{pid}/task/{t}/stat').read()
            except OSError: continue
            name = st[st.index("(")+1:st.rindex(")")]
            if t == pid: name = "main thread"
            f = st[st.rindex(')')+2:].split()
            last[(pid, t)] = (name, int(f[11]) + int(f[12]))
    time.sleep(0.5)
agg = collections.defaultdict(int); pids = set()
for (pid, t), (name, ticks) in last.items():
    agg[name] += ticks; pids.add(pid)
tck = os.sysconf('SC_CLK_TCK')
with open(out, 'w') as fo:
    fo.write(f"{dist}: {len(pids)} processes; CPU seconds by thread name, summed over them\n")
    for name, ticks in sorted(agg.items(), key=lambda x: -x[1]):
        fo.write(f"  {name:20s} {ticks / tck:8.2f}\n")
