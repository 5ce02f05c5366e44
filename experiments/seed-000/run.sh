#!/usr/bin/env bash
# Regenerate every result of seed 000 §4–5 (KOALA on the DAS with failure injection).
# Usage: experiments/seed-000/run.sh [path/to/coalloc]   (default: build it with cargo)
# Takes about a minute on one core (threshold.toml's stalled runs take most of it).
# The run writes into a fresh folder and replaces results/ only when it succeeded
# (results/transfers/ is transfers.sh's, a real run: kept). COALLOC_EXPERIMENT_QUICK=1: a
# reduced run into results-quick/ (see ../coalloc.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/experiments/coalloc.sh"
cd "$here"
results_begin
for f in koala utilization threshold; do
  "$coalloc" sim "$f.toml" --out "$new/$f" -j 1 -q ${sim_quick[@]+"${sim_quick[@]}"}
done
[ -n "$quick" ] || python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install --quiet matplotlib
python3 analyze.py "$new"
results_commit transfers
