#!/usr/bin/env bash
# Regenerate every seed-001 result and plot (results/*/): five experiment files, 5 seeds each.
# Usage: experiments/seed-001/run.sh [path/to/coalloc] [-j THREADS]   (default: build it with cargo)
# The run writes into a fresh folder and replaces results/ only when it succeeded.
# COALLOC_EXPERIMENT_QUICK=1: a reduced run into results-quick/ (see ../coalloc.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/experiments/coalloc.sh"
cd "$here"
results_begin
for f in fig1 lp wait deadline local; do
  echo "== coalloc sim experiments/seed-001/$f.toml $*"
  "$coalloc" sim "$f.toml" --out "$new/$f" "$@" ${sim_quick[@]+"${sim_quick[@]}"}
done
results_commit
