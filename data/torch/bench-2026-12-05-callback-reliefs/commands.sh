#!/usr/bin/env bash
# Completions run one at a time without the right to call mcr, and a relief thread takes the
# communication thread's work over while it runs callbacks (docs/torch.md#callbacks-that-wait).
# BEFORE is the binding built from the commit before the change (a worktree at aab508a,
# `cmake --preset ci` and `cmake --build --preset ci --target mcr_torch_ext` there); AFTER is this
# checkout's build-ci. Runs alternate between the two, before first, so each pair shares the
# machine's state. Outputs land in set-$SET (default 1) next to this script.
set -euo pipefail
cd "$(dirname "$0")/../../.."
BEFORE=${BEFORE:?set BEFORE to the build-ci/python of the commit before the change}
AFTER=$PWD/build-ci/python
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PY=$PWD/.venv/bin/python
OUT=data/torch/bench-2026-12-05-callback-reliefs/set-${SET:-1}
mkdir -p $OUT
M="mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np 2"
TRUN="$PY -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 3 --tee 1"
side_path() { [[ $1 == before ]] && echo "$BEFORE" || echo "$AFTER"; }
for run in 1 2; do
  for side in before after; do
    # all_reduce per size under mpirun, mcr auto and torch's gloo in the same processes.
    { uptime; PYTHONPATH=$(side_path $side) $M -x PYTHONPATH -x OMP_NUM_THREADS \
        $PY -m mcr.torch.bench -b 4 -e 1M -f 4 --backends auto; uptime; } \
      > $OUT/bench-mpirun-$side-$run.txt 2>&1 </dev/null
    # One step of each workload (DDP, FSDP2, tensor parallel, pipeline 1F1B) under torchrun.
    { uptime; PYTHONPATH=$(side_path $side) $TRUN -m mcr.torch.steps --steps 10 --warmup 3 \
        --rounds 3 | grep -v '^\[default1\]'; uptime; } > $OUT/steps-torchrun-$side-$run.txt 2>&1
  done
done
# A further check of the larger sizes (large-sizes/): four pairs, before first.
OUT=data/torch/bench-2026-12-05-callback-reliefs/large-sizes
mkdir -p $OUT
for run in 1 2 3 4; do
  for side in before after; do
    { uptime; PYTHONPATH=$(side_path $side) $M -x PYTHONPATH -x OMP_NUM_THREADS \
        $PY -m mcr.torch.bench -b 256K -e 4M -f 4 --backends auto; uptime; } \
      > $OUT/bench-mpirun-$side-$run.txt 2>&1 </dev/null
  done
done
