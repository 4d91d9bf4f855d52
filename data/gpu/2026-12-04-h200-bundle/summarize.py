#!/usr/bin/env python3
"""Summarises the bench_gloo_raw logs of this record: per run, the ratio mcr / raw (the probe's
median of paired ratios) over 4 B - 64 KiB and 256 KiB - 64 MiB (range and median), its largest
value with the size, and the CPU per call mcr / raw (median over the sizes).

    python3 summarize.py [RUN_DIR...]     (default: every numbered run folder here)
"""
import glob
import os
import statistics
import sys


def rows(path):
    for line in open(path):
        f = line.split()
        if len(f) == 8 and f[0].isdigit():
            yield int(f[0]), float(f[4]), float(f[5]), float(f[6])


def span(values):
    return f"{min(values):.2f}-{max(values):.2f} ({statistics.median(values):.2f})"


here = os.path.dirname(os.path.abspath(__file__))
runs = sys.argv[1:] or sorted(glob.glob(os.path.join(here, "[0-9]-*")))
print(f"{'run':<28} {'log':<34} {'4 B-64 KiB':<18} {'256 KiB-64 MiB':<18} {'largest':<16} cpu")
for run in runs:
    for log in sorted(glob.glob(os.path.join(run, "gloo-raw-*.log"))):
        r = list(rows(log))
        if not r:
            continue
        small = [x[1] for x in r if x[0] <= 65536]
        large = [x[1] for x in r if x[0] > 65536]
        worst = max(r, key=lambda x: x[1])
        cpu = statistics.median(x[3] / x[2] for x in r)
        print(f"{os.path.basename(run):<28} {os.path.basename(log)[9:-4]:<34} {span(small):<18} "
              f"{span(large) if large else '-':<18} {worst[1]:.3f} @ {worst[0]:<8} {cpu:.2f}")
