#!/usr/bin/env bash
# Regenerate every result of seed 003 §6.3 (the five DCS experiments) in results/.
# Usage: experiments/seed-003/run.sh [path/to/coalloc]   (default: build it with cargo)
# dcs.toml is deterministic (one seed); background.toml draws other users' jobs from 10 seeds
# per point (360 runs); about half a minute in all, one run at a time.
# The run writes into a fresh folder and replaces results/ only when it succeeded.
# COALLOC_EXPERIMENT_QUICK=1: a reduced run into results-quick/ (see ../coalloc.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/experiments/coalloc.sh"
cd "$here"
results_begin
for f in dcs background background-timeline; do
  "$coalloc" sim "$f.toml" --out "$new/$f" -j 1 -q ${sim_quick[@]+"${sim_quick[@]}"}
done
[ -n "$quick" ] || python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install --quiet matplotlib
python3 analyze.py "$new"
results_commit
