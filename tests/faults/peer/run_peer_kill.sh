#!/usr/bin/env bash
# Drives one peer-failure scenario (docs/reliability.md, "Peer failure"): launches peer_kill, one of
# whose ranks kills itself with SIGKILL, and checks what every survivor reports and how fast.
#
#   run_peer_kill.sh MODE LAUNCH PROG NPROC BACKEND VICTIM AT FORM BOUND_MS EXPECT [SIGNAL]
#
# MODE     torchrun: LAUNCH is torchrun_launch (no MPI; the launcher does not kill survivors).
#            Every survivor must print "caught <error> after <ms> ms in operation AT: <message>"
#            with ms <= BOUND_MS and the message matching EXPECT (an extended regex), and must
#            leave finalize() within BOUND_MS (AT=finalize: only the latter).
#          mpiexec: LAUNCH is mpiexec with its default settings, which end the whole job when a
#            rank dies; the output must match EXPECT and the job must end within BOUND_MS of its
#            launch (start-up included).
#          mpiexec-noabort: as mpiexec with orte_abort_on_non_zero_status=0, so that only mcr can
#            end the survivors; the output must match EXPECT within BOUND_MS.
# SIGNAL "stop" freezes the victim instead (peer_kill --signal=stop).
# No survivor may print "no error" (finished every operation as if nothing happened).
set -u
mode=$1 launch=$2 prog=$3 nproc=$4 backend=$5 victim=$6 at=$7 form=$8 bound_ms=$9 expect=${10}
signal=${11:-kill}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
args=(--backend="$backend" --victim="$victim" --at="$at" --form="$form" --signal="$signal")
source "$(dirname "$0")/../../../scripts/lib.sh"
mpi_flags=("${MCR_MPI_FLAGS[@]}" -np "$nproc")

start=$(date +%s%N)
case $mode in
  torchrun) "$launch" --nproc "$nproc" --timeout 60 -- "$prog" "${args[@]}" >"$out" 2>&1 ;;
  mpiexec) "$launch" "${mpi_flags[@]}" "$prog" "${args[@]}" >"$out" 2>&1 ;;
  mpiexec-noabort)
    "$launch" --mca orte_abort_on_non_zero_status 0 "${mpi_flags[@]}" "$prog" "${args[@]}" \
      >"$out" 2>&1
    ;;
  *)
    echo "run_peer_kill.sh: unknown mode '$mode'" >&2
    exit 2
    ;;
esac
status=$?
wall_ms=$((($(date +%s%N) - start) / 1000000))

cat "$out"
echo "---- run_peer_kill.sh: $mode $backend np=$nproc victim=$victim at=$at form=$form:" \
  "launcher status $status after $wall_ms ms"

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

if grep -q "no error" "$out"; then fail "a survivor finished every operation without an error"; fi
[ "$status" -ne 0 ] || fail "the launcher reported success although rank $victim was killed"

if [ "$mode" = torchrun ]; then
  grep -q "torchrun_launch: rank $victim killed by signal 9" "$out" ||
    fail "rank $victim was not killed by SIGKILL"
  for ((r = 0; r < nproc; r++)); do
    [ "$r" -eq "$victim" ] && continue
    if [ "$at" != finalize ]; then
      line=$(grep -E "^peer_kill: rank $r caught [A-Za-z]+ after [0-9]+ ms in operation $at: " "$out")
      if [ -z "$line" ]; then
        fail "rank $r printed no error for operation $at"
      else
        ms=$(sed -E 's/.* after ([0-9]+) ms.*/\1/' <<<"$line")
        [ "$ms" -le "$bound_ms" ] || fail "rank $r got its error after $ms ms (bound $bound_ms)"
        grep -Eq -- "$expect" <<<"$line" || fail "rank $r's error does not match /$expect/: $line"
      fi
    fi
    line=$(grep -E "^peer_kill: rank $r left finalize\(\) after [0-9]+ ms" "$out")
    if [ -z "$line" ]; then
      fail "rank $r did not leave finalize()"
    else
      ms=$(sed -E 's/.* after ([0-9]+) ms.*/\1/' <<<"$line")
      [ "$ms" -le "$bound_ms" ] || fail "rank $r left finalize() after $ms ms (bound $bound_ms)"
    fi
  done
else
  grep -Eq -- "$expect" "$out" || fail "the output does not match /$expect/"
  [ "$wall_ms" -le "$bound_ms" ] || fail "the job ended after $wall_ms ms (bound $bound_ms)"
fi

if [ "$failures" -ne 0 ]; then exit 1; fi
echo "PASS"
