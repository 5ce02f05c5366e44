#!/usr/bin/env bash
# Regenerate every result of seed 002 §4.2 (the DUROC microbenchmarks, Figs. 2-5 and the kM/2
# barrier-wait model) on a real `coalloc serve` with the local backend, in results/.
# Usage: experiments/seed-002/run.sh [path/to/coalloc] [--reps N]
#        (default binary: build it with cargo; default 10 repetitions of each job)
# Takes about a minute with 10 repetitions (150 jobs, 4,880 processes); needs bash (for
# $EPOCHREALTIME) and python3, and matplotlib for the figures (installed with pip if missing).
# The components run `coalloc-barrier` when it is beside the coalloc binary (cargo build
# --bin coalloc-barrier), else `coalloc barrier`, which costs more per process.
# The run writes into a fresh folder and replaces results/ only when it succeeded.
# COALLOC_EXPERIMENT_QUICK=1: one repetition, into results-quick/ (see ../coalloc.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/experiments/coalloc.sh"
reps=()
if [ -n "$quick" ]; then reps=(--reps 1); fi
cd "$here"
results_begin
{
  echo "binary: $coalloc ($("$coalloc" --version 2>/dev/null || echo unknown version))"
  echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr)"
  echo "start: $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$new/run.txt"
/usr/bin/time -f "microbench.py: %e s wall, %U s user, %S s system (the script and the children it waited for: the server)" \
  python3 microbench.py "$coalloc" "$new" ${reps[@]+"${reps[@]}"} "$@" 2>> "$new/run.txt" | tee -a "$new/run.txt"
echo "end: $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" >> "$new/run.txt"
[ -n "$quick" ] || python3 -c 'import matplotlib' 2>/dev/null || python3 -m pip install --quiet matplotlib
python3 analyze.py "$new"
results_commit
cat "$dest/run.txt"
