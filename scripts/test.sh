#!/usr/bin/env bash
# The whole test suite: what CI runs and what a developer runs, on a fresh machine.
# It installs what the suite needs (Slurm and munge, through scripts/slurm/up.sh; Grid Engine,
# through scripts/gridengine/up.sh; both use apt-get when they are missing; Prometheus and
# Chromium for the observability tests; MPICH for the MPI tests; PostgreSQL for the
# PostgreSQL journal's tests; cargo-deny for the dependency audit), checks Cargo.lock against
# the RustSec advisory database (scripts/audit.sh), brings up the three-cluster
# Slurm rig, the two-cell Grid Engine rig and the agent rig (network namespaces), runs every
# test of the workspace, builds the guide (mdbook, installed with cargo) and checks its links,
# runs the Python client's tests (a virtual environment in target/py-venv, packages from
# PyPI), stops exactly what it started, and ends with one summary line,
# `tests: N passed, M failed` (the audit, cargo's tests, the guide's build and link check, and
# pytest's).
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

# The dependency audit first (seconds, after a one-time `cargo install` of cargo-deny):
# Cargo.lock against the RustSec advisory database vendored in audit/ (scripts/audit.sh,
# audit/README.md). It counts as one test; a vulnerability advisory fails it, and the suite.
echo "== bash scripts/audit.sh (Cargo.lock against the RustSec advisory database)"
audit_status=0
bash scripts/audit.sh || audit_status=$?

rig=${COALLOC_SLURM_RIG:-/tmp/coalloc-slurm-test}
agents=${COALLOC_AGENT_RIG:-/tmp/coalloc-agents-test}
ge_rig=${COALLOC_GE_RIG:-/tmp/coalloc-ge-test}
log=$(mktemp)
# Every test's scratch (state folders, logs, pytest's and Dask's) goes in one folder of this
# run, removed when the run passes and kept, with its path printed, when it fails. It is
# open to all (1777): the users tests run programs as other accounts. Its path is short, so
# that the deepest socket under it stays far inside the 108 bytes a Unix socket path allows.
scratch=$(mktemp -d /tmp/coalloc-run.XXXXXX)
chmod 1777 "$scratch"
export TMPDIR="$scratch"
cleanup() {
    rc=$?
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
    if [ "$rc" = 0 ]; then
        rm -rf "$scratch"
    else
        echo "the tests' scratch is kept in $scratch"
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

# PostgreSQL (Debian's server binaries, /usr/lib/postgresql/N/bin) for the PostgreSQL
# journal's tests (crates/coalloc-testkit/tests/postgres_store.rs,
# crates/coalloc-cli/tests/postgres_journal.rs, postgres_standby.rs and postgres_follow.rs,
# the active and standby servers; failover_netns.rs, the two servers and three agent sites
# in network namespaces; postgres_replicated.rs, a primary and its streaming replica in
# network namespaces, with pg_basebackup of the same package): installed when missing, as
# root; each test starts a throwaway cluster of its own (coalloc_testkit::postgres) and
# stops it, and fails rather than skips when the binaries are there.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "== installing postgresql (the PostgreSQL journal's tests run a throwaway cluster)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    export COALLOC_REQUIRE_POSTGRES=1
fi

if [ "${NO_GE:-0}" != 1 ]; then
    echo "== bringing up the Grid Engine test rig in $ge_rig (installs gridengine-* if missing)"
    scripts/gridengine/up.sh "$ge_rig"
    export COALLOC_GE_RIG="$ge_rig"
    # The real-Grid-Engine tests fail, rather than skip, when the rig is not there.
    export COALLOC_REQUIRE_GE=1
fi

# The Python client's tests (clients/python) need a virtual environment: python3-venv when
# missing (as root), then `pip install './clients/python[test]'` (the client, pytest, dask,
# distributed, from PyPI) into target/py-venv (COALLOC_PY_VENV elsewhere). A venv that has
# them already is kept as it is (pip takes a minute or more even when there is nothing to
# do); the tests import the client from clients/python/src either way.
venv=${COALLOC_PY_VENV:-target/py-venv}
py_ready=1
if ! "$venv/bin/python" -c 'import coalloc, pytest, distributed' >/dev/null 2>&1; then
    if [ ! -x "$venv/bin/python" ] && ! python3 -m venv "$venv" >/dev/null 2>&1; then
        rm -rf "$venv"
        if [ "$(id -u)" = 0 ]; then
            echo "== installing python3-venv (the Python client's tests run in a virtual environment)"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        fi
        python3 -m venv "$venv" || py_ready=0
    fi
    if [ "$py_ready" = 1 ]; then
        echo "== pip install './clients/python[test]' in $venv"
        "$venv/bin/pip" install -q --disable-pip-version-check './clients/python[test]' || py_ready=0
        rm -rf clients/python/build clients/python/src/*.egg-info
    fi
fi

status=0
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log" || status=$?
summary=$(grep -E '^test result:' "$log" | awk '{p += $4; f += $6} END {printf "%d %d", p, f}')
passed=${summary% *}
failed=${summary#* }
if [ "$audit_status" = 0 ]; then
    passed=$((passed + 1))
else
    echo "FAILED: bash scripts/audit.sh (see its output at the start)"
    failed=$((failed + 1))
    status=1
fi

# The guide (docs/, issue 33): built with mdbook (installed with cargo when missing), then
# every link and anchor of the built pages checked. Its runnable blocks ran in the cargo tests
# above (crates/coalloc-cli/tests/guide.rs). Each of the two counts as a test.
export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v mdbook >/dev/null 2>&1; then
    echo "== installing mdbook (cargo install mdbook --locked)"
    cargo install mdbook --locked --quiet || true
fi
for step in "mdbook build docs" "python3 docs/linkcheck.py docs/book"; do
    echo "== $step"
    if $step; then
        passed=$((passed + 1))
    else
        echo "FAILED: $step"
        failed=$((failed + 1))
        status=1
    fi
done

# The Python client's tests, against a real `coalloc serve` (this build's target/debug/coalloc,
# which `cargo test` built), the Dask cluster across three local sites included.
if [ "$py_ready" = 1 ]; then
    echo "== pytest clients/python/tests"
    py_status=0
    PYTHONPATH="$PWD/clients/python/src" COALLOC_BIN="$PWD/target/debug/coalloc" \
        "$venv/bin/python" -m pytest clients/python/tests \
        -q -p no:cacheprovider 2>&1 | tee "$log" || py_status=$?
    py_passed=$( (grep -oE '[0-9]+ passed' "$log" || true) | tail -1 | awk '{print $1}')
    py_failed=$( (grep -oE '[0-9]+ (failed|error|errors)' "$log" || true) | awk '{n += $1} END {print n + 0}')
    py_passed=${py_passed:-0}
    if [ "$py_status" != 0 ] && [ "$py_failed" = 0 ]; then
        py_failed=1
    fi
    echo "python tests: $py_passed passed, $py_failed failed"
    passed=$((passed + py_passed))
    failed=$((failed + py_failed))
    [ "$py_status" = 0 ] || status=1
else
    echo "FAILED: no Python virtual environment with the client's test packages in $venv"
    failed=$((failed + 1))
    status=1
fi

echo "tests: $passed passed, $failed failed"
exit "$status"
