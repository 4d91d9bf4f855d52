#!/usr/bin/env bash
# MPI's nonblocking all_reduce through mcr with the libnbc algorithm mcr asks for per call
# (src/comm/backends/mpi/mpi_nbc.hpp) against libnbc's own choice
# (OMPI_MCA_coll_libnbc_iallreduce_algorithm=0: the user's setting, which mcr keeps), the two in
# turns, ROUNDS rounds (default 3), 2 ranks on this host; the blocking MPI_Allreduce in each round
# as the reference; then python -m mcr.torch.bench under mpirun from 64 KiB (the binding issues
# every operation in the nonblocking form, in place), both settings in turns, two rounds.
# Output: bench-<round>-<setting>.txt and torch-<round>-<setting>.txt next to this script.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=data/mpi/2026-12-04-libnbc-iallreduce
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI="mpirun -np 2 --oversubscribe --bind-to none"
SIZES=4,1K,16K,64K,256K,1M,4M,16M,64M
setting_env() { [[ $1 == libnbc ]] && echo "-x OMPI_MCA_coll_libnbc_iallreduce_algorithm=0"; true; }
for round in $(seq 1 "${ROUNDS:-3}"); do
  order="mcr libnbc"; ((round % 2)) || order="libnbc mcr"
  for s in $order; do
    # shellcheck disable=SC2046
    { uptime; $MPI $(setting_env "$s") build-ci/bin/mcr bench --backend mpi --place in --async \
        --sizes $SIZES -n 10 -q; } > "$OUT/bench-$round-$s.txt" 2>&1
  done
  { uptime; $MPI build-ci/bin/mcr bench --backend mpi --place in --sizes $SIZES -n 10 -q; } \
    > "$OUT/bench-$round-blocking.txt" 2>&1
done
for round in 1 2; do
  order="mcr libnbc"; ((round % 2)) || order="libnbc mcr"
  for s in $order; do
    # shellcheck disable=SC2046
    { uptime; $MPI $(setting_env "$s") -x PYTHONPATH=build-ci/python -x OMP_NUM_THREADS=1 \
        .venv/bin/python -W ignore -m mcr.torch.bench -b 64K -e 64M -f 4 --backends auto; } \
      > "$OUT/torch-$round-$s.txt" 2>&1
  done
done
