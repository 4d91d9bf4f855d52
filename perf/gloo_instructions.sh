#!/usr/bin/env bash
# Instructions per call of raw Gloo and of the same operation through mcr's "gloo" backend,
# counted by callgrind over every thread of rank 0 (the caller, gloo's I/O thread, mcr's worker and
# waiter threads), in one run of bench_gloo_raw --count
# (docs/performance/bench-and-tuning.md#gloo-sleeping-waits).
# Counts do not depend on how busy the machine is, except where a thread polls: a polling wait
# executes instructions for as long as it waits, which is the cost it puts on a shared core.
#
#   perf/gloo_instructions.sh BUILD_DIR [CALLS] [bench_gloo_raw options...]
#
# e.g. perf/gloo_instructions.sh build-ci 200 --op send_recv --max-bytes 65536
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"

build=${1:?usage: perf/gloo_instructions.sh BUILD_DIR [CALLS] [options...]}
calls=${2:-200}
shift $(($# >= 2 ? 2 : 1))
for tool in valgrind mpirun; do
  command -v "$tool" >/dev/null || { echo "gloo_instructions.sh: $tool is not installed" >&2; exit 2; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/mcr-gloo-instr.XXXXXX")
trap 'rm -rf "$work"' EXIT

mpirun "${MCR_MPI_FLAGS[@]}" -np 2 \
  valgrind --tool=callgrind --collect-atstart=yes --dump-instr=no \
  "--callgrind-out-file=$work/cg.%q{OMPI_COMM_WORLD_RANK}" \
  "$build/bin/bench_gloo_raw" --count "$calls" "$@" 2>"$work/stderr" | tee "$work/stdout" >&2 ||
  { cat "$work/stderr" >&2; exit 1; }

# Rank 0's dumps, in order: raw then mcr at each size.
mapfile -t sizes < <(awk '$2 == "counted" { print $1 }' "$work/stdout")
total() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }
printf '%10s %14s %14s %14s %7s\n' bytes raw_instr/call mcr_instr/call mcr_added/call ratio
k=1
for bytes in "${sizes[@]}"; do
  raw=$(total "$work/cg.0.$k")
  mcr=$(total "$work/cg.0.$((k + 1))")
  awk -v b="$bytes" -v r="$raw" -v m="$mcr" -v n="$calls" \
    'BEGIN { printf "%10d %14.0f %14.0f %14.0f %7.3f\n", b, r / n, m / n, (m - r) / n, m / r }'
  k=$((k + 2))
done
