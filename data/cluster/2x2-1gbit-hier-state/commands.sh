set -e
cd /work/main
C="scripts/cluster --name exp"
echo "== tune both forms, 4M,16M"
$C mpirun -np 4 -x MCR_HIER=intra=mpi,inter=gloo build-ci/bin/mcr tune --op all_reduce,reduce_scatter --sizes 4M,16M --form both --in-flight 4 --reps 9 -o /tmp/exp-both.json 2>&1 | grep -E "B:"
echo "== tune sync only, 4M,16M"
$C mpirun -np 4 -x MCR_HIER=intra=mpi,inter=gloo build-ci/bin/mcr tune --op all_reduce,reduce_scatter --sizes 4M,16M --reps 9 -o /tmp/exp-sync.json 2>&1 | grep -E "B:"
