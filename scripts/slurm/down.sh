#!/usr/bin/env bash
# down.sh — stop the Slurm clusters (and the private munged) that up.sh started.
#
#   usage: down.sh [BASE_DIR]        (default $COALLOC_SLURM_RIG, else /tmp/coalloc-slurm)
#
# Only processes named in BASE_DIR's pid files are signalled, each checked by name
# first so a stale pid file never hits an unrelated process. Never pkill/killall.
# Per cluster: cancel all its jobs (so no job outlives the cluster), stop its slurmd(s),
# stop its slurmctld; then stop munged. Safe to run twice, or when nothing runs.
# Environment: PURGE=1 also deletes BASE_DIR afterwards (logs and state included).
set -uo pipefail

BASE="${1:-${COALLOC_SLURM_RIG:-/tmp/coalloc-slurm}}"
PURGE="${PURGE:-0}"
log() { echo "down.sh: $*" >&2; }

if [ ! -d "$BASE" ]; then
    log "$BASE does not exist; nothing to stop"
    exit 0
fi
BASE=$(cd "$BASE" && pwd)
exec 9>"$BASE/.lock"
flock -w 120 9 || log "warning: $BASE/.lock is held; going on anyway"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"     # pid_of, gone, kill_stray_stepds

stop() { # stop PIDFILE COMM WHAT: SIGTERM, up to 15 s, then SIGKILL
    local pf=$1 comm=$2 what=$3 pid i
    if ! pid=$(pid_of "$pf" "$comm"); then
        rm -f "$pf"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 150; i++)); do
        gone "$pid" "$comm" && break
        sleep 0.1
    done
    if ! gone "$pid" "$comm"; then
        log "$what (pid $pid) ignored SIGTERM for 15 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null
        sleep 0.2
    fi
    rm -f "$pf"
    log "stopped $what (pid $pid)"
}

# in_ctld_ns CMD...: run a client in the network namespace of slurmctld (pid $ctld), where
# it surely reaches it: up.sh's NETNS, if any, found from the process, so that even a
# namespace whose name is already deleted works
in_ctld_ns() { nsenter --net="/proc/$ctld/ns/net" -- "$@"; }

clusters=()
for conf in "$BASE"/*/slurm.conf; do
    [ -f "$conf" ] && clusters+=("$(basename "$(dirname "$conf")")")
done

for name in "${clusters[@]}"; do
    dir="$BASE/$name"
    export SLURM_CONF="$dir/slurm.conf"
    # 1. cancel every job the controller still runs or queues; wait for them to end
    if ctld=$(pid_of "$dir/run/slurmctld.pid" slurmctld); then
        ids=$(in_ctld_ns timeout 20 squeue -h -t PD,R,CG,S,CF,RQ,RS,RF,SE,SO,ST -o %i 2>/dev/null | tr '\n' ' ')
        if [ -n "${ids// /}" ]; then
            # shellcheck disable=SC2086
            in_ctld_ns timeout 20 scancel $ids 2>/dev/null
            for ((i = 0; i < 100; i++)); do   # up to 10 s
                [ -z "$(in_ctld_ns timeout 10 squeue -h -t R,CG,S,CF -o %i 2>/dev/null)" ] && break
                sleep 0.1
            done
            log "$name: cancelled jobs ${ids% }"
        fi
    fi
    # 2. slurmd(s)   3. slurmctld
    for pf in "$dir"/run/slurmd-*.pid; do
        [ -e "$pf" ] || continue
        node=$(basename "$pf" .pid)
        stop "$pf" slurmd "$name slurmd ${node#slurmd-}"
    done
    stop "$dir/run/slurmctld.pid" slurmctld "$name slurmctld"
    unset SLURM_CONF
done

# 4. job steps that outlived their slurmd (e.g. a test SIGKILLed slurmd mid-job, or the
# controller was already gone so its jobs could not be cancelled)
kill_stray_stepds "$BASE"

# 5. munged
stop "$BASE/munge/munged.pid" munged "munged"

if [ "$PURGE" = 1 ]; then
    rm -rf "${BASE:?}"
    log "removed $BASE"
fi
log "done"
