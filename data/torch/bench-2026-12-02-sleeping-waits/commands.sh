#!/usr/bin/env bash
# Under torchrun (Gloo only, in mcr and in torch) after Gloo's waits that sleep and the
# communication thread that sleeps between Gloo completions
# (docs/performance/torch.md#torchrun-sleeping-waits):
# python -m mcr.torch.bench and python -m mcr.torch.steps, as in
# ../bench-2026-12-01-torch2/commands.sh. Run from the repository root after `cmake --preset ci &&
# cmake --build --preset ci`; outputs land next to this script.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD/build-ci/python OMP_NUM_THREADS=1
PY=$PWD/.venv/bin/python
OUT=data/torch/bench-2026-12-02-sleeping-waits
TRUN="$PY -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 3 --tee 1"
for run in 1 2; do
  { uptime; $TRUN -m mcr.torch.bench -b 4 -e 64M -f 4 | grep -v '^\[default1\]'; } > $OUT/bench-torchrun-$run.txt 2>&1
done
for run in 1 2 3; do
  { uptime; $TRUN -m mcr.torch.steps --steps 10 --warmup 3 --rounds 3 | grep -v '^\[default1\]'; } > $OUT/steps-torchrun-$run.txt 2>&1
done
