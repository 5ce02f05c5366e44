#!/usr/bin/env bash
# Regenerate every result of seed 000 §4–5 (KOALA on the DAS with failure injection).
# Usage: experiments/seed-000/run.sh [path/to/coalloc]   (default: build it with cargo)
# Takes about a minute on one core (threshold.toml's stalled runs take most of it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/experiments/coalloc.sh"
cd "$here"
# (results/transfers/ is transfers.sh's: a real run, kept)
find results -mindepth 1 -maxdepth 1 ! -name transfers -exec rm -rf {} + 2>/dev/null || true
for f in koala.toml utilization.toml threshold.toml; do
  "$coalloc" sim "$f" -j 1 -q
done
python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install --quiet matplotlib
python3 analyze.py
