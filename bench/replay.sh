#!/usr/bin/env bash
# Replay SDSC-BLUE (243 K jobs; 232,562 with a known runtime) on one site of 1,152 processors
# with FCFS and with EASY, timing each run and its peak memory. Issue "Simulator" goal:
# <= 2 s each.
#
#   bash bench/replay.sh [TRACE]     # default ../shared/traces/SDSC-BLUE-2000-4.2-cln.swf.gz
set -euo pipefail
cd "$(dirname "$0")/.."
trace=${1:-../shared/traces/SDSC-BLUE-2000-4.2-cln.swf.gz}
cargo build --release --bin coalloc >&2
for policy in fcfs easy; do
    echo "== coalloc replay $trace --sites examples/sites-sdsc-blue.toml --policy $policy"
    /usr/bin/time -f "wall %e s, peak RSS %M KB" \
        target/release/coalloc replay "$trace" --sites examples/sites-sdsc-blue.toml \
        --policy "$policy" --json
done
