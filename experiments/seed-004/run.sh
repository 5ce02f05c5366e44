#!/usr/bin/env bash
# Regenerate every result of seed 004's multicluster experiments (§V-B Fig. 3 and Table III,
# §V-C1 Fig. 5, §V-A Table II) in results/, on whole traces (§V-A: the PWA traces complete,
# the grid trace LCG's first 50,000 jobs). The multicloud ones (Fig. 4, 6) are in cloud/.
# Usage: experiments/seed-004/run.sh [path/to/coalloc]   (default: build it with cargo)
# Traces: $COALLOC_TRACES (default ../shared/traces beside the repository, i.e. the PWA
# copies described in /work/shared/traces/README.md), linked here as traces/.
# Threads: $JOBS (default every core). Run times: see README.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/experiments/coalloc.sh"
traces="${COALLOC_TRACES:-$root/../shared/traces}"
threads=(${JOBS:+-j "$JOBS"})
cd "$here"
ln -sfn "$traces" traces
mkdir -p results/table2
# Table II: the traces as used (jobs of at most 32 processors; LCG: its first 50,000 jobs).
for t in KTH-SP2-1996-2.1-cln CTC-SP2-1996-3.1-cln SDSC-BLUE-2000-4.2-cln SDSC-SP2-1998-4.2-cln \
         HPC2N-2002-2.2-cln LANL-CM5-1994-4.1-cln; do
  "$coalloc" trace stats --json --max-procs 32 "traces/$t.swf.gz" > "results/table2/$t.json"
done
"$coalloc" trace stats --json --max-procs 32 --first 50000 traces/LCG-2005-1.swf.gz \
  > results/table2/LCG-2005-1.json
rm -rf results/sweep results/compare
# 13 limits x (2 chains RR + 4 chains RR + 4 chains RND x 5 seeds) x 7 traces = 637 runs
time "$coalloc" sim sweep.toml -q "${threads[@]}"
# 6 policies x 10 chain counts x 7 traces = 420 runs
time "$coalloc" sim compare.toml -q "${threads[@]}"
python3 analyze.py | tee results/tables.md
