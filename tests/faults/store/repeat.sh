#!/bin/sh
# repeat.sh COUNT COMMAND [ARGS...]: runs COMMAND COUNT times, stopping at the first failure.
count=$1
shift
i=1
while [ "$i" -le "$count" ]; do
  start=$(date +%s.%N)
  "$@" || { echo "repeat.sh: run $i of $count failed"; exit 1; }
  echo "repeat.sh: run $i of $count passed in $(awk "BEGIN { print $(date +%s.%N) - $start }") s"
  i=$((i + 1))
done
