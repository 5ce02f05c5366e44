#!/usr/bin/env bash
# The whole test suite: what CI runs and what a developer runs, on a fresh machine.
# It installs what the suite needs, then runs every test of the workspace and ends with one
# summary line, `tests: N passed, M failed`.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo not found: install Rust (https://rustup.rs) and run this again" >&2
    exit 1
fi

# Everything the current suite needs is built by cargo from crates.io. Later suites add
# their services here (Slurm and munge for the real-cluster tests).

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked 2>&1 | tee "$log" || status=$?
summary=$(grep -E '^test result:' "$log" | awk '{p += $4; f += $6} END {printf "%d passed, %d failed", p, f}')
echo "tests: $summary"
exit "$status"
