# Shared by the scripts under scripts/ and the shell tests: source it, then use
#   MCR_ROOT         the repository root
#   MCR_MPI_FLAGS    the mpiexec flags of cmake/McrMpiexec.cmake, the one place they are written
#                    (ranks oversubscribe a small host, yield when idle, shared memory, root allowed)
#   mcr_bin_dir NAME...   the build's bin directory holding every NAME: $BUILD_DIR/bin when
#                    BUILD_DIR is set, else the first of build/, build-ci/, build-gpu-check/ that
#                    has them; exits 2 naming the targets to build
#   mcr_binary       the mcr CLI: $MCR when set, else mcr_bin_dir's, else an installed one on PATH
# shellcheck shell=bash

MCR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The list between "set(MCR_MPIEXEC_FLAGS" and ")", as words.
read -r -a MCR_MPI_FLAGS < <(sed -n '/^set(MCR_MPIEXEC_FLAGS/,/)/p' "$MCR_ROOT/cmake/McrMpiexec.cmake" |
  sed 's/^set(MCR_MPIEXEC_FLAGS//; s/)//' | tr '\n' ' ' && echo)
# A failure inside the substitution above is not seen by `set -e`: an empty list would run every
# mpirun without --oversubscribe and --bind-to none, silently.
if ((${#MCR_MPI_FLAGS[@]} == 0)); then
  echo "scripts/lib.sh: no MCR_MPIEXEC_FLAGS list in $MCR_ROOT/cmake/McrMpiexec.cmake" >&2
  exit 2
fi

mcr_bin_dir() {
  local dirs=() dir name
  if [[ -n ${BUILD_DIR:-} ]]; then
    dirs=("$BUILD_DIR/bin")
  else
    dirs=("$MCR_ROOT/build/bin" "$MCR_ROOT/build-ci/bin" "$MCR_ROOT/build-gpu-check/bin")
  fi
  for dir in "${dirs[@]}"; do
    for name in "$@"; do
      [[ -x $dir/$name ]] || continue 2
    done
    echo "$dir"
    return 0
  done
  echo "$(basename "$0"): no build holds $* (looked in ${dirs[*]}): build those targets first" \
    "(cmake --build --preset ci) or set BUILD_DIR" >&2
  exit 2
}

mcr_binary() {
  if [[ -n ${MCR:-} ]]; then
    echo "$MCR"
  elif [[ -z ${BUILD_DIR:-} ]] && ! (mcr_bin_dir mcr >/dev/null 2>&1) && command -v mcr >/dev/null; then
    command -v mcr
  else
    local dir
    dir=$(mcr_bin_dir mcr) || exit 2
    echo "$dir/mcr"
  fi
}

# Time-limited steps of the GPU checks (scripts/gpu-check, scripts/gpu-check-bundle). The caller
# sets OUT_DIR (logs), SUMMARY (one line per step), DEADLINE (epoch seconds) and FAILED=0.
#   mcr_remaining         seconds left until DEADLINE
#   mcr_step NAME LIMIT_S CMD...
#                    runs CMD, a program or a function of the calling script (functions go with it;
#                    so do exported variables), with its output in $OUT_DIR/NAME.log, for at most
#                    LIMIT_S seconds and never past DEADLINE; records PASS/FAIL/TIMEOUT/SKIP with the
#                    duration in $SUMMARY and sets FAILED=1 on anything but PASS.
mcr_remaining() { echo $((DEADLINE - $(date +%s))); }

mcr_step() {
  local name=$1 limit=$2 left t0 rc dt
  shift 2
  left=$(mcr_remaining)
  if ((left <= 5)); then
    echo "SKIP    $name (time budget spent)" | tee -a "$SUMMARY"
    FAILED=1
    return 1
  fi
  ((limit > left)) && limit=$left
  t0=$(date +%s)
  # pipefail in the step's own shell too: a new bash does not inherit it, and a step that pipes
  # a launcher into a filter (torchrun | grep) must fail with the launcher.
  # shellcheck disable=SC2016  # expanded by the inner shell
  timeout --kill-after=10 "$limit" bash -o pipefail -c "$(declare -f); "'"$@"' mcr-step "$@" \
    >"$OUT_DIR/$name.log" 2>&1
  rc=$?
  dt=$(($(date +%s) - t0))
  if ((rc == 0)); then
    echo "PASS    $name (${dt}s)" | tee -a "$SUMMARY"
  elif (((rc == 124 || rc == 137) && dt >= limit)); then
    # timeout's own status; a step that exits 124 itself (mcr's watchdog) or is killed for memory
    # (137) well inside its limit failed and is reported with its status.
    echo "TIMEOUT $name (${dt}s, limit ${limit}s) — see $name.log" | tee -a "$SUMMARY"
    FAILED=1
  else
    echo "FAIL    $name (rc $rc, ${dt}s) — see $name.log" | tee -a "$SUMMARY"
    FAILED=1
  fi
  return $rc
}
