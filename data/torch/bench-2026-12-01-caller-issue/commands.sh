#!/usr/bin/env bash
# mcr vs torch's gloo with the caller's shortcut (MCR_TORCH_INLINE=1, the default) and without it
# (=0), alternating, no tuning table; then the plain synchronous 4-byte loop under both.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=data/torch/bench-2026-12-01-caller-issue
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 PYTHONPATH=build-ci/python
M="mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np 2"
echo "commit $(git rev-parse --short HEAD); $(date -u +%FT%TZ)" >"$out/conditions.txt"
for run in 1 2; do
  for inline in 1 0; do
    echo "load before run $run inline $inline: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/conditions.txt"
    $M -x MCR_TORCH_INLINE=$inline /usr/bin/python3 -m mcr.torch.bench -b 4 -e 64M -f 4 \
      >"$out/run$run-inline$inline.txt" 2>&1
  done
done
for inline in 1 0 1 0; do
  echo "load before loop inline $inline: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/conditions.txt"
  $M -x MCR_TORCH_INLINE=$inline /usr/bin/python3 data/torch/bench-2026-12-01-async-table/loop.py plain \
    | sed "s/^/inline=$inline /" >>"$out/loop.txt"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/conditions.txt"
