#!/usr/bin/env bash
# The DeepSpeed throughput record of docs/deepspeed.md ("Results"): the exact commands. Run from
# the repository root with the binding built in build-ci:
#
#   data/deepspeed/2026-12-01/commands.sh onehost [ROUNDS [FIRST]]  # one run after another, here
#   data/deepspeed/2026-12-01/commands.sh paired [ROUNDS]           # A/B pairs taking turns, here
#   data/deepspeed/2026-12-01/commands.sh paired-cluster [ROUNDS]   # the same on 2 hosts x 2 ranks
#
# Variables, all optional (unset, the script makes the record of 2026-12-01): RECORD (the folder the
# record goes to; data/deepspeed/2026-12-03/commands.sh sets it to its own). For paired-cluster,
# for a record of some policies and models only: OUT (folder name under RECORD), TUNE_ARGS (added
# to `mcr tune`'s arguments), TUNE_ENV (VAR=VALUE words for the tune's ranks), POLICIES and MODELS
# (space-separated lists), REFINE_FROM (policies each run once per model, alone, with MCR_LOG=trace
# after the tune; `mcr tune --refine` then rebuilds the tuned table from their traces into
# table-refined-np<ranks>.json, which the policy mcr-refined uses), REFINE_RUNS (how many times
# each of them runs, default 1) and REFINE_PAIRED (set: each of those runs takes turns with a
# torch-gloo job, as the pairs do, writing ...-torch-gloo.json/.txt beside it).
#
# onehost: FIRST (default 1) numbers the rounds from FIRST on, to add rounds to a folder; the
# tuning tables are measured only when FIRST is 1.
#
# onehost: each run trains the GPT-style model of examples/deepspeed for 3 warm-up and 8 measured
# steps and writes <dir>/r<round>-<model>-np<ranks>-<policy>.json (train.py --json) and .txt (its
# output, with rank 0's MCR_LOG=summary for mcr runs). A round runs every policy once, in an order
# rotated from round to round. paired*: p<round>-<model>-np<ranks>-<policy>.json/.txt and the
# torch-gloo run it was paired with, p...-<policy>-torch-gloo.json/.txt. conditions.txt gets the
# load average before each run. summarize.py reads a folder.
set -euo pipefail
cd "$(dirname "$0")/../../.."
HERE=${RECORD:-data/deepspeed/2026-12-01}
PY=$PWD/.venv/bin/python
TRAIN=$PWD/examples/deepspeed/train.py
MCR=$PWD/build-ci/bin/mcr
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export PYTHONPATH=$PWD/build-ci/python:$PWD/examples/deepspeed PYTHONDONTWRITEBYTECODE=1
export DS_ACCELERATOR=cpu

# The two models: ZeRO-3 (every parameter partitioned, prefetched) and DeepSpeed-MoE (ZeRO-2, 4
# experts per layer split over every rank: all_to_all dispatch and combine). moe-ep2 (MODELS only):
# the MoE model with expert parallel size 2, its experts split over 2-rank groups (all_to_all
# within them, expert gradients all-reduced across them).
SHAPE="--d-model 256 --layers 4 --heads 4 --seq 64 --vocab 512"
declare -A MODEL=(
  [zero3]="--zero 3 --micro-batch 2"
  [moe]="--moe 4 --zero 2 --micro-batch 4"
  [moe-ep2]="--moe 4 --ep 2 --zero 2 --micro-batch 4"
)
STEPS="--steps 11 --warmup 3 --skip-shm-op"

ONEHOST_MPI=(mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca btl self,vader)

# policy -> "train.py --dist" and the environment it runs with.
policy_args() {
  case $1 in
    torch-gloo | torch-gloo-torchrun) echo "--dist torch-gloo" ;;
    mcr-mpi | mcr-mpi-tcp-thread) echo "--dist mcr-mpi" ;;
    mcr-gloo) echo "--dist mcr-gloo" ;;
    mcr-auto) echo "--dist mcr-auto" ;;
    mcr-tuned | mcr-tuned-tcp-thread | mcr-tuned-a2a-gloo | mcr-refined) echo "--dist mcr-auto" ;;
    mcr-hier) echo "--dist mcr-auto" ;;
  esac
}
policy_env() {
  local policy=$1 table=$2 hier=$3
  case $policy in
    mcr-*) echo "MCR_LOG=summary" ;;
  esac
  # *-tcp-thread: Open MPI's TCP transport with its own progress thread (btl_tcp_progress_thread).
  case $policy in
    *-tcp-thread) echo "OMPI_MCA_btl_tcp_progress_thread=1" ;;
  esac
  case $policy in
    mcr-tuned | mcr-tuned-tcp-thread) echo "MCR_TUNING=$table" ;;
    # The tuned table, but every all_to_all on Gloo (rules are applied before the table).
    mcr-tuned-a2a-gloo)
      echo "MCR_TUNING=$table"
      echo "MCR_RULES=all_to_all:*=gloo"
      ;;
    # The tuned table refined with the traces of the REFINE_FROM runs (`mcr tune --refine`).
    mcr-refined) echo "MCR_TUNING=${table/table-np/table-refined-np}" ;;
    mcr-hier)
      echo "MCR_HIER=$hier"
      echo "MCR_RULES=all_reduce:*=hier;reduce_scatter:*=hier;all_gather:*=hier"
      ;;
  esac
  [[ $policy == mcr-tuned* || $policy == mcr-refined ]] && [[ -n $TUNED_HIER ]] &&
    echo "MCR_HIER=$TUNED_HIER"
  return 0
}

rotate() {  # rotate the list "$2..." left by $1
  local n=$1
  shift
  local a=("$@") i
  for ((i = 0; i < ${#a[@]}; i++)); do echo "${a[(i + n) % ${#a[@]}]}"; done
}

run_one() {  # onehost|torchrun out round model np policy table hier
  local kind=$1 out=$2 round=$3 model=$4 np=$5 policy=$6 table=$7 hier=$8
  local base=$out/r$round-$model-np$np-$policy env=()
  mapfile -t env < <(policy_env "$policy" "$table" "$hier")
  # A result is written on success only: one left from an earlier run must not stand in for it.
  rm -f "$base.json"
  echo "$(date -Is) r$round $model np$np $policy load $(cut -d' ' -f1-3 /proc/loadavg)" \
    >>"$out/conditions.txt"
  # shellcheck disable=SC2046
  local args=($(policy_args "$policy") ${MODEL[$model]} $SHAPE $STEPS --json "$base.json")
  case $kind in
    onehost)
      echo "+ ${env[*]} nice -n 10 ${ONEHOST_MPI[*]} -np $np $PY -W ignore::UserWarning $TRAIN ${args[*]}" \
        >"$base.txt"
      env "${env[@]}" nice -n 10 "${ONEHOST_MPI[@]}" -np "$np" "$PY" -W ignore::UserWarning \
        "$TRAIN" "${args[@]}" >>"$base.txt" 2>&1 || echo "FAILED: $base" | tee -a "$out/conditions.txt"
      ;;
    torchrun)
      echo "+ nice -n 10 $PY -m torch.distributed.run --standalone --nproc_per_node $np --redirects 1 --tee 1 $TRAIN ${args[*]}" \
        >"$base.txt"
      nice -n 10 "$PY" -m torch.distributed.run --standalone --nproc_per_node "$np" --redirects 1 \
        --tee 1 "$TRAIN" "${args[@]}" >>"$base.txt" 2>&1 ||
        echo "FAILED: $base" | tee -a "$out/conditions.txt"
      ;;
  esac
}

record_header() {
  local out=$1 steps=$2
  mkdir -p "$out"
  {
    echo "date: $(date -Is)"
    echo "commit: $(git rev-parse HEAD) ($(git status --porcelain | wc -l) paths changed in the work tree)"
    echo "machine: $(getconf _NPROCESSORS_ONLN) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "torch: $($PY -c 'import torch; print(torch.__version__)') deepspeed: $($PY -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null | tail -1)"
    echo "mpirun: $(mpirun --version | head -1)"
    echo "models: zero3=${MODEL[zero3]} moe=${MODEL[moe]} moe-ep2=${MODEL[moe-ep2]} shape: $SHAPE steps: $steps"
  } >>"$out/conditions.txt"
}

onehost() {
  local rounds=${1:-3} first=${2:-1} out=$HERE/onehost np round model policy order
  record_header "$out" "$STEPS"
  TUNED_HIER=""
  for np in 2 4; do
    ((first == 1)) || break
    # The table mcr.torch needs: asynchronous calls, in place, the ops DeepSpeed issues.
    echo "+ nice -n 10 ${ONEHOST_MPI[*]} -np $np $MCR tune --op all_reduce,all_gather,reduce_scatter,all_to_all,broadcast --async --place in -b 4 -e 16M -f 4 -o $out/table-np$np.json" \
      >"$out/tune-np$np.txt"
    nice -n 10 "${ONEHOST_MPI[@]}" -np "$np" "$MCR" tune \
      --op all_reduce,all_gather,reduce_scatter,all_to_all,broadcast --async --place in \
      -b 4 -e 16M -f 4 -o "$out/table-np$np.json" >>"$out/tune-np$np.txt" 2>&1
  done
  for ((round = first; round < first + rounds; round++)); do
    for np in 2 4; do
      local policies=(torch-gloo mcr-mpi mcr-gloo mcr-auto mcr-tuned)
      # hier on one host: blocks of 2 ranks taken as hosts (there is nothing to compose otherwise).
      ((np == 4)) && policies+=(mcr-hier)
      for model in zero3 moe; do
        mapfile -t order < <(rotate $((round - 1)) "${policies[@]}")
        for policy in "${order[@]}"; do
          run_one onehost "$out" "$round" "$model" "$np" "$policy" "$PWD/$out/table-np$np.json" \
            "simulate_ranks_per_host=2" </dev/null
        done
      done
    done
    # torch's gloo launched by torchrun (no mcr runtime in the processes) beside the mpirun
    # baseline, to show that mcr's idle runtime does not slow the baseline.
    run_one torchrun "$out" "$round" zero3 2 torch-gloo-torchrun "" "" </dev/null
  done
}

# Launches one job: launch KIND NP LOG [VAR=VALUE...] -- PROGRAM ARGS... (appends to LOG, which
# gets the command line first). KIND onehost: mpirun here; cluster: mpirun on the namespace cluster
# "ds", with the variables the ranks need exported (its agent starts them with a clean environment).
launch() {
  local kind=$1 np=$2 log=$3 env=() xs=() e
  shift 3
  while [[ $1 != -- ]]; do
    env+=("$1")
    shift
  done
  shift
  case $kind in
    onehost)
      echo "+ ${env[*]} nice -n 10 ${ONEHOST_MPI[*]} -np $np $*" >>"$log"
      env "${env[@]}" timeout 900 nice -n 10 "${ONEHOST_MPI[@]}" -np "$np" "$@" >>"$log" 2>&1 </dev/null
      ;;
    cluster)
      # GLOO_SOCKET_IFNAME: the interface torch's own gloo uses (mcr's Gloo finds eth0 itself).
      for e in OMP_NUM_THREADS PYTHONPATH PYTHONDONTWRITEBYTECODE DS_ACCELERATOR \
        GLOO_SOCKET_IFNAME=eth0 "${env[@]}"; do
        case $e in *=*) xs+=(-x "$e") ;; *) xs+=(-x "$e=${!e}") ;; esac
      done
      echo "+ nice -n 10 scripts/cluster --name ds mpirun -np $np ${xs[*]} $*" >>"$log"
      timeout 900 nice -n 10 scripts/cluster --name ds mpirun -np "$np" "${xs[@]}" "$@" >>"$log" 2>&1 </dev/null
      ;;
  esac
}

# The tuned table of NP ranks refined with the program's own latencies: each REFINE_FROM policy
# trains each model once, alone, with MCR_LOG=summary,trace (rank 0 writes
# trace-<model>-np<ranks>-<policy>[-<run>].trace.json at exit, the run number from the second run
# of REFINE_RUNS on; train.py's result goes to .json, its output to .txt), then `mcr tune --refine`
# reads every trace.
refine() {  # kind out np steps hier
  local kind=$1 out=$2 np=$3 steps=$4 hier=$5 traces=() model policy env base run
  for ((run = 1; run <= ${REFINE_RUNS:-1}; run++)); do
    for model in ${MODELS:-zero3 moe}; do
      for policy in $REFINE_FROM; do
        base=$out/trace-$model-np$np-$policy
        ((run > 1)) && base+=-$run
        mapfile -t env < <(policy_env "$policy" "$PWD/$out/table-np$np.json" "$hier")
        env=("${env[@]/#MCR_LOG=summary/MCR_LOG=summary,trace}" "MCR_TRACE_FILE=$PWD/$base.trace.json")
        echo "$(date -Is) trace $model np$np $policy load $(cut -d' ' -f1-3 /proc/loadavg)" \
          >>"$out/conditions.txt"
        if [[ -n ${REFINE_PAIRED:-} ]]; then  # under the load the pairs then measure in
          pair "$kind" "$np" "$base" first "$model" "$policy" "$PWD/$out/table-np$np.json" \
            "$hier" "$steps" "$PWD/$base.trace.json"
        else
          : >"$base.txt"
          # shellcheck disable=SC2046,SC2086
          launch "$kind" "$np" "$base.txt" "${env[@]}" -- "$PY" -W ignore::UserWarning "$TRAIN" \
            $(policy_args "$policy") ${MODEL[$model]} $SHAPE $steps --json "$PWD/$base.json" ||
            echo "FAILED: $base" | tee -a "$out/conditions.txt"
        fi
        traces+=("$PWD/$base.trace.json")
      done
    done
  done
  local IFS=,
  echo "+ $MCR tune --refine $PWD/$out/table-np$np.json --from-trace ${traces[*]} -o $PWD/$out/table-refined-np$np.json" \
    >"$out/refine-np$np.txt"
  "$MCR" tune --refine "$PWD/$out/table-np$np.json" --from-trace "${traces[*]}" \
    -o "$PWD/$out/table-refined-np$np.json" >>"$out/refine-np$np.txt" 2>&1
}

# One pair: torch's gloo (its turn ROLE: first or second) and POLICY started together, taking turns
# step by step; BASE.json/.txt and BASE-torch-gloo.json/.txt. TRACE (a file, or empty): the mcr job
# also writes its MCR_LOG trace there.
pair() {  # kind np base role model policy table hier steps trace
  local kind=$1 np=$2 base=$3 role=$4 model=$5 policy=$6 table=$7 hier=$8 steps=$9 trace=${10}
  local other=second env=() dir
  [[ $role == second ]] && other=first
  dir=$(mktemp -d /tmp/mcr-ds-turns.XXXXXX)
  mapfile -t env < <(policy_env "$policy" "$table" "$hier")
  [[ -n $trace ]] && env=("${env[@]/#MCR_LOG=summary/MCR_LOG=summary,trace}" "MCR_TRACE_FILE=$trace")
  # shellcheck disable=SC2206
  local common=(${MODEL[$model]} $SHAPE $steps)
  : >"$base-torch-gloo.txt"
  : >"$base.txt"
  rm -f "$base-torch-gloo.json" "$base.json"  # written on success only (as in run_one)
  launch "$kind" "$np" "$base-torch-gloo.txt" -- "$PY" -W ignore::UserWarning "$TRAIN" \
    --dist torch-gloo "${common[@]}" --turns "$dir:$role" \
    --json "$PWD/$base-torch-gloo.json" &
  # shellcheck disable=SC2046
  launch "$kind" "$np" "$base.txt" "${env[@]}" -- "$PY" -W ignore::UserWarning "$TRAIN" \
    $(policy_args "$policy") "${common[@]}" --turns "$dir:$other" \
    --json "$PWD/$base.json" || echo "FAILED: $base" | tee -a "$(dirname "$base")/conditions.txt"
  wait $! || echo "FAILED: $base-torch-gloo" | tee -a "$(dirname "$base")/conditions.txt"
  rm -rf "$dir"
}

# A/B pairs: torch's gloo and one mcr policy started together, taking turns step by step
# (train.py --turns), so that both see the same load. torch's gloo steps first in odd rounds,
# second in even ones. 3 warm-up and 12 measured steps each.
#   onehost: this machine, 2 and 4 ranks; hier with blocks of 2 ranks taken as hosts.
#   cluster: 2 hosts x 2 ranks at 1 Gbit (scripts/cluster); hier with MPI within a host and Gloo
#            between hosts (docs/hier-backend.md), the table tuned with the same setting so that
#            its hier entries are what the runs get.
paired() {
  local kind=$1 rounds=${2:-2} out nps hier np round model policy role
  local steps="--steps 15 --warmup 3 --skip-shm-op"
  if [[ $kind == onehost ]]; then
    out=$HERE/paired nps=(2 4) hier="simulate_ranks_per_host=2" TUNED_HIER=""
  else
    out=$HERE/${OUT:-paired-cluster-2x2-1gbit} nps=(4) hier="intra=mpi;inter=gloo" TUNED_HIER=$hier
    scripts/cluster --name ds up --hosts 2 --ranks-per-host 2 --rate 1gbit
    trap 'scripts/cluster --name ds down' EXIT
  fi
  record_header "$out" "$steps"
  [[ $kind == cluster ]] && scripts/cluster --name ds status >>"$out/conditions.txt"
  for np in "${nps[@]}"; do
    local tune_env=()
    [[ -n $TUNED_HIER ]] && tune_env=("MCR_HIER=$TUNED_HIER")
    # shellcheck disable=SC2206
    [[ -n ${TUNE_ENV:-} ]] && tune_env+=($TUNE_ENV)
    : >"$out/tune-np$np.txt"
    # shellcheck disable=SC2086 # TUNE_ARGS is split into words on purpose
    launch "$kind" "$np" "$out/tune-np$np.txt" "${tune_env[@]}" -- "$MCR" tune \
      --op all_reduce,all_gather,reduce_scatter,all_to_all,broadcast --async --place in \
      -b 4 -e 16M -f 4 ${TUNE_ARGS:-} -o "$PWD/$out/table-np$np.json"
    [[ -n ${REFINE_FROM:-} ]] && refine "$kind" "$out" "$np" "$steps" "$hier"
  done
  for ((round = 1; round <= rounds; round++)); do
    role=first
    ((round % 2 == 0)) && role=second
    for np in "${nps[@]}"; do
      local policies=(mcr-mpi mcr-gloo mcr-auto mcr-tuned)
      ((np == 4)) && policies+=(mcr-hier)
      [[ -n ${POLICIES:-} ]] && read -ra policies <<<"$POLICIES"
      for model in ${MODELS:-zero3 moe}; do
        for policy in "${policies[@]}"; do
          echo "$(date -Is) p$round $model np$np torch-gloo($role) vs $policy load $(cut -d' ' -f1-3 /proc/loadavg)" \
            >>"$out/conditions.txt"
          pair "$kind" "$np" "$out/p$round-$model-np$np-$policy" "$role" "$model" "$policy" \
            "$PWD/$out/table-np$np.json" "$hier" "$steps" ""
        done
      done
    done
  done
}

case ${1:-} in
  onehost) onehost "${2:-3}" "${3:-1}" ;;
  paired) paired onehost "${2:-2}" ;;
  paired-cluster) paired cluster "${2:-2}" ;;
  *)
    echo "usage: $0 onehost [ROUNDS [FIRST]] | paired [ROUNDS] | paired-cluster [ROUNDS]" >&2
    exit 2
    ;;
esac
