#!/usr/bin/env bash
# perf.dispatch_instructions: instructions per call on the synchronous MPI path, counted by
# callgrind, against budgets (docs/performance/dispatch.md#instruction-budget). Callgrind counts
# the instructions the program executes, not time: for a given build the count is the same on a
# quiet machine and on a loaded one, so this guard cannot be fooled by noise as a timing can.
#
#   dispatch_instructions.sh PROGRAM MPIEXEC RANKS CALLS BUDGET...
#
# PROGRAM is bench_dispatch_instructions; RANKS a space-separated list of rank counts (1 runs the
# program directly, more under MPIEXEC); each BUDGET is "<ranks>:<path>:<part>=<instructions>",
# with path override or automatic, and part
#   dispatch  the facade's inclusive count minus the MPI backend's start()
#             (docs/performance/dispatch.md#core-reorganised: validation, selection, sequence,
#             flight recorder, watchdog, virtual call),
#   backend   the MPI backend's start() minus the MPI library call (mcr's mapping onto MPI).
# Every budget given must be met. Exit status 77 (ctest's SKIP_RETURN_CODE) only when valgrind is
# not installed.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

program=$1 mpiexec=$2 ranks_list=$3 calls=$4
shift 4
budgets=("$@")

for tool in valgrind callgrind_annotate; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool is not installed; the dispatch instruction budget needs valgrind (apt-get install valgrind)"
    exit 77
  fi
done

# The measured path is the default one: no rules, table, verification mode or log of the caller's.
while IFS='=' read -r name _; do
  [[ $name == MCR_* ]] && unset "$name"
done < <(env)

work=$(mktemp -d "${TMPDIR:-/tmp}/mcr-perf.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Instructions collected inside the facade only (--toggle-collect), from the program's client
# requests on: each phase is dumped to its own file (.1 override, .2 automatic).
callgrind=(valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no
           "--toggle-collect=mcr::Communicator::all_reduce(*")

# Inclusive count of the first function whose name matches an extended regex; 0 when none does.
# (awk reads to the end: an early exit would end callgrind_annotate with SIGPIPE.)
inclusive() {
  local file=$1 pattern=$2
  callgrind_annotate --inclusive=yes --threshold=100 "$file" 2>/dev/null |
    awk -v re="$pattern" '!found && $0 ~ re && $1 ~ /^[0-9,]+$/ { gsub(",", "", $1); found = $1 }
                          END { print found ? found : 0 }'
}

facade_re='mcr::Communicator::all_reduce\(mcr::Tensor const&, mcr::Tensor const&'
backend_re='MpiBackend::start\('
library_re='[: ]P?MPI_Allreduce '

failed=0
declare -A measured
for ranks in $ranks_list; do
  out="$work/np$ranks"
  mkdir -p "$out"
  if [[ $ranks == 1 ]]; then
    "${callgrind[@]}" "--callgrind-out-file=$out/cg" "$program" --calls "$calls" \
      >"$out/stdout" 2>"$out/stderr" || { cat "$out/stdout" "$out/stderr"; exit 1; }
  else
    "$mpiexec" "${MCR_MPI_FLAGS[@]}" -np "$ranks" \
      "${callgrind[@]}" "--callgrind-out-file=$out/cg.%q{OMPI_COMM_WORLD_RANK}" \
      "$program" --calls "$calls" >"$out/stdout" 2>"$out/stderr" ||
      { cat "$out/stdout" "$out/stderr"; exit 1; }
  fi
  if ! grep -q "client_requests yes" "$out/stdout"; then
    cat "$out/stdout"
    echo "FAIL: $program was built without <valgrind/callgrind.h>: install valgrind's headers and rebuild"
    exit 1
  fi
  prefix="$out/cg"
  [[ $ranks == 1 ]] || prefix="$out/cg.0"  # rank 0's files; every rank runs the same path
  echo "$ranks rank(s), $calls calls per path: instructions per call"
  printf '  %-10s %12s %12s %12s\n' path dispatch backend "whole call"
  for phase in 1:override 2:automatic; do
    file="$prefix.${phase%%:*}" path=${phase#*:}
    if [[ ! -s $file ]]; then
      echo "FAIL: callgrind wrote no $file"
      exit 1
    fi
    facade=$(inclusive "$file" "$facade_re")
    backend=$(inclusive "$file" "$backend_re")
    library=$(inclusive "$file" "$library_re")
    if ((facade == 0 || backend == 0 || library == 0)); then
      echo "FAIL: $file lacks the facade ($facade), MpiBackend::start ($backend) or MPI_Allreduce ($library)"
      callgrind_annotate --inclusive=yes --threshold=100 "$file" | head -40
      exit 1
    fi
    dispatch=$(awk -v a="$facade" -v b="$backend" -v n="$calls" 'BEGIN { printf "%.2f", (a - b) / n }')
    mapping=$(awk -v a="$backend" -v b="$library" -v n="$calls" 'BEGIN { printf "%.2f", (a - b) / n }')
    whole=$(awk -v a="$facade" -v n="$calls" 'BEGIN { printf "%.2f", a / n }')
    printf '  %-10s %12s %12s %12s\n' "$path" "$dispatch" "$mapping" "$whole"
    measured["$ranks:$path:dispatch"]=$dispatch
    measured["$ranks:$path:backend"]=$mapping
  done
done

for budget in "${budgets[@]}"; do
  key=${budget%%=*} limit=${budget#*=}
  value=${measured[$key]:-}
  if [[ -z $value ]]; then
    echo "FAIL: budget $key names nothing this run measured"
    failed=1
  elif awk -v v="$value" -v l="$limit" 'BEGIN { exit !(v > l) }'; then
    echo "FAIL: $key: $value instructions per call, budget $limit (docs/performance/dispatch.md#instruction-budget)"
    failed=1
  else
    echo "ok   $key: $value <= $limit"
  fi
done
exit $failed
