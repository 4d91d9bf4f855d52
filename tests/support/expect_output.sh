#!/usr/bin/env bash
# Runs a command whose exit status is not the verdict (it fails on purpose: a refused rank, a peer
# that gives up) and passes when its output matches every regular expression given, and none of
# the FAIL ones. ctest's PASS_REGULAR_EXPRESSION cannot say this: its expressions are alternatives,
# and any one of them passes the test.
#   expect_output.sh [--fail REGEX]... REGEX... -- COMMAND...
set -uo pipefail
want=() refuse=()
while (($#)) && [[ $1 != -- ]]; do
  if [[ $1 == --fail ]]; then
    refuse+=("$2")
    shift 2
  else
    want+=("$1")
    shift
  fi
done
shift  # --
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
verdict=0
for re in "${want[@]}"; do
  if ! grep -Eq -- "$re" <<<"$out"; then
    echo "expect_output.sh: not in the output: $re" >&2
    verdict=1
  fi
done
for re in "${refuse[@]}"; do
  if grep -Eq -- "$re" <<<"$out"; then
    echo "expect_output.sh: in the output, which must not be: $re" >&2
    verdict=1
  fi
done
echo "expect_output.sh: the command exited with status $rc; verdict from its output: $verdict" >&2
exit "$verdict"
