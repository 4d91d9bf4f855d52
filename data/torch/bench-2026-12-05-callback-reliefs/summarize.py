"""Medians per side of the runs in set-*/: mcr auto's time per all_reduce (µs) and its speedup over
torch's gloo per size (mpirun), and mcr's step time (ms) and speedup per workload (torchrun)."""
import glob
import re
import statistics
from collections import defaultdict


def med(xs):
    return statistics.median(xs)


bench = defaultdict(list)  # (side, size) -> [(mcr us, speedup)]
for f in sorted(glob.glob("set-*/bench-mpirun-*.txt")):
    side = re.search(r"bench-mpirun-(\w+)-\d", f).group(1)
    for line in open(f):
        p = line.split()
        if len(p) == 10 and p[-1].isdigit() and p[0][0].isdigit():
            bench[(side, p[0])].append((float(p[3]), float(p[8].rstrip("x"))))
steps = defaultdict(list)  # (side, workload) -> [(mcr ms, speedup)]
for f in sorted(glob.glob("set-*/steps-torchrun-*.txt")):
    side = re.search(r"steps-torchrun-(\w+)-\d", f).group(1)
    for line in open(f):
        p = line.split()
        if len(p) == 5 and p[1] in ("ddp", "fsdp2", "tp", "pipeline"):
            steps[(side, p[1])].append((float(p[3]), float(p[4].rstrip("x"))))

print("all_reduce under mpirun, 2 ranks: median of the runs (mcr auto us / speedup over gloo)")
print(f"{'size':>6} {'before':>18} {'after':>18} {'after/before':>13}")
for size in dict.fromkeys(s for _, s in bench):
    b, a = bench[("before", size)], bench[("after", size)]
    bt, at = med([x[0] for x in b]), med([x[0] for x in a])
    print(f"{size:>6} {bt:>8.1f} / {med([x[1] for x in b]):>5.1f}x "
          f"{at:>8.1f} / {med([x[1] for x in a]):>5.1f}x {at / bt:>12.2f}")
print("\ntraining step under torchrun, 2 ranks: median of the runs (mcr ms / speedup over gloo)")
for w in ("ddp", "fsdp2", "tp", "pipeline"):
    b, a = steps[("before", w)], steps[("after", w)]
    print(f"{w:>9} before {med([x[0] for x in b]):6.2f} ms / {med([x[1] for x in b]):.2f}x "
          f"after {med([x[0] for x in a]):6.2f} ms / {med([x[1] for x in a]):.2f}x "
          f"({len(b)} and {len(a)} runs; speedups {sorted(x[1] for x in b)} / "
          f"{sorted(x[1] for x in a)})")
