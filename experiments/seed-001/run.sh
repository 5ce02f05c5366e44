#!/usr/bin/env bash
# Regenerate every seed-001 result and plot (results/*/): five experiment files, 5 seeds each.
#   bash experiments/seed-001/run.sh [-j THREADS]
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --bin coalloc >&2
for f in fig1 lp wait deadline local; do
    echo "== coalloc sim experiments/seed-001/$f.toml $*"
    target/release/coalloc sim "experiments/seed-001/$f.toml" "$@"
done
