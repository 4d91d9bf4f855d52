#!/usr/bin/env bash
# Page-fault churn: every op at 1-64 MiB, MPI and Gloo, 2 ranks on this host, with freed memory
# kept (MCR_MALLOC_RETAIN=1, the default) and handed back (=0), alternating, two rounds.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
M="mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np 2"
out=data/memory/2026-12-01
for round in 1 2; do
  for retain in 0 1; do
    echo "round $round retain $retain load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/conditions.txt"
    $M -x MCR_MALLOC_RETAIN=$retain build-ci/bin/mcr bench \
      --op all_reduce,reduce_scatter,all_gather,all_to_all,broadcast --backend mpi,gloo \
      --sizes 1M,4M,16M,64M -q >"$out/round$round-retain$retain.txt"
  done
done

# The plain C probe (rs.c): MPI_Reduce_scatter_block of 16 MiB on 2 ranks, glibc defaults, then
# with the mmap threshold fixed at 128 KiB (no dynamic raise): rs.txt.
# mpicc -O2 rs.c -o /tmp/rs && for e in "" "-x MALLOC_MMAP_THRESHOLD_=131072"; do $M $e /tmp/rs 16777216; done
