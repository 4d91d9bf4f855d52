#!/usr/bin/env bash
# The DeepSpeed records of 2026-12-03 (docs/deepspeed.md, "Pairs on 2 x 2 again"): the script of
# 2026-12-01 (data/deepspeed/2026-12-01/commands.sh, where its arguments and variables are
# described) writing under this folder. Run from anywhere, with the binding built in build-ci. The
# record ran
#
#   data/deepspeed/2026-12-03/commands.sh paired-cluster 2
#   OUT=paired-cluster-2x2-1gbit-in-flight-1-4 TUNE_ARGS="--in-flight 1,4" \
#     POLICIES="mcr-gloo mcr-tuned" MODELS=moe data/deepspeed/2026-12-03/commands.sh paired-cluster 3
#   OUT=paired-cluster-2x2-1gbit-tcp-thread TUNE_ENV=OMPI_MCA_btl_tcp_progress_thread=1 \
#     POLICIES="mcr-mpi mcr-mpi-tcp-thread mcr-tuned-tcp-thread" MODELS=moe \
#     data/deepspeed/2026-12-03/commands.sh paired-cluster 2
#   OUT=paired-cluster-2x2-1gbit-a2a-gloo POLICIES="mcr-gloo mcr-tuned mcr-tuned-a2a-gloo" \
#     MODELS=moe data/deepspeed/2026-12-03/commands.sh paired-cluster 3
#
# and then, for `mcr tune --refine` (docs/deepspeed.md, "Tuned from the program's own latencies"):
#
#   OUT=paired-cluster-2x2-1gbit-refined REFINE_FROM="mcr-mpi mcr-gloo mcr-hier" \
#     POLICIES="mcr-gloo mcr-tuned mcr-refined" MODELS=moe \
#     data/deepspeed/2026-12-03/commands.sh paired-cluster 3
#   OUT=paired-cluster-2x2-1gbit-refined-paired REFINE_PAIRED=1 \
#     REFINE_FROM="mcr-mpi mcr-gloo mcr-hier" POLICIES="mcr-gloo mcr-tuned mcr-refined" MODELS=moe \
#     data/deepspeed/2026-12-03/commands.sh paired-cluster 3
#   OUT=paired-cluster-2x2-1gbit-refined-paired-zero3 REFINE_PAIRED=1 \
#     REFINE_FROM="mcr-mpi mcr-gloo mcr-hier" POLICIES="mcr-gloo mcr-tuned mcr-refined" \
#     MODELS=zero3 data/deepspeed/2026-12-03/commands.sh paired-cluster 2
#
# and, with the traces' host maps placing DeepSpeed's 2-rank expert groups (docs/deepspeed.md,
# "Expert groups within a host"):
#
#   OUT=paired-cluster-2x2-1gbit-refined-paired-ep2 REFINE_PAIRED=1 REFINE_FROM="mcr-mpi mcr-gloo" \
#     POLICIES="mcr-gloo mcr-tuned mcr-refined" MODELS=moe-ep2 \
#     data/deepspeed/2026-12-03/commands.sh paired-cluster 3
#   OUT=paired-cluster-2x2-1gbit-refined-paired-ep2-subgroups TUNE_ARGS="--subgroup-ops all" \
#     REFINE_PAIRED=1 REFINE_FROM="mcr-mpi mcr-gloo mcr-hier" \
#     POLICIES="mcr-gloo mcr-tuned mcr-refined" MODELS=moe-ep2 \
#     data/deepspeed/2026-12-03/commands.sh paired-cluster 3
#
# (The first of the refine sets ran before REFINE_RUNS and REFINE_PAIRED existed; unset, they
# change nothing.) The traces are committed gzipped.
#
# (It ran as a copy of that script with HERE set to this folder; the copy and the script are the
# same commands.)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
RECORD=data/deepspeed/2026-12-03 exec "$here/../2026-12-01/commands.sh" "$@"
