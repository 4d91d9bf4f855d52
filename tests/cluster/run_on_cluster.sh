#!/usr/bin/env bash
# Brings up a namespace cluster of its own (a name unique to this run), runs one command under
# `scripts/cluster mpirun` once per backend setting, and takes the cluster down again whatever
# happens. Exit 77 (a ctest skip) when this machine cannot make namespaces.
#
#   run_on_cluster.sh --hosts N --ranks-per-host R --backends "mpi gloo auto" [--env VAR=VALUE]...
#                     [--auto-env VAR=VALUE]... --limit SECONDS -- PROGRAM ARGS...
#
# "auto" leaves MCR_BACKENDS unset: every compiled backend comes up and selection chooses.
# --env passes a variable to the ranks of every run, --auto-env to those of the "auto" run only.
# --limit bounds the runs together (SIGTERM, then SIGKILL 5 s later; the cluster's teardown ends whatever is
# left in its namespaces): keep it below the test's TIMEOUT, so that this script, not ctest, ends a
# hung run and the EXIT trap still takes the cluster down.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/../../scripts/cluster"
hosts=2 rph=1 backends="mpi gloo auto" rate=1gbit
extra=() auto_extra=() limit=""
while (($#)); do
  case $1 in
    --hosts) hosts=$2; shift 2 ;;
    --ranks-per-host) rph=$2; shift 2 ;;
    --backends) backends=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --env) extra+=(-x "$2"); shift 2 ;;
    --auto-env) auto_extra+=(-x "$2"); shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "run_on_cluster.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
(($#)) || { echo "run_on_cluster.sh: no program given" >&2; exit 2; }
# A run that ctest ends at its TIMEOUT skips the EXIT trap and leaves the cluster up for good.
[[ $limit =~ ^[1-9][0-9]*$ ]] ||
  { echo "run_on_cluster.sh: --limit '$limit': must be a positive number of seconds, below the test's TIMEOUT" >&2; exit 2; }

# The pid in 6 hex digits (pids stay below 2^22): 8 characters, the most a name may have, and
# distinct for every process, so that concurrent tests never share a cluster.
name=$(printf 'ct%06x' "$$")
export MCR_CLUSTER=$name
set +e
"$cluster" up --hosts "$hosts" --ranks-per-host "$rph" --rate "$rate"
rc=$?
set -e
if ((rc == 77)); then
  echo "SKIPPED: cannot build a namespace cluster here (see the reason above)"
  exit 77
fi
((rc == 0)) || exit "$rc"
trap '"$cluster" down' EXIT

ranks=$((hosts * rph))
deadline=$((SECONDS + limit))
for b in $backends; do
  env_args=(-x MCR_TEST_RANKS="$ranks" "${extra[@]}")
  if [[ $b == auto ]]; then
    env_args+=("${auto_extra[@]}")
  else
    env_args+=(-x MCR_BACKENDS="$b")
  fi
  echo "=== $hosts hosts x $rph ranks, backends: $b ==="
  start=$SECONDS
  left=$((deadline - SECONDS))
  ((left > 0)) || { echo "run_on_cluster.sh: --limit $limit s spent before backends $b" >&2; exit 124; }
  timeout --kill-after=5 "$left" "$cluster" mpirun -np "$ranks" "${env_args[@]}" "$@"
  echo "=== $b: passed in $((SECONDS - start)) s"
done
