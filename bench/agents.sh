#!/usr/bin/env bash
# Site-agent benchmarks (issue 16): the agent hop (co-allocation latency, submit -> barrier
# released, for 1, 4, 16 and 25 components, three local sites reached directly and through
# `coalloc agent`, samples alternating, one run), and Slurm sites through agents at 1, 3 and
# 6 components beside Slurm's own floor for the same launches (bench/slurm-diag/steps.sh's
# launches, each sample paired with one of coalloc's, same run). Builds the release
# binaries; brings up the three-cluster Slurm rig of scripts/slurm/ at COALLOC_SLURM_RIG
# (default /tmp/coalloc-slurm) if needed and takes it down again if it started it
# (NO_SLURM=1: the first part only).
#
#   bash bench/agents.sh [REPS]          # default 10 samples of each
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-10}
BASE=${COALLOC_SLURM_RIG:-/tmp/coalloc-slurm}
cargo build --release --bin coalloc --bin coalloc-barrier --example agent_bench -p coalloc-cli -p coalloc-runtime >&2
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr); $(date -u +%FT%TZ)"
if [ "${NO_SLURM:-0}" = 1 ]; then
    exec target/release/examples/agent_bench "$PWD/target/release/coalloc" --reps "$REPS"
fi
started=0
if [ ! -e "$BASE/clusters.tsv" ]; then
    scripts/slurm/up.sh "$BASE" >&2
    started=1
fi
trap '[ $started = 1 ] && scripts/slurm/down.sh "$BASE" >/dev/null 2>&1 || true' EXIT
target/release/examples/agent_bench "$PWD/target/release/coalloc" --reps "$REPS" --slurm "$BASE"
