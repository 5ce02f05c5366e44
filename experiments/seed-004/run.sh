#!/usr/bin/env bash
# Regenerate every result of seed 004's multicluster experiments (§V-B Fig. 3 and Table III,
# §V-C1 Fig. 5) in results/. The multicloud ones (Fig. 4, 6) are in cloud/.
# Usage: experiments/seed-004/run.sh [path/to/coalloc]   (default: build it with cargo)
# Traces: $COALLOC_TRACES (default ../shared/traces beside the repository, i.e. the PWA
# copies described in /work/shared/traces/README.md), linked here as traces/.
# Takes about 8 minutes on this (shared, 2-core) machine; see README.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/experiments/coalloc.sh"
traces="${COALLOC_TRACES:-$root/../shared/traces}"
cd "$here"
ln -sfn "$traces" traces
rm -rf results/sweep results/compare
time "$coalloc" sim sweep.toml -q      # 13 limits x 3 chain set-ups x 4 traces = 156 runs
time "$coalloc" sim compare.toml -q    # 6 policies x 10 chain counts x 4 traces = 240 runs
python3 analyze.py | tee results/tables.md
