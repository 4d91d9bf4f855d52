#!/usr/bin/env bash
set -e
cd /work/main
out=data/cluster/2x2-1gbit-retain-hier-state
C="scripts/cluster --name exp"
$C up --hosts 2 --ranks-per-host 2 --rate 1gbit
echo "date: $(date -u +%FT%TZ); commit: $(git rev-parse --short HEAD); load: $(cut -d' ' -f1-3 /proc/loadavg)" > $out/conditions.txt
for retain in 1 0; do
  for form in "--form both --in-flight 4" ""; do
    echo "== MCR_MALLOC_RETAIN=$retain, tune ${form:-sync only}, 4M,16M (load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a $out/progress.txt
    $C mpirun -np 4 -x MCR_HIER=intra=mpi,inter=gloo -x MCR_MALLOC_RETAIN=$retain build-ci/bin/mcr tune --op all_reduce,reduce_scatter --sizes 4M,16M $form --reps 9 -o /tmp/exp-$retain.json 2>&1 | grep -E "B:" | tee -a $out/progress.txt
  done
done
$C down
/tmp/ov/cluster-record --hosts 2 --ranks-per-host 2 --ops all_reduce,all_gather,reduce_scatter --tune-ops all_reduce,all_gather,reduce_scatter,all_to_all --max-bytes 16M --policies mpi,gloo,hier,auto --env MCR_HIER=intra=mpi,inter=gloo --tune-args "--form both --in-flight 4" --out data/cluster/2x2-1gbit-retain-run1
echo ALL DONE
