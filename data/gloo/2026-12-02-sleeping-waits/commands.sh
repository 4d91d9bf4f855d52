#!/bin/bash
# Gloo through mcr against raw Gloo, before and after the waits that sleep
# (docs/performance/bench-and-tuning.md#gloo-sleeping-waits). old: bench_gloo_raw built from
# bench/gloo_raw_probe.cpp of this commit against the library at be969b4 (worker + polling by
# default on this host, p2p waited by pool threads); new: the same probe against this commit's
# library. Same flags (preset ci).
# 2 cores, 2 ranks, nothing else running. Run from the repository root with OLD=<old build dir>.
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=data/gloo/2026-12-02-sleeping-waits
run() {  # build form round
  local args=()
  case $2 in async) args=(--async) ;; send_recv) args=(--op send_recv) ;; esac
  mpirun -np 2 --bind-to none --mca mpi_yield_when_idle 1 --mca btl self,vader \
    "$1/bin/bench_gloo_raw" "${args[@]}" --reps 21 --block-ms 20 2>&1
}
# Wall and CPU time, old and new alternated, two rounds per form.
for round in 1 2; do
  for form in sync async send_recv; do
    for b in old new; do
      dir=$([ $b = old ] && echo "$OLD" || echo build-ci)
      { echo "# $b $form round $round, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
        run "$dir" $form; } > "$out/time-$form-$b-$round.txt"
    done
  done
done
# Instructions per call, every thread of rank 0, 4 B - 64 KiB.
for form in sync async send_recv; do
  args=()
  case $form in async) args=(--async) ;; send_recv) args=(--op send_recv) ;; esac
  for b in old new; do
    dir=$([ $b = old ] && echo "$OLD" || echo build-ci)
    bench/gloo_instructions.sh "$dir" 200 "${args[@]}" --max-bytes 65536 \
      > "$out/instr-$form-$b.txt" 2>/dev/null
  done
done
