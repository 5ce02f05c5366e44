#!/usr/bin/env bash
# Regenerate every result of seed 004's multicluster-and-multicloud experiments in results/:
# figure 4 (TAGS-sets vs. the short-job limit, limit.toml) and figure 6 (all policies per
# trace, policies.toml).
# Usage: experiments/seed-004/cloud/run.sh [path/to/coalloc]   (default: build it with cargo)
# The traces are read from $COALLOC_TRACES (default: ../shared/traces beside the repository),
# linked here as traces/. Took 3 min 4 s on whole traces on 2 busy cores, binary built (see README).
# The run writes into a fresh folder and replaces results/ only when it succeeded.
# COALLOC_EXPERIMENT_QUICK=1: a reduced run (the traces' first jobs) into results-quick/
# (see ../../coalloc.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
. "$root/experiments/coalloc.sh"
traces="${COALLOC_TRACES:-$root/../shared/traces}"
case "$traces" in /*) ;; *) traces="$PWD/$traces" ;; esac
for t in KTH-SP2-1996-2.1-cln CTC-SP2-1996-3.1-cln SDSC-BLUE-2000-4.2-cln LCG-2005-1; do
  [ -f "$traces/$t.swf.gz" ] || { echo "missing $traces/$t.swf.gz (set COALLOC_TRACES)" >&2; exit 1; }
done
cd "$here"
ln -sfn "$traces" traces
results_begin
for f in limit policies; do
  start=$(date +%s)
  "$coalloc" sim "$f.toml" --out "$new/$f" -q ${sim_quick[@]+"${sim_quick[@]}"}
  echo "$f.toml: $(( $(date +%s) - start )) s"
done
results_commit
