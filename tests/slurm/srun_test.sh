#!/usr/bin/env bash
# Runs a test program under srun on the cluster the slurm.up fixture started (scripts/slurm):
#   srun_test.sh STATE_DIR SRUN_ARGS... PROGRAM [ARGS...]
# Exits 77 (a skip) when that cluster is not there because slurm.up was skipped (not root, Slurm
# not installed); a failed slurm.up keeps ctest from starting this at all.
set -euo pipefail
dir=${1:?usage: srun_test.sh STATE_DIR SRUN_ARGS... PROGRAM [ARGS...]}
shift
if [[ ! -f $dir/slurm.conf ]]; then
  echo "srun_test: no Slurm test cluster in $dir (slurm.up was skipped; its output says why)" >&2
  exit 77
fi
# --kill-on-bad-exit: a rank that fails ends the step at once instead of leaving its peers to time
# out; --time (minutes) bounds the step inside Slurm as well as under ctest's TIMEOUT.
exec "$(dirname "$(readlink -f "$0")")/../../scripts/slurm" --dir "$dir" srun --kill-on-bad-exit=1 \
  --time=3 "$@"
