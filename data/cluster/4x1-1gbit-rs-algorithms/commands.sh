#!/usr/bin/env bash
# Which Open MPI reduce_scatter_block algorithm on 4 hosts x 1 rank, 1 Gbit
set -e
cd /work/main
out=data/cluster/4x1-1gbit-rs-algorithms
mkdir -p $out
C="scripts/cluster --name alg"
$C up --hosts 4 --ranks-per-host 1 --rate 1gbit
echo "date: $(date -u +%FT%TZ); commit: $(git rev-parse --short HEAD); load: $(cut -d' ' -f1-3 /proc/loadavg)" > $out/conditions.txt
for alg in default 1 2 3 4; do
  if [ $alg = default ]; then x=""; else x="-x OMPI_MCA_coll_tuned_use_dynamic_rules=1 -x OMPI_MCA_coll_tuned_reduce_scatter_block_algorithm=$alg"; fi
  echo "== reduce_scatter_block algorithm $alg (load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a $out/bench.txt
  $C mpirun -np 4 $x build-ci/bin/mcr bench --op reduce_scatter --backend mpi,gloo --sizes 1M,4M,16M --dtype bf16 -q 2>&1 | grep -v "^#" | tee -a $out/bench.txt
done
$C down
