#!/usr/bin/env bash
# Every workload of mcr.torch.steps (DDP, FSDP2, tensor parallel, pipeline 1F1B) under torchrun
# with the binding's defaults at this commit: RUNS (default 6) runs, each one process pair that
# times mcr against torch's gloo. Output: steps-<n>.txt next to this script.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export OMP_NUM_THREADS=1 PYTHONPATH=$PWD/build-ci/python
OUT=data/torch/bench-2026-12-04-ddp-torchrun-knobs
TRUN=".venv/bin/python -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 3 --tee 1"
for run in $(seq 1 "${RUNS:-6}"); do
  { uptime; $TRUN -m mcr.torch.steps --steps 10 --warmup 3 --rounds 3 | grep -v '^\[default1\]'
    uptime; } > $OUT/steps-$run.txt 2>&1
done
grep -H 'x$' $OUT/steps-*.txt
