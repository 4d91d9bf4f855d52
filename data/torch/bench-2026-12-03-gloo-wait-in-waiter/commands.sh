#!/usr/bin/env bash
# Under torchrun (Gloo only, in mcr and in torch): a Gloo send or receive parked for its waiter,
# who blocks in Gloo's own wait (docs/performance/torch.md#torchrun-gloo-wait-in-waiter). BEFORE
# is the binding built from the commit before the change (a worktree at that commit,
# `cmake --preset ci` and `cmake --build --preset ci --target mcr_torch_ext` there); AFTER is this
# checkout's build-ci. Runs alternate between the two, before first, so each pair shares the
# machine's state. Outputs land in set-$SET (default 1) next to this script.
set -euo pipefail
cd "$(dirname "$0")/../../.."
BEFORE=${BEFORE:?set BEFORE to the build-ci/python of the commit before the change}
AFTER=$PWD/build-ci/python
export OMP_NUM_THREADS=1
PY=$PWD/.venv/bin/python
OUT=data/torch/bench-2026-12-03-gloo-wait-in-waiter/set-${SET:-1}
mkdir -p $OUT
TRUN="$PY -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 3 --tee 1"
side_path() { [[ $1 == before ]] && echo "$BEFORE" || echo "$AFTER"; }
# A point-to-point ping-pong (isend/irecv and wait, 256 floats), torch's gloo and then mcr, with
# each thread's CPU time over 3000 round trips: the script of the previous record.
PINGPONG=data/torch/bench-2026-12-02-waiter-drives/pingpong_threads.py
for run in 1 2 3; do
  for side in before after; do
    for b in gloo mcr; do
      PYTHONPATH=$(side_path $side) $TRUN $PINGPONG $b | grep 'us/roundtrip'
    done > $OUT/pingpong-torchrun-$side-$run.txt 2>&1
  done
done
# One step of each workload (DDP, FSDP2, tensor parallel, pipeline 1F1B), mcr against torch's gloo.
for run in 1 2 3; do
  for side in before after; do
    { uptime; PYTHONPATH=$(side_path $side) $TRUN -m mcr.torch.steps --steps 10 --warmup 3 --rounds 3 |
        grep -v '^\[default1\]'; uptime; } > $OUT/steps-torchrun-$side-$run.txt 2>&1
  done
done
