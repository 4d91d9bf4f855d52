import os, sys, time
import torch, torch.distributed as dist
import mcr.torch
dist.init_process_group("gloo")
rank = dist.get_rank()
name = sys.argv[1]
g = dist.new_group(backend=name)
def cpu():
    out = {}
    for t in os.listdir("/proc/self/task"):
        try:
            st = open(f"/proc/self/task/{t}/stat").read()
        except OSError:
            continue
        comm = st[st.index("(")+1:st.rindex(")")]
        f = st[st.rindex(")")+2:].split()
        out[t] = (comm, int(f[11]) + int(f[12]))
    return out
buf = torch.zeros(256); peer = 1 - rank
for i in range(200):
    if rank == 0: dist.send(buf, peer, group=g); dist.recv(buf, peer, group=g)
    else: dist.recv(buf, peer, group=g); dist.send(buf, peer, group=g)
c0 = cpu(); t0 = time.perf_counter(); n = 3000
for i in range(n):
    if rank == 0:
        w = dist.isend(buf, peer, group=g); w.wait(); w = dist.irecv(buf, peer, group=g); w.wait()
    else:
        w = dist.irecv(buf, peer, group=g); w.wait(); w = dist.isend(buf, peer, group=g); w.wait()
dt = time.perf_counter() - t0; c1 = cpu()
if rank == 0:
    d = sorted(((c1[t][1] - c0.get(t, (0, 0))[1]) * 10, c1[t][0], t) for t in c1)
    print(name, f"{dt/n*1e6:.0f} us/roundtrip", [(c, ms) for ms, c, t in d if ms > 0], "ms cpu", flush=True)
dist.destroy_process_group()
