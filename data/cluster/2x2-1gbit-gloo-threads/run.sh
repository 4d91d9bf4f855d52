#!/usr/bin/env bash
# Gloo's asynchronous collectives one at a time (MCR_GLOO_THREADS=1, as before) against two side
# by side (2, the default), 2 x 2 at 1 Gbit, MCR_HIER=intra=mpi,inter=gloo: the example traces
# replayed by the same build, threads 1 then 2 for each trace.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=data/cluster/2x2-1gbit-gloo-threads
export MCR_CLUSTER=gt1
c=scripts/cluster
$c up --hosts 2 --ranks-per-host 2 --rate 1gbit
trap '$c down' EXIT
for trace in dp_step_100m zero3_step moe_step; do
  for threads in 1 2; do
    echo "=== $trace, MCR_GLOO_THREADS=$threads; load $(cut -d' ' -f1-3 /proc/loadavg)"
    $c mpirun -np 4 -x MCR_HIER=intra=mpi,inter=gloo -x MCR_GLOO_THREADS=$threads \
      build-ci/bin/mcr replay examples/traces/$trace.json --backend mpi,gloo,hier --reps 5 --json \
      > $out/$trace-threads$threads.json
    python3 - "$out/$trace-threads$threads.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps(d)[:400])
PY
  done
done
