# Sourced by the test scripts that judge an mpiexec job by its output (ends_job.sh,
# tests/faults/lifetimes/after_timeout.sh).
#
# Open MPI 4.1's mpiexec can crash in its own teardown (a segfault in PMIx_server_finalize under
# orte_finalize) after its ranks have exited, some without MPI_Finalize. Its handler prints the
# crash as lines tagged [host:pid] with mpiexec's own pid; mpiexec calls orte_finalize once its job
# has ended, so the job's work is over and the test is judged by what the ranks printed.
#
# launcher_teardown_crash PID OUTPUT: when OUTPUT holds a crash of PID whose backtrace is in
# orte_finalize, prints OUTPUT without PID's lines (a crash of any rank, another pid, stays) and
# returns 0; else prints nothing and returns 1.
launcher_teardown_crash() {
  local tag="^\\[[^]:]+:0*$1\\] "
  # One grep: `grep | grep -q` under pipefail fails when the first gets SIGPIPE.
  grep -qE "${tag}.*orte_finalize" <<<"$2" || return 1
  grep -vE "$tag" <<<"$2"
  return 0
}
