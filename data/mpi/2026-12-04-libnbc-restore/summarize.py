"""Medians of place.sh's runs: time per all_reduce (us) for each ranks, place, setting and size,
and the ratio libnbc's own / mcr's choice (above 1: mcr's choice is faster)."""
import glob
import os
import re
import statistics
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
times = defaultdict(list)  # (np, place, setting, size) -> [us]
for path in glob.glob(os.path.join(HERE, "place-*.txt")):
    np_, _, place, setting = re.match(r"place-(\d+)-(\d+)-(\w+)-(\w+)\.txt",
                                      os.path.basename(path)).groups()
    for line in open(path):
        f = line.split()
        if len(f) >= 10 and f[0].isdigit() and f[3] == "all_reduce":
            times[(int(np_), place, setting, int(f[0]))].append(float(f[7]))
for np_ in sorted({k[0] for k in times}):
    for place in ("out", "in"):
        print(f"\n{np_} ranks, {place} of place: median us (runs) and libnbc / mcr")
        print(f"{'bytes':>10} {'mcr':>10} {'libnbc':>10} {'blocking':>10} {'ratio':>6}")
        for size in sorted({k[3] for k in times if k[0] == np_ and k[1] == place}):
            m = {s: statistics.median(times[(np_, place, s, size)])
                 for s in ("mcr", "libnbc", "blocking") if times[(np_, place, s, size)]}
            print(f"{size:>10} {m['mcr']:>10.1f} {m['libnbc']:>10.1f} {m['blocking']:>10.1f} "
                  f"{m['libnbc'] / m['mcr']:>6.2f}")
