#!/usr/bin/env python3
"""Medians over the rounds of run.sh, per size: mcr's choice, libnbc's own choice, the blocking
call (µs), and libnbc's / mcr's; then the torch bench's mcr column under both settings."""
import pathlib
import re
import statistics

HERE = pathlib.Path(__file__).resolve().parent
BENCH = re.compile(r"^\s+(\d+)\s+\d+\s+\S+\s+all_reduce\s+\S+\s+\S+\s+\S+\s+([\d.]+)")
TORCH = re.compile(r"^\s+(\S+)\s+\d+\s+([\d.]+)\s+([\d.]+)\s")


def table(pattern, rx, column):
    out = {}
    for f in sorted(HERE.glob(pattern)):
        setting = f.stem.rsplit("-", 1)[1]
        for line in f.read_text().splitlines():
            m = rx.match(line)
            if m:
                out.setdefault(m.group(1), {}).setdefault(setting, []).append(float(m.group(column)))
    return out


print("mcr bench --async --place in, MPI, 2 ranks: median us (rounds)")
for size, s in table("bench-*.txt", BENCH, 2).items():
    med = {k: statistics.median(v) for k, v in s.items()}
    print(f"{size:>9}  mcr {med['mcr']:9.2f}  libnbc {med['libnbc']:9.2f}  blocking "
          f"{med['blocking']:9.2f}  libnbc/mcr {med['libnbc'] / med['mcr']:.2f}  "
          f"mcr/blocking {med['mcr'] / med['blocking']:.2f}")
print("python -m mcr.torch.bench under mpirun: torch gloo and mcr (auto = MPI) us, per round")
for size, s in table("torch-*.txt", TORCH, 3).items():
    gloo = table("torch-*.txt", TORCH, 2)[size]
    print(f"{size:>5}  mcr choice {s['mcr']}  libnbc {s['libnbc']}  torch gloo "
          f"{gloo['mcr'] + gloo['libnbc']}")
