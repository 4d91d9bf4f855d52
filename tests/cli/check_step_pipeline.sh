#!/usr/bin/env bash
# scripts/lib.sh's mcr_step (the GPU check's steps): a step whose launcher fails while a filter
# after it succeeds (torchrun ... | grep) is a failure, not a PASS; a step that exits 124 itself
# (mcr's watchdog) well inside its limit is a FAIL with its status, not a TIMEOUT.
set -u
source "$(dirname "$0")/../../scripts/lib.sh"
OUT_DIR=$(mktemp -d)
trap 'rm -rf "$OUT_DIR"' EXIT
SUMMARY=$OUT_DIR/summary.txt
DEADLINE=$(($(date +%s) + 60))
FAILED=0
launcher_fails_filter_passes() { { echo "a row of results"; exit 3; } | grep -v unrelated; }
mcr_step piped 20 launcher_fails_filter_passes
rc=$?
if ((rc == 0)) || ((FAILED != 1)) || ! grep -q '^FAIL    piped (rc 3' "$SUMMARY"; then
  echo "FAIL: a step whose launcher exits 3 gave rc $rc, FAILED=$FAILED: $(cat "$SUMMARY")"
  exit 1
fi
exits_124() { exit 124; }
mcr_step watchdog 20 exits_124
if ! grep -q '^FAIL    watchdog (rc 124' "$SUMMARY"; then
  echo "FAIL: a step exiting 124 at once was not reported as FAIL: $(cat "$SUMMARY")"
  exit 1
fi
echo "ok: $(cat "$SUMMARY")"
