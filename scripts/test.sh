#!/usr/bin/env bash
# The whole test suite: what CI runs and what a developer runs, on a fresh machine.
# It installs what the suite needs (Slurm and munge, through scripts/slurm/up.sh; Grid Engine,
# through scripts/gridengine/up.sh; both use apt-get when they are missing; Prometheus and
# Chromium for the observability tests; MPICH for the MPI tests), brings up the three-cluster
# Slurm rig, the two-cell Grid Engine rig and the agent rig (network namespaces), runs every
# test of the workspace, stops exactly what it started, and ends with one summary line,
# `tests: N passed, M failed`.
#
#   bash scripts/test.sh                 # everything
#   NO_SLURM=1 bash scripts/test.sh      # without the Slurm rig (the real-Slurm tests then skip)
#   NO_GE=1 bash scripts/test.sh         # without the Grid Engine rig (its tests then skip)
#   NO_AGENTS=1 bash scripts/test.sh     # without the agent rig of scripts/agents/ (network
#                                        # namespaces; its tests then skip)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo not found: install Rust (https://rustup.rs) and run this again" >&2
    exit 1
fi

rig=${COALLOC_SLURM_RIG:-/tmp/coalloc-slurm-test}
agents=${COALLOC_AGENT_RIG:-/tmp/coalloc-agents-test}
ge_rig=${COALLOC_GE_RIG:-/tmp/coalloc-ge-test}
log=$(mktemp)
cleanup() {
    rm -f "$log"
    if [ "${NO_SLURM:-0}" != 1 ]; then
        PURGE=1 scripts/slurm/down.sh "$rig" >/dev/null 2>&1 || true
    fi
    if [ "${NO_AGENTS:-0}" != 1 ]; then
        PURGE=1 scripts/agents/down.sh "$agents" >/dev/null 2>&1 || true
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

if [ "${NO_AGENTS:-0}" != 1 ]; then
    echo "== bringing up the agent test rig in $agents (network namespaces; Slurm sites with their own munge keys)"
    agents_status=0
    scripts/agents/up.sh "$agents" || agents_status=$?
    if [ "$agents_status" = 0 ]; then
        export COALLOC_AGENT_RIG="$agents"
        # The namespace tests fail, rather than skip, when the rig is not there.
        export COALLOC_REQUIRE_AGENTS=1
    elif [ "$agents_status" = 77 ]; then
        echo "== network namespaces cannot be made here: the agent tests over namespaces are skipped"
    else
        exit "$agents_status"
    fi
fi

# The observability tests drive Debian's Prometheus and headless Chromium (through its
# chromedriver); they fail,
# rather than skip, when these are missing.
missing=()
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing ${missing[*]} with apt-get"
    if [ "$(id -u)" -ne 0 ]; then
        echo "error: ${missing[*]} missing and not root: install them with apt-get" >&2
        exit 1
    fi
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
export COALLOC_REQUIRE_TOOLS=1

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

if [ "${NO_GE:-0}" != 1 ]; then
    echo "== bringing up the Grid Engine test rig in $ge_rig (installs gridengine-* if missing)"
    scripts/gridengine/up.sh "$ge_rig"
    export COALLOC_GE_RIG="$ge_rig"
    # The real-Grid-Engine tests fail, rather than skip, when the rig is not there.
    export COALLOC_REQUIRE_GE=1
fi

status=0
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log" || status=$?
summary=$(grep -E '^test result:' "$log" | awk '{p += $4; f += $6} END {printf "%d passed, %d failed", p, f}')
echo "tests: $summary"
exit "$status"
