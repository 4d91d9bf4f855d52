#!/usr/bin/env bash
# A fault on the namespace cluster (docs/reliability.md, "On the cluster"): ranks loop on all_reduce
# (collective_loop), then one rank is killed with SIGKILL or one host's link is taken down, and the
# test checks that the job ends in named errors within the bound, never a hang.
#
#   fault_test.sh --program PATH --fault kill|link --backend gloo|mpi --hosts N --ranks-per-host R
#                 --target HOST --timeout S --bound-ms MS --expect REGEX
#                 [--isolated-bound-ms MS --isolated-expect REGEX] [--or-expect REGEX]
#
# kill: the rank process(es) on host h<TARGET> ... the first one found there gets SIGKILL.
# link: the switch port of h<TARGET> goes down (scripts/cluster link), silence both ways.
# MCR_TIMEOUT=S for every rank.
#   gloo: mpirun is told not to end the job when a rank dies (orte_abort_on_non_zero_status 0), so
#     only mcr can end the survivors. Every rank but the killed one must write "caught <Type>"
#     (collective_loop's report file) within BOUND_MS of the fault, its message matching REGEX;
#     ranks on the host whose link went down are held to --isolated-bound-ms and -expect instead.
#     (mpirun's status says nothing here: it is 0 once every survivor has returned 3.)
#     --or-expect: a survivor's error may match this instead, within the same bound, provided at
#     least one survivor's matches REGEX.
#   mpi: mpirun keeps its defaults. Every rank process must be gone within BOUND_MS of the fault
#     (--isolated-bound-ms on the host cut off) and mpirun's output (after the link is back, for its daemons to report) must match REGEX.
# In every case the link is restored after the checks, mpirun gets 5 s to end (then SIGTERM, then
# SIGKILL) and the cluster is taken down on every exit path. Exit 77 (a skip) when no cluster can be built here.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/../../scripts/cluster"
program="" fault="" backend="" hosts=4 rph=1 target=1 timeout_s=5 bound_ms="" expect=""
iso_bound_ms="" iso_expect="" or_expect=""
while (($#)); do
  case $1 in
    --program) program=$2; shift 2 ;;
    --fault) fault=$2; shift 2 ;;
    --backend) backend=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --ranks-per-host) rph=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --bound-ms) bound_ms=$2; shift 2 ;;
    --expect) expect=$2; shift 2 ;;
    --isolated-bound-ms) iso_bound_ms=$2; shift 2 ;;
    --isolated-expect) iso_expect=$2; shift 2 ;;
    --or-expect) or_expect=$2; shift 2 ;;
    *) echo "fault_test.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -x $program && $fault =~ ^(kill|link)$ && $backend =~ ^(gloo|mpi)$ && -n $bound_ms &&
  -n $expect ]] || { echo "fault_test.sh: see the usage at the top of this file" >&2; exit 2; }
program=$(readlink -f "$program")
iso_bound_ms=${iso_bound_ms:-$bound_ms} iso_expect=${iso_expect:-$expect}
ranks=$((hosts * rph))

# Distinct for every process (the pid in hex), within the 8 characters a name may have.
MCR_CLUSTER=$(printf 'cf%06x' "$$")
export MCR_CLUSTER
"$cluster" up --hosts "$hosts" --ranks-per-host "$rph"
rc=$?
if ((rc == 77)); then
  echo "SKIPPED: cannot build a namespace cluster here (see the reason above)"
  exit 77
fi
((rc == 0)) || exit "$rc"
dir=$(mktemp -d /tmp/mcr-cluster-fault.XXXXXX)
out=$dir/mpirun.out
launcher=""
cleanup() {
  "$cluster" link "h$target" up 2>/dev/null
  [[ -n $launcher ]] && kill -KILL "$launcher" 2>/dev/null
  "$cluster" down
  rm -rf "$dir"
}
trap cleanup EXIT

now_ms() { date +%s%3N; }
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# "PID RANK" of every live rank process, on host I (or on every host when I is empty).
rank_pids() {
  local i pid
  for ((i = 0; i < hosts; i++)); do
    [[ -n ${1:-} && $i != "$1" ]] && continue
    for pid in $(ip netns pids "$MCR_CLUSTER-h$i" 2>/dev/null); do
      [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$program" ]] || continue
      echo "$pid $(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null |
        sed -n 's/^OMPI_COMM_WORLD_RANK=//p')"
    done
  done
}

mca=()
[[ $backend == gloo ]] && mca=(--mca orte_abort_on_non_zero_status 0)
"$cluster" mpirun "${mca[@]}" -np "$ranks" -x MCR_BACKENDS="$backend" -x MCR_TIMEOUT="$timeout_s" \
  "$program" --backend="$backend" --report-dir="$dir" --seconds=90 >"$out" 2>&1 &
launcher=$!
start=$(now_ms)
until [[ -e $dir/looping ]]; do
  if ! kill -0 "$launcher" 2>/dev/null || (($(now_ms) - start > 60000)); then
    cat "$out"
    echo "FAIL: the ranks never reached their 20th operation"
    exit 1
  fi
  sleep 0.1
done
sleep 0.5

victim=-1
if [[ $fault == kill ]]; then
  read -r vpid victim < <(rank_pids "$target")
  [[ -n ${vpid:-} ]] || { echo "FAIL: no rank process on h$target"; exit 1; }
  struck=$(now_ms)  # taken just before the fault: times measured from it are upper bounds
  kill -KILL "$vpid"
  echo "---- killed rank $victim (pid $vpid) on h$target"
else
  struck=$(now_ms)
  "$cluster" link "h$target" down || exit 1
  echo "---- took h$target's link down"
fi

# Wait for the outcome: every expected report (gloo) or no rank process left (mpi), at most
# BOUND_MS + 10 s, so that a late error is measured rather than cut off.
declare -A gone_ms
while :; do
  elapsed=$(($(now_ms) - struck))
  if [[ $backend == gloo ]]; then
    done_count=0
    for ((r = 0; r < ranks; r++)); do
      ((r == victim)) && continue
      grep -q " caught " "$dir/rank-$r" 2>/dev/null && done_count=$((done_count + 1))
    done
    ((done_count == ranks - (victim >= 0 ? 1 : 0))) && break
  else
    live=$(rank_pids)
    for ((r = 0; r < ranks; r++)); do
      [[ -z ${gone_ms[$r]:-} ]] && ! grep -q " $r\$" <<<"$live" && gone_ms[$r]=$elapsed
    done
    [[ -z $live ]] && break
  fi
  ((elapsed > bound_ms + 10000)) && break
  sleep 0.1
done

if [[ $fault == link ]]; then
  "$cluster" link "h$target" up
  echo "---- h$target's link is back up after $(($(now_ms) - struck)) ms"
fi
# mpirun ends by itself once every rank has exited. Under orte_abort_on_non_zero_status 0 with a
# dead rank it does not: the survivors block in MPI_Finalize (Open MPI's fence waits for the dead
# rank; mcr's own part of finalize() has returned by then), so mpirun is stopped here.
wait_launcher() {  # wait_launcher TENTHS
  for ((i = 0; i < $1; i++)); do
    kill -0 "$launcher" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}
if ! wait_launcher 50; then
  echo "---- mpirun still running 5 s later (survivors in MPI_Finalize?): SIGTERM"
  kill -TERM "$launcher"
  wait_launcher 50 || { echo "---- and 5 s after SIGTERM: SIGKILL"; kill -KILL "$launcher"; }
fi
wait "$launcher"
status=$?
launcher=""
echo "---- mpirun exited with status $status, $(($(now_ms) - struck)) ms after the fault"
cat "$out"
for ((r = 0; r < ranks; r++)); do
  [[ -s $dir/rank-$r ]] && sed "s/^/  report of rank $r: /" "$dir/rank-$r"
done

grep -qs "no error" "$dir"/rank-* && fail "a rank finished its loop without an error"
if [[ $backend == gloo ]]; then
  matched_expect=0
  for ((r = 0; r < ranks; r++)); do
    ((r == victim)) && continue
    line=$(grep " caught " "$dir/rank-$r" 2>/dev/null)
    if [[ -z $line ]]; then
      fail "rank $r reported no error"
      continue
    fi
    at=$(sed -E 's/.* caught [A-Za-z:]+ at ([0-9]+) in .*/\1/' <<<"$line")
    ms=$((at - struck))
    b=$bound_ms e=$expect where=""
    if [[ $fault == link && $line == "rank $r on h$target "* ]]; then
      b=$iso_bound_ms e=$iso_expect where=" (cut off with h$target)"
    fi
    echo "rank $r$where: error $ms ms after the fault"
    ((ms <= b)) || fail "rank $r$where got its error $ms ms after the fault (bound $b)"
    if grep -Eq -- "$e" <<<"$line"; then
      matched_expect=$((matched_expect + 1))
    elif [[ -n $or_expect ]] && grep -Eq -- "$or_expect" <<<"$line"; then
      echo "rank $r: the alternative outcome (--or-expect)"
    else
      fail "rank $r's error does not match /$e/${or_expect:+ nor /$or_expect/}: $line"
    fi
  done
  ((matched_expect > 0)) || fail "no survivor's error matches /$expect/"
else
  for ((r = 0; r < ranks; r++)); do
    ((r == victim)) && continue
    ms=${gone_ms[$r]:-}
    if [[ -z $ms ]]; then
      fail "rank $r was still running $((bound_ms + 10000)) ms after the fault"
      continue
    fi
    b=$bound_ms where=""
    # mpirun fills each host's slots in turn: rank r runs on host r / R.
    if [[ $fault == link ]] && ((r / rph == target)); then
      b=$iso_bound_ms where=" (cut off with h$target)"
    fi
    echo "rank $r$where: gone $ms ms after the fault"
    ((ms <= b)) || fail "rank $r$where ended $ms ms after the fault (bound $b)"
  done
  ((status != 0)) || fail "mpirun reported success although a rank was $([[ $fault == kill ]] && echo killed || echo cut off)"
  grep -Eq -- "$expect" "$out" || fail "mpirun's output does not match /$expect/"
fi
((failures == 0)) || exit 1
echo "PASS"
