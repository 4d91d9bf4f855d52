#!/usr/bin/env bash
# hier's per-step choice from measurements on a 2x2 namespace cluster: `mcr tune` there also
# measures the groups hier runs its steps on (the 2 ranks of a host, 1x2; one rank of each host,
# 2x1) in the asynchronous form, and with that table `mcr explain` names every step of a composed
# all_reduce with source "tuning"; without a table the step between hosts says hier's preset.
#
#   hier_tune.sh MCR_BINARY OUT_DIR
set -euo pipefail
mcr=$1 out=$2
cluster="$(cd "$(dirname "$0")/../.." && pwd)/scripts/cluster"
# Distinct for every process (the pid in hex), within the 8 characters a name may have.
MCR_CLUSTER=$(printf 'ht%06x' "$$")
export MCR_CLUSTER
fail() { echo "FAIL: $*" >&2; exit 1; }
# Every run ends within 100 s of the start, before the test's TIMEOUT (120 s): ctest's
# kill there would skip the EXIT trap and leave the cluster up for good.
deadline=$((SECONDS + 100))
bounded() {
  local left=$((deadline - SECONDS))
  ((left > 0)) || fail "out of time before: $*"
  timeout --kill-after=5 "$left" "$@"
}
mkdir -p "$out"

set +e
"$cluster" up --hosts 2 --ranks-per-host 2
rc=$?
set -e
((rc == 77)) && { echo "SKIPPED: cannot build a namespace cluster here"; exit 77; }
((rc == 0)) || fail "cluster up exited $rc"
trap '"$cluster" down' EXIT

t="$out/tuned.json"
bounded "$cluster" mpirun -np 4 "$mcr" tune --op all_reduce -b 4 -e 4M -f 32 --reps 1 --budget-ms 1 \
  -o "$t" -q
# Entries per (op, group size, topology, form), checked on the compact JSON.
summary=$(python3 - "$t" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for e in doc["entries"]:
    last = e["ranges"][-1]["max_bytes"]
    print(e["op"], e["group_size"], f'{e.get("hosts")}x{e.get("ranks_per_host")}', e.get("form", "any"),
          "to-inf" if last is None else "bounded")
print("provenance:", doc["provenance"].get("hier_steps", "none"))
PY
)
echo "$summary"
grep -q '^all_reduce 4 2x2 sync to-inf$' <<<"$summary" || fail "no all_reduce entry for the 2x2 world"
grep -q '^all_reduce 2 2x1 async to-inf$' <<<"$summary" ||
  fail "no async all_reduce entry for 2 ranks on 2x1 (hier's step between hosts)"
grep -q '^reduce_scatter 2 1x2 async to-inf$' <<<"$summary" ||
  fail "no async reduce_scatter entry for 2 ranks on 1x2 (hier's first step within a host)"
grep -q '^all_gather 2 1x2 async to-inf$' <<<"$summary" ||
  fail "no async all_gather entry for 2 ranks on 1x2 (hier's last step within a host)"
grep -q '^provenance: hier within hosts' <<<"$summary" || fail "the provenance does not say hier_steps"

explain() {  # explain [VAR=VALUE...]: mcr explain's JSON for a 16 MiB all_reduce sent to hier
  local env=()
  for v in "$@"; do env+=(-x "$v"); done
  bounded "$cluster" mpirun -np 4 -x MCR_RULES=all_reduce:1M-=hier "${env[@]}" "$mcr" explain all_reduce \
    --bytes 16M --json
}
got=$(explain MCR_TUNING="$t")
echo "$got"
steps=$(python3 -c 'import json,sys; d=json.load(sys.stdin)
print(d["backend"]); [print(s["level"], s["op"], s["bytes"], s["times"], s["source"]) for s in d["composed_steps"]]' <<<"$got")
echo "$steps"
[[ $(head -1 <<<"$steps") == hier ]] || fail "the rule did not send the all_reduce to hier"
[[ $(grep -c ' tuning$' <<<"$steps") == 3 ]] || fail "not every step was chosen by the tuning table"
grep -q '^between hosts all_reduce 2097152 4 tuning$' <<<"$steps" ||
  fail "the step between hosts is not 4 x 2 MiB from the table"

got=$(explain)
grep -q '"source": "preset"' <<<"$got" || fail "without a table the step between hosts is not hier's preset: $got"

# --subgroup-ops all: both groups are measured with every tuned op as well (a program's own groups,
# e.g. DeepSpeed's expert groups): all_to_all, which hier never runs, gets entries for 1x2 and 2x1,
# and all_reduce one within a host (hier runs it between hosts only).
a="$out/all-ops.json"
bounded "$cluster" mpirun -np 4 "$mcr" tune --op all_reduce,all_to_all --subgroup-ops all -b 4 -e 4K -f 32 \
  --reps 1 --budget-ms 1 -o "$a" -q
groups=$(python3 - "$a" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for e in doc["entries"]:
    print(e["op"], e["group_size"], f'{e.get("hosts")}x{e.get("ranks_per_host")}', e.get("form", "any"))
print("provenance:", doc["provenance"].get("hier_steps", "none"))
PY
)
echo "$groups"
for want in "all_to_all 2 1x2 async" "all_to_all 2 2x1 async" "all_reduce 2 1x2 async" \
  "all_reduce 2 2x1 async" "all_to_all 4 2x2 sync"; do
  grep -q "^$want\$" <<<"$groups" || fail "--subgroup-ops all: no entry '$want'"
done
grep -q 'every tuned op: --subgroup-ops all' <<<"$groups" || fail "the provenance does not say --subgroup-ops all"
echo "PASS"
