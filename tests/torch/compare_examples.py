"""Runs one workload of examples/torch at 2 ranks on every stack and compares what each reports:
the loss curve and the final loss (as printed: 5 and 6 decimals) and a checksum of every parameter
(13 digits; the embedding rows and experts that the backward exchange updates, which the loss can
hide) must be the same on torch's gloo and on mcr with its selection, MPI only and Gloo only. At 2 ranks every reduction is a sum of two
values (the same whatever the library) and all_to_all moves bits, so any difference is an error:
a scrambled chunk order or a lost rank's contribution changes the losses from the first step.

usage: compare_examples.py EXAMPLE.py STEPS LAUNCHER... -- PYTHON..."""

import math
import re
import subprocess
import sys

STACKS = ("torch-gloo", "mcr-auto", "mcr-mpi", "mcr-gloo")
LINE = re.compile(r"dist=(\S+) ranks=2 steps=(\d+) .*final_loss=(\S+) curve=\[([^\]]*)\]"
                  r" params=(\S+)")


def main():
    example, steps = sys.argv[1], sys.argv[2]
    split = sys.argv.index("--")
    launcher, python = sys.argv[3:split], sys.argv[split + 1:]
    reports = {}
    for stack in STACKS:
        cmd = launcher + python + [example, "--dist", stack, "--steps", steps, "--warmup", "1"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        found = [m for m in map(LINE.search, run.stdout.splitlines()) if m]
        if run.returncode != 0 or len(found) != 1 or found[0].group(1) != stack:
            print(run.stdout[-3000:], run.stderr[-3000:], sep="\n")
            sys.exit(f"FAIL: {stack}: exit status {run.returncode}, {len(found)} report line(s)")
        final, curve, params = found[0].group(3), found[0].group(4), found[0].group(5)
        if not math.isfinite(float(final)):
            sys.exit(f"FAIL: {stack}: final loss {final}")
        reports[stack] = (final, curve, params)
        print(f"{stack:>10}: final_loss={final} curve=[{curve}] params={params}", flush=True)
    want = reports["torch-gloo"]
    differ = [s for s, r in reports.items() if r != want]
    if differ:
        sys.exit(f"FAIL: {', '.join(differ)} differ from torch-gloo")
    print(f"{example}: every stack gives torch-gloo's losses and parameters", flush=True)


if __name__ == "__main__":
    main()
