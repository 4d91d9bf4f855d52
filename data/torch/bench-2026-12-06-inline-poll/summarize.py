"""Medians per side of the runs in set-*/: mcr auto's time per synchronous all_reduce (µs) and its
speedup over torch's gloo in the same processes, per size, under mpirun (MPI) and torchrun (Gloo).
Run from this directory: python3 summarize.py"""
import glob
import re
import statistics
from collections import defaultdict

rows = defaultdict(list)  # (launcher, side, size) -> [(mcr us, speedup)]
for f in sorted(glob.glob("set-*/bench-*-*-*.txt")):
    launcher, side = re.search(r"bench-(\w+)-(before|after)-\d", f).groups()
    for line in open(f):
        p = line.split(":", 1)[1].split() if line.startswith("[default0]:") else line.split()
        if len(p) == 10 and p[-1].isdigit() and p[0][0].isdigit():
            rows[(launcher, side, p[0])].append((float(p[3]), float(p[8].rstrip("x"))))

for launcher in ("mpirun", "torchrun"):
    sizes = list(dict.fromkeys(s for (l, _, s) in rows if l == launcher))
    n = len(rows[(launcher, "before", sizes[0])]) if sizes else 0
    print(f"{launcher}: synchronous all_reduce, 2 ranks, median of {n} runs per side")
    print(f"{'size':>6} {'before us':>10} {'after us':>10} {'after/before':>13} "
          f"{'speedup before':>15} {'speedup after':>14}")
    for size in sizes:
        b = rows[(launcher, "before", size)]
        a = rows[(launcher, "after", size)]
        bt, at = statistics.median(x for x, _ in b), statistics.median(x for x, _ in a)
        bs, as_ = statistics.median(y for _, y in b), statistics.median(y for _, y in a)
        print(f"{size:>6} {bt:>10.1f} {at:>10.1f} {at / bt:>13.2f} {bs:>14.1f}x {as_:>13.1f}x")
    print()
