#!/usr/bin/env bash
# hier's per-step selection on 2 x 2 at 1 Gbit: tune (world + hier's step groups), then 16 MiB
# all_reduce, mpi/gloo/hier interleaved with auto (--compare-auto), under four settings, twice.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=data/cluster/2x2-1gbit-hier-steps
export MCR_CLUSTER=hs1
c=scripts/cluster
mcr=build-ci/bin/mcr
$c up --hosts 2 --ranks-per-host 2 --rate 1gbit
trap '$c down' EXIT
uptime
$c mpirun -np 4 $mcr tune --op all_reduce -b 64K -e 64M -f 4 --reps 5 -o $out/tuned.json -q \
  | tee $out/tune.txt
for round in 1 2; do
  for setting in old-default preset tuned fixed; do
    env=()
    case $setting in
      old-default) env=(-x MCR_HIER=intra=mpi,inter=mpi) ;;
      preset) ;;
      tuned) env=(-x MCR_TUNING=$out/tuned.json) ;;
      fixed) env=(-x MCR_HIER=intra=mpi,inter=gloo) ;;
    esac
    echo "=== round $round, $setting: ${env[*]:-}; load $(cut -d' ' -f1-3 /proc/loadavg)"
    $c mpirun -np 4 "${env[@]}" $mcr bench --op all_reduce --sizes 16M --backend mpi,gloo,hier \
      --compare-auto --reps 15 -q --json $out/r${round}-$setting.json
    $c mpirun -np 4 "${env[@]}" $mcr explain all_reduce --bytes 16M --json > $out/r${round}-$setting.explain.json
  done
done | tee $out/bench.txt
