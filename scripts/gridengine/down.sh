#!/usr/bin/env bash
# down.sh — stop the Grid Engine cells that up.sh started under BASE_DIR, and nothing else.
#
#   usage: [PURGE=1] down.sh [BASE_DIR]      BASE_DIR: as for up.sh
#
# For every cell directory under BASE_DIR: deletes every job (qdel -f), stops the
# sge_execd and the sge_qmaster named in the cell's pid files (each checked by process
# name first; SIGTERM, then SIGKILL after STOP_SECS), and kills the job processes of any
# shepherd left behind (found by their working directory under BASE_DIR, never by name).
# PURGE=1 then deletes BASE_DIR. See README.md next to this file.
set -euo pipefail

BASE="${1:-${COALLOC_GE_RIG:-/tmp/coalloc-ge}}"
STOP_SECS="${STOP_SECS:-20}"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"

log() { echo "down.sh: $*" >&2; }
[ -d "$BASE" ] || { log "nothing under $BASE"; exit 0; }
BASE=$(cd "$BASE" && pwd)
exec 9>"$BASE/.lock"
flock -w 120 9 || { log "another up.sh/down.sh holds $BASE/.lock"; exit 1; }

stop() { # stop PID COMM: SIGTERM, wait, SIGKILL
    local pid=$1 comm=$2 t0=$SECONDS
    kill -TERM "$pid" 2>/dev/null || return 0
    until gone "$pid" "$comm"; do
        if [ $((SECONDS - t0)) -ge "$STOP_SECS" ]; then
            log "$comm $pid ignored SIGTERM for ${STOP_SECS}s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
}

for dir in "$BASE"/*/; do
    dir=${dir%/}
    [ -f "$dir/common/bootstrap" ] || continue
    name=${dir##*/}
    qpid=$(pid_of "$dir/spool/qmaster/qmaster.pid" sge_qmaster || true)
    epid=$(pid_of "$(execd_pid_file "$dir")" sge_execd || true)
    if [ -n "$qpid" ] && [ -f "$dir/common/settings.sh" ]; then
        # shellcheck disable=SC1091
        (. "$dir/common/settings.sh"; timeout 10 qdel -f -u '*' >/dev/null 2>&1 || true)
    fi
    if [ -n "$epid" ]; then
        log "$name: stopping sge_execd $epid"
        stop "$epid" sge_execd
    fi
    kill_shepherds "$dir/spool/execd"
    if [ -n "$qpid" ]; then
        # A qmaster takes about 9 s to shut down: the cells' are stopped side by side.
        log "$name: stopping sge_qmaster $qpid"
        stop "$qpid" sge_qmaster &
    fi
done
wait
if [ "${PURGE:-0}" = 1 ]; then
    log "deleting $BASE"
    rm -rf "$BASE"
fi
