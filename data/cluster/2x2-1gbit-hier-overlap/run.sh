#!/usr/bin/env bash
# hier with consecutive composed operations overlapping (new) against one at a time (old, the
# commit before), 2 x 2 at 1 Gbit, MCR_HIER=intra=mpi,inter=gloo: the example traces replayed.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=data/cluster/2x2-1gbit-hier-overlap
export MCR_CLUSTER=ov1
c=scripts/cluster
$c up --hosts 2 --ranks-per-host 2 --rate 1gbit
trap '$c down' EXIT
for trace in dp_step_100m zero3_step moe_step; do
  for which in old new; do
    mcr=build-ci/bin/mcr
    [[ $which == old ]] && mcr="${OLD_MCR:?the mcr binary of the commit before, built in a worktree}"
    echo "=== $trace, $which ($mcr); load $(cut -d' ' -f1-3 /proc/loadavg)"
    $c mpirun -np 4 -x MCR_HIER=intra=mpi,inter=gloo $mcr replay examples/traces/$trace.json \
      --backend mpi,gloo,hier --reps 5 --json > $out/$trace-$which.json
    python3 -c "
import json,sys
d=json.load(open('$out/$trace-$which.json'))
print(json.dumps(d)[:600])"
  done
done
