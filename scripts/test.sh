#!/usr/bin/env bash
# The whole test suite: what CI runs and what a developer runs, on a fresh machine.
# It installs what the suite needs (Slurm and munge, through scripts/slurm/up.sh, which uses
# apt-get when they are missing; MPICH for the MPI tests), brings up the three-cluster Slurm
# rig, runs every test of
# the workspace (the real-Slurm tests included), stops exactly what it started, and ends with
# one summary line, `tests: N passed, M failed`.
#
#   bash scripts/test.sh                 # everything
#   NO_SLURM=1 bash scripts/test.sh      # without the rig (the real-Slurm tests then skip)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo not found: install Rust (https://rustup.rs) and run this again" >&2
    exit 1
fi

rig=${COALLOC_SLURM_RIG:-/tmp/coalloc-slurm-test}
log=$(mktemp)
cleanup() {
    rm -f "$log"
    if [ "${NO_SLURM:-0}" != 1 ]; then
        PURGE=1 scripts/slurm/down.sh "$rig" >/dev/null 2>&1 || true
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

# MPICH (mpicc and the library) for the MPI tests (crates/coalloc-cli/tests/mpi.rs):
# installed when missing, as root; those tests then fail rather than skip without it.
if ! command -v mpicc >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "== installing mpich and libmpich-dev (the MPI tests build a C program with mpicc)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mpich libmpich-dev >/dev/null
fi
if command -v mpicc >/dev/null 2>&1; then
    export COALLOC_REQUIRE_MPI=1
fi

status=0
cargo test --workspace --locked 2>&1 | tee "$log" || status=$?
summary=$(grep -E '^test result:' "$log" | awk '{p += $4; f += $6} END {printf "%d passed, %d failed", p, f}')
echo "tests: $summary"
exit "$status"
