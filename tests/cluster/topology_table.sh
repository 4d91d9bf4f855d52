#!/usr/bin/env bash
# Tuning tables across hosts: on a 2x1 namespace cluster a table measured on 1x2 (one host, two
# ranks) is not applied and explain says why, one measured on 2x1 is, and `mcr tune` here writes
# hosts 2, ranks_per_host 1 on every entry and sample and in its provenance.
#
#   topology_table.sh MCR_BINARY OUT_DIR
set -euo pipefail
mcr=$1 out=$2
cluster="$(cd "$(dirname "$0")/../.." && pwd)/scripts/cluster"
# Distinct for every process (the pid in hex), within the 8 characters a name may have.
MCR_CLUSTER=$(printf 'tp%06x' "$$")
export MCR_CLUSTER
fail() { echo "FAIL: $*" >&2; exit 1; }
# Every run ends within 70 s of the start, before the test's TIMEOUT (90 s): ctest's
# kill there would skip the EXIT trap and leave the cluster up for good.
deadline=$((SECONDS + 70))
bounded() {
  local left=$((deadline - SECONDS))
  ((left > 0)) || fail "out of time before: $*"
  timeout --kill-after=5 "$left" "$@"
}
mkdir -p "$out"

table() {  # table FILE HOSTS RPH: all_reduce of any size on mpi, measured on HOSTS x RPH
  printf '{"format": "mcr-tuning", "version": 1, "entries": [{"op": "all_reduce", "hosts": %s,
    "ranks_per_host": %s, "ranges": [{"min_bytes": 0, "max_bytes": null, "backend": "mpi"}]}]}\n' \
    "$2" "$3" >"$1"
}
explain() {  # explain TABLE: mcr explain's JSON for all_reduce of 64 B on the cluster
  bounded "$cluster" mpirun -np 2 -x MCR_TUNING="$1" "$mcr" explain all_reduce --bytes 64 --json
}

set +e
"$cluster" up --hosts 2 --ranks-per-host 1
rc=$?
set -e
((rc == 77)) && { echo "SKIPPED: cannot build a namespace cluster here"; exit 77; }
((rc == 0)) || fail "cluster up exited $rc"
trap '"$cluster" down' EXIT

table "$out/table_1x2.json" 1 2
got=$(explain "$out/table_1x2.json")
echo "$got"
[[ $got == *'"topology": "2x1"'* ]] || fail "explain does not show topology 2x1"
[[ $got == *'"source": "default"'* ]] || fail "a 1x2 table was applied on 2x1"
[[ $got == *"tuning table: measured on 1x2, this communicator is 2x1; not applied"* ]] ||
  fail "explain does not say why the 1x2 table was not applied"

table "$out/table_2x1.json" 2 1
got=$(explain "$out/table_2x1.json")
echo "$got"
[[ $got == *'"source": "tuning"'* ]] || fail "a 2x1 table was not applied on 2x1"

bounded "$cluster" mpirun -np 2 "$mcr" tune --op all_reduce -b 4 -e 64 -f 16 --reps 1 --budget-ms 1 \
  -o "$out/tuned.json" -q
# Pretty-printed JSON, one key a line: every entry and sample (one "op" each) says 2 and 1, and so
# does the provenance (as strings).
t="$out/tuned.json"
items=$(grep -c '"op":' "$t")
((items > 0)) || fail "tune wrote no entries"
[[ $(grep -c '"hosts": 2,\?$' "$t") == "$items" ]] || fail "not every item of $t has hosts 2"
[[ $(grep -c '"ranks_per_host": 1,\?$' "$t") == "$items" ]] ||
  fail "not every item of $t has ranks_per_host 1"
grep -q '"hosts": "2"' "$t" && grep -q '"ranks_per_host": "1"' "$t" ||
  fail "the provenance of $t does not say 2 hosts x 1 rank"
echo "tuned.json: $items entries and samples, all 2x1"
got=$(explain "$out/tuned.json")
[[ $got == *'"source": "tuning"'* ]] || fail "the table tuned on 2x1 was not applied there: $got"
echo "PASS"
