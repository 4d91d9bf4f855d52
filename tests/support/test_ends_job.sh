#!/usr/bin/env bash
# ends_job.sh's verdicts, with stand-in launchers that end as Open MPI's mpiexec does after a test
# that abandons an MPI operation: the documented exit status 1, or a crash of mpiexec itself in its
# teardown (orte_finalize) after the ranks have exited, which must not fail a test whose ranks all
# passed, while a crash of a rank must.
set -uo pipefail
ends_job=$(dirname "$0")/ends_job.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# A launcher script: one "rank" (a child process) prints the given lines, then the launcher ends
# with the given action ("exit N", or "crash FRAME": Open MPI's crash banner with the launcher's
# own pid and FRAME in its backtrace, then SIGSEGV).
launcher() {
  local name=$1 action=$2
  shift 2
  {
    echo '#!/usr/bin/env bash'
    echo 'ulimit -c 0  # the stand-in crash leaves no core file'
    printf 'printf "%%s\\n"'
    printf ' %q' "$@"
    echo ' &'
    echo 'wait'
    case $action in
    exit*) echo "$action" ;;
    crash*)
      echo 'tag=$(printf "[vm:%05d]" $$)'
      echo 'echo "$tag *** Process received signal ***"'
      echo 'echo "$tag Signal: Segmentation fault (11)"'
      printf 'echo "$tag [ 1] /lib/libopen-rte.so.40(%s+0x5d)[0x7f]"\n' "${action#crash }"
      echo 'kill -SEGV $$'
      ;;
    esac
  } >"$work/$name"
  chmod +x "$work/$name"
  echo "$work/$name"
}

expect() {
  local want=$1 what=$2
  shift 2
  "$ends_job" "PASSED" "$@" >"$work/out" 2>&1
  local rc=$?
  if [[ $want == pass && $rc -ne 0 ]] || [[ $want == fail && $rc -eq 0 ]]; then
    echo "FAIL: $what: expected the wrapper to $want, it exited $rc; it printed:"
    sed 's/^/  | /' "$work/out"
    failures=$((failures + 1))
  else
    echo "ok: $what ($want)"
  fi
}

abandoned="rank 0: MPI is not finalized: the launcher ends the job"
rank_crash="[vm:00042] *** Process received signal ***"

expect pass "the documented ending (status 1)" "$(launcher a 'exit 1' PASSED "$abandoned")"
expect fail "status 1 without the tests passing" "$(launcher b 'exit 1' FAILED "$abandoned")"
expect pass "the launcher crashed in orte_finalize" \
  "$(launcher c 'crash orte_finalize' PASSED "$abandoned")"
expect pass "the launcher crashed in orte_finalize after a normal finalize" \
  "$(launcher d 'crash orte_finalize' PASSED)"
expect fail "the launcher crashed in orte_finalize, a rank crashed too" \
  "$(launcher e 'crash orte_finalize' PASSED "$abandoned" "$rank_crash")"
expect fail "the launcher crashed in orte_finalize after a normal finalize, a rank crashed too" \
  "$(launcher i 'crash orte_finalize' PASSED "$rank_crash")"
expect fail "the launcher crashed in orte_finalize, the tests failed" \
  "$(launcher f 'crash orte_finalize' FAILED "$abandoned")"
expect fail "the launcher crashed elsewhere" \
  "$(launcher g 'crash orte_plm_base_launch_apps' PASSED "$abandoned")"
expect fail "a rank crashed under the documented ending" \
  "$(launcher h 'exit 1' PASSED "$abandoned" "$rank_crash")"

((failures == 0)) || {
  echo "$failures case(s) failed"
  exit 1
}
echo "every case as expected"
