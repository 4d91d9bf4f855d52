#!/usr/bin/env python3
"""Prints the tables of docs/performance/torch.md#torchrun-16-cores from the logs next to this file:
per size, torch's gloo / mcr (auto and gloo) in every bench run; per workload, mcr's speedup in
every steps run, by setting, with the median."""
import pathlib
import re
import statistics

HERE = pathlib.Path(__file__).resolve().parent
ROW = re.compile(r"^\[default0\]:\s+(\S+)\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s")
STEP = re.compile(r"^\[default0\]:\s+(ddp|fsdp2|tp|pipeline)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x")


def bench():
    runs = sorted(HERE.glob("*/torch-bench-torchrun-*.log"))
    table = {}
    for log in runs:
        for line in log.read_text().splitlines():
            m = ROW.match(line)
            if m:
                size, gloo, auto, mgloo = m.group(1), *map(float, m.group(2, 3, 4))
                table.setdefault(size, []).append((gloo / auto, gloo / mgloo))
    print("size  | " + " | ".join(f"{p.parent.name[:1]}/{p.stem[-1]}" for p in runs)
          + "   (torch gloo / mcr auto, torch gloo / mcr gloo)")
    for size, cells in table.items():
        print(f"{size:>5} | " + " | ".join(f"{a:.2f} {g:.2f}" for a, g in cells))


def steps():
    by = {}
    for log in sorted(HERE.glob("*/torch-steps-torchrun-*.log")):
        setting = "always polled" if log.stem.endswith("-ab") else "defaults"
        key = (log.parent.name, setting)
        for line in log.read_text().splitlines():
            m = STEP.match(line)
            if m:
                by.setdefault(key, {}).setdefault(m.group(1), []).append(float(m.group(4)))
    for (run, setting), work in by.items():
        print(f"{run}, {setting}:")
        for name, xs in work.items():
            print(f"  {name:>8}: {' '.join(f'{x:.2f}' for x in xs)}  median "
                  f"{statistics.median(xs):.3f}, lowest {min(xs):.2f}")


if __name__ == "__main__":
    bench()
    steps()
