#!/usr/bin/env bash
# DDP under torchrun (Gloo only, in mcr and in torch): mcr's step against torch's gloo with the
# binding's defaults, with one Gloo worker thread per communicator (MCR_GLOO_THREADS=1) and with
# every operation handed to the communication thread (MCR_TORCH_INLINE=0). The settings take turns
# within each run number, so neighbouring runs share the machine's state. Output:
# set-$SET/run-<setting>-<n>.txt next to this script (SET=1 RUNS=4, then SET=2 RUNS=8; then
# SET=3 RUNS=6 WORKLOADS=fsdp2 SETTINGS="default threads1": FSDP2 with one and two Gloo threads).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export OMP_NUM_THREADS=1 PYTHONPATH=$PWD/build-ci/python
OUT=data/torch/bench-2026-12-04-ddp-torchrun-knobs/set-${SET:-1}
mkdir -p $OUT
TRUN=".venv/bin/python -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 3 --tee 1"
for run in $(seq 1 "${RUNS:-4}"); do
  for setting in ${SETTINGS:-default threads1 inline0}; do
    case $setting in
      default) env=() ;;
      threads1) env=(MCR_GLOO_THREADS=1) ;;
      inline0) env=(MCR_TORCH_INLINE=0) ;;
    esac
    { uptime; env "${env[@]}" $TRUN -m mcr.torch.steps --steps 10 --warmup 3 --rounds 3 \
        --workloads ${WORKLOADS:-ddp} | grep -v '^\[default1\]'; uptime; } > $OUT/run-$setting-$run.txt 2>&1
  done
done
grep -H 'x$' $OUT/run-*.txt
