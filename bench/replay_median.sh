#!/usr/bin/env bash
# Median replay time of one build: N single runs of `coalloc replay TRACE --sites SITES
# --policy POLICY --json` (KTH-SP2 on its 100 processors by default), each a fresh process,
# printing the min, median and max of the replay's own `seconds` (parse excluded). To compare
# two builds, copy each binary aside and call this for both, alternately.
#
#   bash bench/replay_median.sh BIN POLICY [N] [TRACE] [SITES]
#   bash bench/replay_median.sh target/release/coalloc easy 21
set -euo pipefail
bin=$1 policy=$2 n=${3:-21}
trace=${4:-../shared/traces/KTH-SP2-1996-2.1-cln.swf.gz}
sites=${5:-examples/sites-kth-sp2.toml}
for _ in $(seq "$n"); do
    "$bin" replay "$trace" --sites "$sites" --policy "$policy" --json |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["seconds"])'
done | sort -n | awk '{a[NR] = $1} END {printf "min %.4f median %.4f max %.4f (n = %d)\n", a[1], a[int((NR + 1) / 2)], a[NR], NR}'
