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
