#!/usr/bin/env bash
# Regenerate the results and plots of issue 31's experiment (results/*/): reservation against
# the Incremental Claiming Policy on seed 000's and seed 001's workloads, with sites that take
# reservations any time ahead or only 1 h, 10 min, 2 min or 30 s ahead. 5 seeds each; about
# 20 s on one core.
# Usage: experiments/reserve/run.sh [path/to/coalloc] [-j THREADS]   (default: build it with cargo)
# The run writes into a fresh folder and replaces results/ only when it succeeded.
# COALLOC_EXPERIMENT_QUICK=1: a reduced run into results-quick/ (see ../coalloc.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/experiments/coalloc.sh"
cd "$here"
results_begin
for f in seed000 seed001; do
  echo "== coalloc sim experiments/reserve/$f.toml $*"
  "$coalloc" sim "$f.toml" --out "$new/$f" "$@" ${sim_quick[@]+"${sim_quick[@]}"}
done
results_commit
