#!/usr/bin/env bash
# Issue 22's goals for the engine (`coalloc sim`), measured side by side with `coalloc
# replay` in one run, each command REPS times (default 3), printing wall and user time and
# peak RSS of the whole process (trace parse included in both):
#   - TAGS-chain on the whole KTH-SP2 (bench/sim/tags-chain-kth.toml: one chain of two
#     32-node sites, jobs of at most 32 processors, every 30 s) against a `coalloc replay`
#     FCFS of it, on the trace's own 100 processors and on the same two 32-node sites;
#   - EASY on the whole SDSC-BLUE through `coalloc sim` (bench/sim/easy-sdsc-blue.toml)
#     against `coalloc replay` of it (examples/sites-sdsc-blue.toml).
# Since issue 22's item 2 `coalloc replay` is itself a run of the engine (ideal sites), so
# the replay lines of a new build measure the engine too; compare a new build's `sim` lines
# with an old build's `replay` lines (bench/sim-compare.sh runs both builds side by side).
# Results and commands are recorded in bench/RESULTS.md.
#
#   bash bench/sim.sh [BIN] [REPS]     # default: build the release coalloc and use it
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-}
reps=${2:-3}
if [ -z "$bin" ]; then
    cargo build --release --bin coalloc >&2
    bin=target/release/coalloc
fi
traces=$(cd "${COALLOC_TRACES:-../shared/traces}" && pwd)
ln -sfn "$traces" bench/sim/traces
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
measure() {
    local label=$1
    shift
    for _ in $(seq "$reps"); do
        /usr/bin/time -f "$label: wall %e s, user %U s, peak RSS %M KB" "$@" >/dev/null
    done
}
kth=$traces/KTH-SP2-1996-2.1-cln.swf.gz
blue=$traces/SDSC-BLUE-2000-4.2-cln.swf.gz
measure "replay FCFS KTH-SP2, 100 processors" \
    "$bin" replay "$kth" --sites examples/sites-kth-sp2.toml --policy fcfs --json
measure "replay FCFS KTH-SP2, 2 x 32 processors" \
    "$bin" replay "$kth" --sites bench/sim/sites-2x32.toml --max-procs 32 --policy fcfs --json
measure "sim TAGS-chain KTH-SP2" \
    "$bin" sim bench/sim/tags-chain-kth.toml -q -j1 --out "$out/tags"
measure "replay EASY SDSC-BLUE" \
    "$bin" replay "$blue" --sites examples/sites-sdsc-blue.toml --policy easy --json
measure "sim EASY SDSC-BLUE" \
    "$bin" sim bench/sim/easy-sdsc-blue.toml -q -j1 --out "$out/easy"
