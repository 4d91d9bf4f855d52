"""Median of mcr's speedup over torch's gloo per workload and setting, over the runs of one folder
(set-N: run-<setting>-<n>.txt; or this folder's steps-<n>.txt as setting "steps").

    python3 summarize.py set-2
"""

import pathlib
import re
import statistics
import sys

LINE = re.compile(r"^\[default0\]:\s+(\w+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x$")


def main():
    folder = pathlib.Path(sys.argv[1])
    found = {}
    for f in sorted(folder.glob("*.txt")):
        m = re.match(r"(?:run-(\w+)|(steps))-(\d+)\.txt$", f.name)
        if not m:
            continue
        setting = m.group(1) or m.group(2)
        for line in f.read_text().splitlines():
            hit = LINE.match(line)
            if hit:
                found.setdefault((hit.group(1), setting), []).append(float(hit.group(4)))
    for (workload, setting), speedups in sorted(found.items()):
        runs = " ".join(f"{s:.2f}" for s in speedups)
        print(f"{workload:9} {setting:9} runs {len(speedups):2}  median {statistics.median(speedups):.3f}"
              f"  min {min(speedups):.2f}  max {max(speedups):.2f}  ({runs})")


if __name__ == "__main__":
    main()
