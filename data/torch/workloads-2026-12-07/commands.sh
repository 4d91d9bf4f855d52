#!/usr/bin/env bash
# The examples/torch workloads, 20 steps at 2 ranks, every stack, three rounds; the order of the
# stacks rotates by one each round so that no stack always runs first (or last) as the load drifts.
# Run from the repository root after scripts/build ci; writes raw.txt beside this file.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$PWD/build-ci/python OMP_NUM_THREADS=1
stacks=(torch-gloo mcr-mpi mcr-gloo mcr-auto)
: >"$here/raw.txt"
for round in 0 1 2; do
  for ex in dlrm moe; do
    for k in 0 1 2 3; do
      d=${stacks[$(((k + round) % 4))]}
      echo "round=$round load=$(cut -d' ' -f1 /proc/loadavg)" >>"$here/raw.txt"
      mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
        -np 2 .venv/bin/python -W ignore::UserWarning examples/torch/$ex.py --dist "$d" \
        --steps 20 | grep 'dist=' >>"$here/raw.txt"
    done
  done
done
