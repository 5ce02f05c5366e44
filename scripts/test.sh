#!/usr/bin/env bash
# The whole test suite: what CI runs and what a developer runs, on a fresh machine.
# It installs what the suite needs (Slurm and munge, through scripts/slurm/up.sh; Grid Engine,
# through scripts/gridengine/up.sh; both use apt-get when they are missing), brings up the
# three-cluster Slurm rig and the two-cell Grid Engine rig, runs every test of the workspace
# (the real-Slurm and real-Grid-Engine tests included), stops exactly what it started, and
# ends with one summary line, `tests: N passed, M failed`.
#
#   bash scripts/test.sh                 # everything
#   NO_SLURM=1 bash scripts/test.sh      # without the Slurm rig (the real-Slurm tests then skip)
#   NO_GE=1 bash scripts/test.sh         # without the Grid Engine rig (its tests then skip)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo not found: install Rust (https://rustup.rs) and run this again" >&2
    exit 1
fi

rig=${COALLOC_SLURM_RIG:-/tmp/coalloc-slurm-test}
ge_rig=${COALLOC_GE_RIG:-/tmp/coalloc-ge-test}
log=$(mktemp)
cleanup() {
    rm -f "$log"
    if [ "${NO_SLURM:-0}" != 1 ]; then
        PURGE=1 scripts/slurm/down.sh "$rig" >/dev/null 2>&1 || true
    fi
    if [ "${NO_GE:-0}" != 1 ]; then
        PURGE=1 scripts/gridengine/down.sh "$ge_rig" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT

if [ "${NO_SLURM:-0}" != 1 ]; then
    echo "== bringing up the Slurm test rig in $rig (installs slurm-wlm and munge if missing)"
    scripts/slurm/up.sh "$rig"
    export COALLOC_SLURM_RIG="$rig"
    # The real-Slurm tests fail, rather than skip, when the rig is not there.
    export COALLOC_REQUIRE_SLURM=1
fi

if [ "${NO_GE:-0}" != 1 ]; then
    echo "== bringing up the Grid Engine test rig in $ge_rig (installs gridengine-* if missing)"
    scripts/gridengine/up.sh "$ge_rig"
    export COALLOC_GE_RIG="$ge_rig"
    # The real-Grid-Engine tests fail, rather than skip, when the rig is not there.
    export COALLOC_REQUIRE_GE=1
fi

status=0
cargo test --workspace --locked 2>&1 | tee "$log" || status=$?
summary=$(grep -E '^test result:' "$log" | awk '{p += $4; f += $6} END {printf "%d passed, %d failed", p, f}')
echo "tests: $summary"
exit "$status"
