#!/usr/bin/env bash
# mcr's asynchronous MPI all_reduce out of place and in place, with mcr's choice of libnbc's
# algorithm against libnbc's own (OMPI_MCA_coll_libnbc_iallreduce_algorithm=0, which mcr keeps),
# in turns, ROUNDS rounds (default 3), at NPS ranks (default "2 3"; the record also ran NPS=4) on
# this host; the blocking call as the reference. Output: place-<ranks>-<round>-<place>-<setting>.txt next to this script.
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=data/mpi/2026-12-04-libnbc-restore
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SIZES=64K,256K,1M,4M,16M,64M
for np in ${NPS:-2 3}; do
  MPI="mpirun -np $np --oversubscribe --bind-to none"
  for round in $(seq 1 "${ROUNDS:-3}"); do
    for place in out in; do
      order="mcr libnbc blocking"; ((round % 2)) || order="blocking libnbc mcr"
      for s in $order; do
        env=(); async=(--async)
        [[ $s == libnbc ]] && env=(-x OMPI_MCA_coll_libnbc_iallreduce_algorithm=0)
        [[ $s == blocking ]] && async=()
        { uptime; $MPI "${env[@]}" build-ci/bin/mcr bench --backend mpi --place "$place" \
            "${async[@]}" --sizes $SIZES -n 10 -q; } > "$OUT/place-$np-$round-$place-$s.txt" 2>&1
      done
    done
  done
done
