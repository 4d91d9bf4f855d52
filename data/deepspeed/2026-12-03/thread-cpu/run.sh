#!/usr/bin/env bash
# One MoE pair of data/deepspeed/2026-12-03 (torch's gloo first, then the mcr policy, taking turns
# step by step) on the namespace cluster "ds" (scripts/cluster --name ds up --hosts 2
# --ranks-per-host 2 --rate 1gbit), with each job's CPU time per thread sampled from /proc every
# 0.5 s (thread_cpu.py; the main thread apart, other threads by name). Run from the repository root:
#
#   data/deepspeed/2026-12-03/thread-cpu/run.sh OUTDIR NAME DIST [VAR=VALUE...]
#
# DIST: train.py --dist of the mcr job (mcr-mpi, mcr-gloo); VAR=VALUE: more variables for its
# ranks. The record ran, in this order, with no variables:
#   run.sh data/deepspeed/2026-12-03/thread-cpu c1-mpi mcr-mpi    (before thread_cpu.py told the
#                                                                   main thread apart)
#   run.sh data/deepspeed/2026-12-03/thread-cpu c2-gloo mcr-gloo
#   run.sh data/deepspeed/2026-12-03/thread-cpu c3-mpi mcr-mpi
set -uo pipefail
out=$1 name=$2 mdist=$3
shift 3
ex=()
for e in "$@"; do ex+=(-x "$e"); done
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
PY=$PWD/.venv/bin/python TRAIN=$PWD/examples/deepspeed/train.py
export OMP_NUM_THREADS=1 PYTHONPATH=$PWD/build-ci/python:$PWD/examples/deepspeed PYTHONDONTWRITEBYTECODE=1 DS_ACCELERATOR=cpu
common=(--moe 4 --zero 2 --micro-batch 4 --d-model 256 --layers 4 --heads 4 --seq 64 --vocab 512 --steps 15 --warmup 3 --skip-shm-op)
xs=(-x OMP_NUM_THREADS -x PYTHONPATH -x PYTHONDONTWRITEBYTECODE -x DS_ACCELERATOR -x GLOO_SOCKET_IFNAME=eth0)
dir=$(mktemp -d /tmp/mcr-ds-turns.XXXXXX)
python3 "$here/thread_cpu.py" torch-gloo "$out/$name-cpu-torch-gloo.txt" &
s1=$!
python3 "$here/thread_cpu.py" "$mdist" "$out/$name-cpu.txt" &
s2=$!
timeout 600 nice -n 10 scripts/cluster --name ds mpirun -np 4 "${xs[@]}" "$PY" -W ignore::UserWarning "$TRAIN" \
  --dist torch-gloo "${common[@]}" --turns "$dir:first" --json "$out/$name-torch-gloo.json" >"$out/$name-torch-gloo.txt" 2>&1 &
gloo_job=$!
timeout 600 nice -n 10 scripts/cluster --name ds mpirun -np 4 "${xs[@]}" -x MCR_LOG=summary "${ex[@]}" "$PY" -W ignore::UserWarning "$TRAIN" \
  --dist "$mdist" "${common[@]}" --turns "$dir:second" --json "$out/$name.json" >"$out/$name.txt" 2>&1
wait "$gloo_job"
sleep 1
kill "$s1" "$s2"
wait "$s1" "$s2" 2>/dev/null
rm -rf "$dir"
python3 -c "
import json; a = json.load(open('$out/$name.json')); b = json.load(open('$out/$name-torch-gloo.json'))
print('$name', 'torch gloo / mcr step time', round(b['median_step_ms'] / a['median_step_ms'], 2))"
cat "$out/$name-cpu.txt" "$out/$name-cpu-torch-gloo.txt"
