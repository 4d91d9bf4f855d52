#!/usr/bin/env bash
# The gradient all_reduce of the plan-check step as the planner reads it from three tables timed
# in the same round, against the step itself: A = out of place, 256 KiB - 64 MiB in steps of
# sqrt(2) (plan-check before 2026-12-01); B = in place, that grid plus the step's two bucket sizes;
# C = out of place, the same sizes as B. Run from the repository root, under the measurement lock:
#   flock /work/notes/measure.lock data/plan-check/2026-12-01-allreduce-placement/compare.sh OUT
set -euo pipefail
o=${1:?output directory}
mkdir -p "$o"
export MCR_DATA_DIR=$PWD/data OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# shellcheck disable=SC2054 # "self,vader" is one argument
MPI=(nice -n -20 mpirun --oversubscribe --bind-to none --allow-run-as-root --mca mpi_yield_when_idle 1
  --mca btl self,vader -np 2)
bin=${BUILD_DIR:-build-ci}/bin
grid=$(awk 'BEGIN { for (k = 0; k <= 16; k++) printf "%s%d", (k ? "," : ""), 4 * int(65536 * 2 ^ (k / 2) + 0.5) }')
plan=(--hidden 512 --heads 8 --layers 2 --seq 128 --vocab 4096 --micro-batch 2 --dtype fp32 --tied false
  --system local-cpu --gpus 2 --tp 1 --pp 1 --dp 2 --global-batch 4 --no-dp-overlap --no-peak-probe
  --dp-bucket-mb 25)
for r in 1 2 3; do
  echo "round $r load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  "${MPI[@]}" "$bin/mcr" tune --op all_reduce --dtype f32 -b 256K -e 64M -f 1.41421356 -o "$o/A-$r.json" -q >/dev/null
  "${MPI[@]}" "$bin/mcr" tune --op all_reduce --dtype f32 --place in --sizes "$grid,17262528,25000000" -o "$o/B-$r.json" -q >/dev/null
  "${MPI[@]}" "$bin/mcr" tune --op all_reduce --dtype f32 --place out --sizes "$grid,17262528,25000000" -o "$o/C-$r.json" -q >/dev/null
  MCR_TUNING=$o/B-$r.json "${MPI[@]}" "$bin/train_step" --hidden 512 --heads 8 --layers 2 --seq 128 \
    --micro-batch 2 --vocab 4096 --steps 20 --warmup 3 --bucket-mb 25 >"$o/step-$r.json"
  echo "round $r load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  for t in A B C; do
    echo "  $t: planner dp_comm $("$bin/mcr" plan "${plan[@]}" --comm-table "$o/$t-$r.json" --json | jq '.breakdown.dp_comm_s')" \
      " samples(us) 16.8M/17.26M/23.7M/25M/33.5M: $(jq -r '[.samples[] | select(.backend=="mpi") | select(.bytes==16777216 or .bytes==17262528 or .bytes==23726568 or .bytes==25000000 or .bytes==33554432) | "\(.bytes):\(.time_us|round)"] | join(" ")' "$o/$t-$r.json")"
  done
  echo "  step comm cpu $(jq '.split_cpu_s.comm.median' "$o/step-$r.json") wall $(jq '.split_s.comm.median' "$o/step-$r.json") wait $(jq '.comm_wait_s.median' "$o/step-$r.json") without wait $(jq -c '.comm_without_wait_s' "$o/step-$r.json")"
done
