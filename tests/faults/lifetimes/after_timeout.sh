#!/usr/bin/env bash
# A job whose operation timed out ends within the timeout, not when the slow peer arrives
# (docs/reliability.md, "Finalize after a failure"). Rank 1 reaches an all_reduce SLOW_MS late;
# rank 0 times out after MCR_TIMEOUT and calls finalize(). Passes when rank 0 timed out, said how
# the process ends, the job ended well before the slow peer would have arrived, mpiexec's exit
# status is one of the documented ones, and nothing crashed.
#   after_timeout.sh MPIEXEC PROGRAM BACKEND sync|async SLOW_MS
set -uo pipefail
mpiexec=$1 program=$2 backend=$3 form=$4 slow_ms=$5
start=$(date +%s%N)
source "$(dirname "$0")/../../../scripts/lib.sh"
source "$(dirname "$0")/../../support/launcher_teardown.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$mpiexec" "${MCR_MPI_FLAGS[@]}" -np 2 "$program" after_timeout --backend="$backend" "$form" \
  "$slow_ms" >"$log" 2>&1 &
launcher=$!
wait "$launcher"
rc=$?
took_ms=$((($(date +%s%N) - start) / 1000000))
out=$(cat "$log")
printf '%s\n' "$out"
echo "after_timeout.sh: mpiexec exited with $rc after $took_ms ms (slow peer due at $slow_ms ms)"
if ((rc > 128)) && kept=$(launcher_teardown_crash "$launcher" "$out"); then
  echo "after_timeout.sh: mpiexec crashed in its own teardown (orte_finalize) after its job had" \
    "ended: judged by what the ranks printed, as status 1"
  out=$kept
  rc=1
fi
fail() {
  echo "after_timeout.sh: FAIL: $*" >&2
  exit 1
}
grep -q "finalize_test rank 0: FAIL" <<<"$out" && fail "rank 0 reported a failure"
# A synchronous MPI collective cannot be interrupted: the watchdog ends the job (124) before
# anything else can happen. Otherwise rank 0's operation times out and finalize() says how it ends.
if [[ $backend == mpi && $form == sync && ${MCR_VERIFY:-first} == 0 ]]; then
  grep -q "blocked for more than its timeout" <<<"$out" || fail "the watchdog did not end the job"
else
  grep -q "finalize_test rank 0: timed out" <<<"$out" || fail "rank 0 did not time out"
  grep -q "mcr\[0\]: finalize after a failure" <<<"$out" || fail "finalize() did not say how it ends"
fi
# 1: an MPI operation was abandoned, MPI is not finalized and mpiexec ends the job when rank 0
# exits; 124: MPI_Finalize (or the operation) blocked beyond the timeout and the watchdog aborted.
[[ $rc -eq 1 || $rc -eq 124 ]] || fail "mpiexec exited with $rc, not 1 or 124"
((took_ms < slow_ms)) || fail "the job took $took_ms ms: it waited for the slow peer"
if grep -qiE "segmentation fault|signal 11|SIGSEGV|core dumped" <<<"$out"; then
  fail "a rank crashed"
fi
echo "after_timeout.sh: OK"
