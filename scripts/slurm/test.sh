#!/usr/bin/env bash
# test.sh — the Slurm backend's integration tests against the rig: up.sh, then
#   COALLOC_SLURM_RIG=BASE_DIR cargo test -p coalloc-backends --test slurm --test slurm_allocation [ARGS...]
# then down.sh. Exits with cargo's status.
#
#   usage: test.sh [CARGO_TEST_ARGS...]     e.g. test.sh --locked, test.sh -- --nocapture
#
# BASE_DIR is $COALLOC_SLURM_RIG, else /tmp/coalloc-slurm. A rig that was already fully up
# before this script ran is left up (down.sh runs only when up.sh started something);
# KEEP_UP=1 always leaves it up. The other knobs of up.sh (CLUSTERS, PORT_BASE...) pass
# through; the tests need at least one cluster and expect three.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BASE="${COALLOC_SLURM_RIG:-/tmp/coalloc-slurm}"

uplog=$(mktemp)
if ! "$HERE/up.sh" "$BASE" 2>"$uplog"; then
    cat "$uplog" >&2
    rm -f "$uplog"
    echo "test.sh: up.sh failed; tests not run" >&2
    "$HERE/down.sh" "$BASE" 2>/dev/null
    exit 1
fi
started=0
grep -q 'started\|installing' "$uplog" && started=1
rm -f "$uplog"

status=0
(cd "$ROOT" && COALLOC_SLURM_RIG="$BASE" cargo test -p coalloc-backends --test slurm --test slurm_allocation "$@") || status=$?

if [ "${KEEP_UP:-0}" = 1 ] || [ "$started" = 0 ]; then
    echo "test.sh: rig left up ($HERE/down.sh $BASE stops it)" >&2
else
    "$HERE/down.sh" "$BASE" 2>/dev/null
fi
exit "$status"
