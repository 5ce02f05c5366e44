#!/usr/bin/env bash
# Regenerate every result of seed 003 §6.3 (the five DCS experiments) in results/.
# Usage: experiments/seed-003/run.sh [path/to/coalloc]   (default: build it with cargo)
# dcs.toml is deterministic (one seed); background.toml draws other users' jobs from 10 seeds
# per point (360 runs); about half a minute in all, one run at a time.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/experiments/coalloc.sh"
cd "$here"
rm -rf results/dcs results/background results/background-timeline
for f in dcs.toml background.toml background-timeline.toml; do
  "$coalloc" sim "$f" -j 1 -q
done
python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install --quiet matplotlib
python3 analyze.py
