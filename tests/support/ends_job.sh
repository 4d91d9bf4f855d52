#!/usr/bin/env bash
# Runs a multi-rank test that deliberately abandons an MPI operation (a timeout on purpose). After
# that, finalize() leaves MPI initialised and mpiexec ends the job as documented (docs/
# reliability.md, "Finalize after a failure"): exit status 1, and "exiting improperly". Passes
# when the job ended that way, the test printed PASSED (a regular expression: every rank's tests
# passed), and nothing crashed.
#   ends_job.sh PASSED COMMAND...
set -uo pipefail
passed=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
fail() {
  echo "ends_job.sh: FAIL: $*" >&2
  exit 1
}
if [[ $rc -eq 0 ]]; then
  # No MPI operation was abandoned in this run (the timeouts fell on other libraries): MPI was
  # finalized normally, which is as good.
  grep -qE "$passed" <<<"$out" || fail "the tests did not pass"
  exit 0
fi
[[ $rc -eq 1 ]] || fail "mpiexec exited with $rc, not 1 (0 or the documented 1 after a failure)"
grep -qE "$passed" <<<"$out" || fail "the tests did not pass on every rank"
grep -q "MPI is not finalized" <<<"$out" || fail "no rank said why MPI was not finalized"
# Case matters: a rank that finalizes MPI says "... (else the job is aborted)".
if grep -qE "[Ss]egmentation fault|signal 11|SIGSEGV|core dumped|Process received signal|exited on signal" <<<"$out"; then
  fail "a rank crashed"
fi
exit 0
