#!/usr/bin/env bash
# down.sh — stop what scripts/agents/up.sh started: both Slurm sites (jobs cancelled, slurmd,
# slurmctld, munged; each checked by its pid file and process name), then the namespaces and
# links that scripts/netns/sites.sh made (its state file lists them). Nothing else is touched.
# Safe to run twice, or when nothing runs.
#
#   usage: down.sh [BASE]    (default $COALLOC_AGENT_RIG, else /tmp/coalloc-agents)
# Environment: PURGE=1 also deletes BASE; CA_SITES_STATE [BASE/netns.list], as for up.sh.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SCRIPTS=$(dirname "$HERE")
BASE="${1:-${COALLOC_AGENT_RIG:-/tmp/coalloc-agents}}"
PURGE="${PURGE:-0}"
log() { echo "agents/down.sh: $*" >&2; }

if [ ! -d "$BASE" ]; then
    log "$BASE does not exist; nothing to stop"
    exit 0
fi
BASE=$(cd "$BASE" && pwd)
exec 8>"$BASE/.agents.lock"
flock -w 120 8 || log "warning: $BASE/.agents.lock is held; going on anyway"
export CA_SITES_STATE="${CA_SITES_STATE:-$BASE/netns.list}"

# the clusters first, while their namespaces exist (down.sh runs its clients in slurmctld's)
for site in s2 s1; do
    [ -d "$BASE/$site" ] && PURGE=0 "$SCRIPTS/slurm/down.sh" "$BASE/$site"
done
"$SCRIPTS/netns/sites.sh" down

if [ "$PURGE" = 1 ]; then
    rm -rf "${BASE:?}"
    log "removed $BASE"
fi
log "done"
