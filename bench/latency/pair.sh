#!/bin/bash
# pair.sh OLD_RELEASE_DIR NEW_RELEASE_DIR: server_bench of the two builds alternately, three
# times each, with the load average before each run (bench/RESULTS.md, "Session of
# 2026-11-28 (second)").
OLD=$1; NEW=$2
for i in 1 2 3; do
  for who in old new; do
    B=$OLD; [ $who = new ] && B=$NEW
    echo "=== $who run $i $(date -u +%T) load: $(cut -d' ' -f1-3 /proc/loadavg)"
    $B/examples/server_bench $B/coalloc --reps 10 --jobs 2000 2>&1 | grep -v "^$"
  done
done
