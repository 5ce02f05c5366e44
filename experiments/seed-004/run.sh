#!/usr/bin/env bash
# Regenerate every result of seed 004's multicluster experiments (§V-B Fig. 3 and Table III,
# §V-C1 Fig. 5, §V-A Table II) in results/, on whole traces (§V-A: the PWA traces complete,
# the grid trace LCG's first 50,000 jobs). The multicloud ones (Fig. 4, 6) are in cloud/.
# Usage: experiments/seed-004/run.sh [path/to/coalloc]   (default: build it with cargo)
# Traces: $COALLOC_TRACES (default ../shared/traces beside the repository, i.e. the PWA
# copies described in /work/shared/traces/README.md), linked here as traces/.
# Threads: $JOBS (default every core). Run times: see README.md.
# The run writes into a fresh folder and replaces results/ only when it succeeded.
# COALLOC_EXPERIMENT_QUICK=1: a reduced run (the traces' first jobs) into results-quick/
# (see ../coalloc.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/experiments/coalloc.sh"
traces="${COALLOC_TRACES:-$root/../shared/traces}"
case "$traces" in /*) ;; *) traces="$PWD/$traces" ;; esac
threads=(${JOBS:+-j "$JOBS"})
lcg_first=50000
first=()
if [ -n "$quick" ]; then
  lcg_first="${COALLOC_EXPERIMENT_JOBS:-20}"
  first=(--first "$lcg_first")
fi
cd "$here"
ln -sfn "$traces" traces
results_begin
mkdir -p "$new/table2"
# Table II: the traces as used (jobs of at most 32 processors; LCG: its first 50,000 jobs).
for t in KTH-SP2-1996-2.1-cln CTC-SP2-1996-3.1-cln SDSC-BLUE-2000-4.2-cln SDSC-SP2-1998-4.2-cln \
         HPC2N-2002-2.2-cln LANL-CM5-1994-4.1-cln; do
  "$coalloc" trace stats --json --max-procs 32 ${first[@]+"${first[@]}"} "traces/$t.swf.gz" > "$new/table2/$t.json"
done
"$coalloc" trace stats --json --max-procs 32 --first "$lcg_first" traces/LCG-2005-1.swf.gz \
  > "$new/table2/LCG-2005-1.json"
# 13 limits x (2 chains RR + 4 chains RR + 4 chains RND x 5 seeds) x 7 traces = 637 runs
time "$coalloc" sim sweep.toml --out "$new/sweep" -q ${threads[@]+"${threads[@]}"} ${sim_quick[@]+"${sim_quick[@]}"}
# 6 policies x 10 chain counts x 7 traces = 420 runs
time "$coalloc" sim compare.toml --out "$new/compare" -q ${threads[@]+"${threads[@]}"} ${sim_quick[@]+"${sim_quick[@]}"}
python3 analyze.py "$new" | tee "$new/tables.md"
results_commit
