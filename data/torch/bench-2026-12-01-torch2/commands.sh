#!/usr/bin/env bash
# torch 2.11 (the pinned wheel in .venv) against the mcr backend: python -m mcr.torch.bench under
# mpirun and under torchrun, 2 ranks, no tuning table, and the training-step benchmark
# (python -m mcr.torch.steps). Run from the repository root after `cmake --preset ci && cmake
# --build --preset ci`; outputs land next to this script.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD/build-ci/python OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PY=$PWD/.venv/bin/python
OUT=data/torch/bench-2026-12-01-torch2
MPI="mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca btl self,vader -np 2"
TRUN="$PY -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 3 --tee 1"
for run in 1 2; do
  { uptime; $MPI $PY -W ignore -m mcr.torch.bench -b 4 -e 64M -f 4; } > $OUT/bench-mpirun-$run.txt 2>&1
  { uptime; $TRUN -m mcr.torch.bench -b 4 -e 64M -f 4 | grep -v '^\[default1\]'; } > $OUT/bench-torchrun-$run.txt 2>&1
done
{ uptime; $MPI $PY -W ignore -m mcr.torch.steps --steps 10 --warmup 3 --rounds 3; } > $OUT/steps-mpirun.txt 2>&1
{ uptime; $TRUN -m mcr.torch.steps --steps 10 --warmup 3 --rounds 3 | grep -v '^\[default1\]'; } > $OUT/steps-torchrun.txt 2>&1
