#!/usr/bin/env bash
# Regenerate every result of seed 003 §6.3 (the five DCS experiments) in results/.
# Usage: experiments/seed-003/run.sh [path/to/coalloc]   (default: build it with cargo)
# Takes a few seconds: the batches are deterministic, one seed each, one run at a time.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/experiments/coalloc.sh"
cd "$here"
rm -rf results/dcs results/background results/background-exp1
for f in dcs.toml background.toml background-exp1.toml; do
  "$coalloc" sim "$f" -j 1 -q
done
python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install --quiet matplotlib
python3 analyze.py
