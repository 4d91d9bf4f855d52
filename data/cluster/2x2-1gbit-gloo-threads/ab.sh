#!/usr/bin/env bash
# The same comparison as run.sh, Gloo and hier only, two alternating rounds per trace (threads 1,
# then 2), to see whether the difference of run.sh's single round is more than the run-to-run spread.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=data/cluster/2x2-1gbit-gloo-threads
export MCR_CLUSTER=gt2
c=scripts/cluster
$c up --hosts 2 --ranks-per-host 2 --rate 1gbit
trap '$c down' EXIT
for trace in dp_step_100m zero3_step; do
  for round in 1 2; do
    for threads in 1 2; do
      echo "=== $trace round $round MCR_GLOO_THREADS=$threads; load $(cut -d' ' -f1-3 /proc/loadavg)"
      $c mpirun -np 4 -x MCR_HIER=intra=mpi,inter=gloo -x MCR_GLOO_THREADS=$threads \
        build-ci/bin/mcr replay examples/traces/$trace.json --backend gloo,hier --reps 5 --json \
        > $out/ab-$trace-r$round-threads$threads.json
      python3 - "$out/ab-$trace-r$round-threads$threads.json" <<'PY'
import json, statistics, sys
for p in json.load(open(sys.argv[1]))["policies"]:
    r = p["reps"]
    print(f"{p['backend']} median {statistics.median(r)*1e3:.0f} ms [{min(r)*1e3:.0f}-{max(r)*1e3:.0f}]")
PY
    done
  done
done
