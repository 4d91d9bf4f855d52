#!/usr/bin/env bash
# Gloo's asynchronous collectives one at a time (MCR_GLOO_THREADS=1, as before) against two side
# by side (2, the default) on one host, 2 ranks: the example traces replayed on gloo by the same
# build, alternating 1 and 2, three rounds. Raw JSON per run next to this script.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=data/gloo/2026-12-03-collective-threads
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for trace in dp_step_100m zero3_step moe_step; do
  for round in 1 2 3; do
    for threads in 1 2; do
      echo "=== $trace round $round MCR_GLOO_THREADS=$threads; load $(cut -d' ' -f1-3 /proc/loadavg)"
      mpirun --oversubscribe --bind-to none -np 2 -x MCR_GLOO_THREADS=$threads \
        build-ci/bin/mcr replay examples/traces/$trace.json --backend gloo --reps 5 --json \
        > $out/$trace-r$round-threads$threads.json
      python3 - "$out/$trace-r$round-threads$threads.json" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))["policies"][0]["reps"]
print(f"median {statistics.median(r)*1e3:.0f} ms [{min(r)*1e3:.0f}-{max(r)*1e3:.0f}]")
PY
    done
  done
done
