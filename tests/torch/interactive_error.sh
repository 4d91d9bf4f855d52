#!/usr/bin/env bash
# An exception at an interactive prompt (python -i) ends the statement, not the process: the rank
# goes on, its next operation works, and its exit is a clean one (MPI finalized, so mpiexec exits
# 0), not an exit on an error.
#   interactive_error.sh MPIEXEC PYTHON
set -uo pipefail
mpiexec=$1 python=$2
source "$(dirname "$0")/../../scripts/lib.sh"
out=$(printf '%s\n' 'import mcr.torch as mt' 'mt.init_processes()' \
  'raise ValueError("at the prompt")' 'import torch, torch.distributed as dist' \
  't = torch.ones(2); dist.all_reduce(t); print(f"sum={t.tolist()}")' |
  "$mpiexec" "${MCR_MPI_FLAGS[@]}" -x PYTHONPATH -np 1 "$python" -W ignore::UserWarning -i 2>&1)
rc=$?
printf '%s\n' "$out"
fail() {
  echo "interactive_error.sh: FAIL: $*" >&2
  exit 1
}
grep -q "ValueError: at the prompt" <<<"$out" || fail "the exception was not shown"
# One string, one write: the prompts (stderr) cannot come between its parts.
grep -q "sum=\[1.0, 1.0\]" <<<"$out" || fail "the all_reduce after it did not run"
grep -q "finalize after a failure" <<<"$out" && fail "the exit was taken for an exit on an error"
((rc == 0)) || fail "mpiexec exited with $rc"
echo "interactive_error.sh: OK"
