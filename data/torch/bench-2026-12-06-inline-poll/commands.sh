#!/usr/bin/env bash
# The thread that brought the runtime up now polls its synchronous operation itself and stops as
# soon as another thread's post is queued (going on as a waiter, which issues it); a Gloo operation
# is waited for as a waiter does (a send or receive in Gloo's own wait, a collective after one
# look).
# Before, it waited for its operation alone inside Work::wait, holding back other threads' posts
# (docs/torch.md, "Threads"). BEFORE is the binding built from the commit before the change, AFTER
# this checkout's; both directories hold a built `mcr` Python package (build-ci/python). Runs
# alternate between the two, before first, so each pair shares the machine's state. Outputs land
# in set-$SET (default 1) next to this script.
set -euo pipefail
cd "$(dirname "$0")/../../.."
BEFORE=${BEFORE:?set BEFORE to the build-ci/python of the commit before the change}
AFTER=${AFTER:-$PWD/build-ci/python}
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PY=$PWD/.venv/bin/python
OUT=data/torch/bench-2026-12-06-inline-poll/set-${SET:-1}
mkdir -p $OUT
M="mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np 2"
TRUN="$PY -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 3 --tee 1"
side_path() { [[ $1 == before ]] && echo "$BEFORE" || echo "$AFTER"; }
for run in 1 2; do
  for side in before after; do
    # Synchronous all_reduce per size, mcr auto (MPI under mpirun, Gloo under torchrun) and
    # torch's gloo in the same processes.
    { uptime; PYTHONPATH=$(side_path $side) $M -x PYTHONPATH -x OMP_NUM_THREADS \
        $PY -m mcr.torch.bench -b 4 -e 1M -f 4 --backends auto; uptime; } \
      > $OUT/bench-mpirun-$side-$run.txt 2>&1 </dev/null
    { uptime; PYTHONPATH=$(side_path $side) $TRUN -m mcr.torch.bench -b 4 -e 1M -f 4 \
        --backends auto | grep -v '^\[default1\]'; uptime; } \
      > $OUT/bench-torchrun-$side-$run.txt 2>&1 </dev/null
  done
done
