#!/usr/bin/env bash
# up.sh — run independent Grid Engine cells on this one machine (loopback only).
# The test rig of coalloc's Grid Engine backend (crates/coalloc-backends/src/gridengine/),
# in the manner of scripts/slurm/. See README.md next to this file.
#
#   usage: [CELLS='delta:32 epsilon:16'] up.sh [BASE_DIR]
#          BASE_DIR defaults to $COALLOC_GE_RIG, else /tmp/coalloc-ge
#
# BASE_DIR is the SGE_ROOT of every cell: BASE_DIR/<cell>/ holds the cell's common/
# (bootstrap, act_qmaster, host_aliases, settings.sh, accounting), its classic spool
# (spool/qmaster, spool/execd) and log/. Each cell has one sge_qmaster and one sge_execd
# (this host), one queue and one parallel environment. Idempotent: daemons already running
# (by their pid files) are left alone. Ends when every cell's queue is usable.
# Point a client at a cell with  . BASE_DIR/<cell>/common/settings.sh
# Stop everything with  down.sh BASE_DIR.
#
# Environment knobs (defaults in brackets):
#   CELLS        space-separated name:slots (one execution host per cell) [delta:32 epsilon:16]
#   GE_PORT_BASE    cell i (0-based) uses GE_PORT_BASE+10*i for sge_qmaster and the next port
#                for sge_execd                                                   [6960]
#   QUEUE        cluster queue of every cell                                     [main.q]
#   PE           parallel environment of every cell ($pe_slots)                 [coalloc]
#   LOAD_REPORT  seconds between an execd's load reports                            [2]
#   MAX_UNHEARD  seconds without a report before a host is "unknown" (state u)      [6]
#   WAIT_SECS    how long to wait for each cell to be usable                       [60]
#   INSTALL      0 = never apt-get install (fail if packages are missing)           [1]
set -euo pipefail

BASE="${1:-${COALLOC_GE_RIG:-/tmp/coalloc-ge}}"
CELLS="${CELLS:-delta:32 epsilon:16}"
GE_PORT_BASE="${GE_PORT_BASE:-6960}"
QUEUE="${QUEUE:-main.q}"
PE="${PE:-coalloc}"
LOAD_REPORT="${LOAD_REPORT:-2}"
MAX_UNHEARD="${MAX_UNHEARD:-6}"
WAIT_SECS="${WAIT_SECS:-60}"
INSTALL="${INSTALL:-1}"
SGEBIN=/usr/lib/gridengine

log() { echo "up.sh: $*" >&2; }
die() { echo "up.sh: error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (the daemons and the jobs run as root)"

# ------------------------------------------------------------------ packages
missing=()
for f in sge_qmaster sge_execd sge_shepherd spoolinit spooldefaults qsub qstat qconf qdel qacct; do
    [ -x "$SGEBIN/$f" ] || missing+=("$f")
done
if [ "${#missing[@]}" -gt 0 ]; then
    [ "$INSTALL" = 1 ] || die "missing ${missing[*]} and INSTALL=0"
    command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get: install gridengine-master gridengine-exec gridengine-client"
    log "installing gridengine-master gridengine-exec gridengine-client (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    # No system cell: gridengine-master's postinst would otherwise create one in
    # /var/lib/gridengine/default and /var/spool/gridengine (README.md, "What is left").
    echo 'gridengine-common shared/gridengineconfig boolean false' | debconf-set-selections
    echo 'gridengine-master shared/gridengineconfig boolean false' | debconf-set-selections
    # Forbid service starts during the install (the packages' init scripts would start a
    # system qmaster/execd, and the MTA they pull in), unless a policy is already there.
    policy=/usr/sbin/policy-rc.d own_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# temporary, written by coalloc scripts/gridengine/up.sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        own_policy=1
    fi
    rc=0
    apt-get update -qq >/dev/null || rc=1
    [ "$rc" = 1 ] || apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        gridengine-master gridengine-exec gridengine-client >/dev/null || rc=2
    [ "$own_policy" = 0 ] || rm -f "$policy"
    [ "$rc" != 1 ] || die "apt-get update failed"
    [ "$rc" != 2 ] || die "apt-get install gridengine-master gridengine-exec gridengine-client failed"
    for f in "${missing[@]}"; do
        [ -x "$SGEBIN/$f" ] || die "$SGEBIN/$f still missing after the install"
    done
fi

# ------------------------------------------------------------------- helpers
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
    local secs=$1 what=$2 t0=$SECONDS
    shift 2
    until "$@" >/dev/null 2>&1; do
        if [ $((SECONDS - t0)) -ge "$secs" ]; then
            log "timed out after ${secs}s waiting for $what"
            return 1
        fi
        sleep 0.2
    done
}
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
tail_log() { [ -f "$1" ] && tail -n 15 "$1" | sed 's/^/    /' >&2; return 0; }

# -------------------------------------------------------------------- layout
[[ "$BASE" != *[[:space:]]* ]] || die "BASE_DIR must not contain whitespace"
mkdir -p "$BASE"
BASE=$(cd "$BASE" && pwd)
exec 9>"$BASE/.lock"
flock -w 120 9 || die "another up.sh/down.sh holds $BASE/.lock"
HOST=$(uname -n)
HOST=${HOST%%.*}
# SGE_ROOT is BASE: the architecture script and the (symlinked) binaries come from the
# package's tree, the cells are ours.
for d in util utilbin bin lib; do
    [ -e "$BASE/$d" ] || ln -s "/var/lib/gridengine/$d" "$BASE/$d"
done
: >"$BASE/cells.tsv.new"
echo "# name	settings	sge_root	cell	qmaster_port	execd_port	slots	host	queue	pe" >>"$BASE/cells.tsv.new"

# ---------------------------------------------------------------------- cells
init_cell() { # init_cell NAME DIR: a fresh cell's configuration and classic spool
    local name=$1 dir=$2
    rm -rf "$dir/common" "$dir/spool"
    mkdir -p "$dir/common" "$dir/spool/qmaster" "$dir/spool/execd" "$dir/log"
    cat >"$dir/common/bootstrap" <<EOF
# written by coalloc scripts/gridengine/up.sh
admin_user              none
default_domain          none
ignore_fqdn             true
spooling_method         classic
spooling_lib            libspoolc
spooling_params         $dir/common;$dir/spool/qmaster
binary_path             $SGEBIN
qmaster_spool_dir       $dir/spool/qmaster
security_mode           none
listener_threads        2
worker_threads          2
scheduler_threads       1
EOF
    echo "$HOST" >"$dir/common/act_qmaster"
    # The host's name resolves to 127.0.0.1, whose first name is "localhost": without this
    # alias the qmaster refuses every client ("client IP resolved to host name localhost.
    # This is not identical to clients host name ...").
    [ "$HOST" = localhost ] || echo "$HOST localhost" >"$dir/common/host_aliases"
    sed -e "s|^execd_spool_dir .*|execd_spool_dir        $dir/spool/execd|" \
        -e 's/^min_uid .*/min_uid                0/' \
        -e 's/^min_gid .*/min_gid                0/' \
        -e "s/^load_report_time .*/load_report_time       00:00:0$LOAD_REPORT/" \
        -e "s/^max_unheard .*/max_unheard            00:00:$(printf %02d "$MAX_UNHEARD")/" \
        -e 's|^mailer .*|mailer                 /bin/true|' \
        -e 's|^reporting_params .*|reporting_params       accounting=true reporting=false flush_time=00:00:01 joblog=false sharelog=00:00:00 accounting_flush_time=00:00:00|' \
        /usr/share/gridengine/default-configuration >"$dir/common/configuration.in"
    (
        export SGE_ROOT=$BASE SGE_CELL=$name
        "$SGEBIN/spoolinit" classic libspoolc "$dir/common;$dir/spool/qmaster" init
        "$SGEBIN/spooldefaults" configuration "$dir/common/configuration.in"
        "$SGEBIN/spooldefaults" complexes /usr/share/gridengine/util/resources/centry
        "$SGEBIN/spooldefaults" usersets /usr/share/gridengine/util/resources/usersets
        "$SGEBIN/spooldefaults" managers root
    ) >"$dir/log/init.log" 2>&1 || { tail_log "$dir/log/init.log"; die "$name: spool initialisation failed"; }
}

configure_cell() { # configure_cell NAME DIR SLOTS: host, queue and PE, once, on a running qmaster
    local name=$1 dir=$2 slots=$3 f=$dir/log/objects
    mkdir -p "$f"
    printf 'hostname %s\nload_scaling NONE\ncomplex_values NONE\nuser_lists NONE\nxuser_lists NONE\nprojects NONE\nxprojects NONE\nusage_scaling NONE\nreport_variables NONE\n' \
        "$HOST" >"$f/exechost"
    cat >"$f/pe" <<EOF
pe_name            $PE
slots              99999
user_lists         NONE
xuser_lists        NONE
start_proc_args    NONE
stop_proc_args     NONE
allocation_rule    \$pe_slots
control_slaves     FALSE
job_is_first_task  TRUE
urgency_slots      min
accounting_summary FALSE
qsort_args         NONE
EOF
    {
        printf 'qname %s\nhostlist %s\nseq_no 0\nload_thresholds NONE\nsuspend_thresholds NONE\n' "$QUEUE" "$HOST"
        printf 'nsuspend 1\nsuspend_interval 00:05:00\npriority 0\nmin_cpu_interval 00:05:00\n'
        printf 'processors UNDEFINED\nqtype BATCH INTERACTIVE\nckpt_list NONE\npe_list %s\nrerun FALSE\n' "$PE"
        printf 'slots %s\ntmpdir /tmp\nshell /bin/sh\nprolog NONE\nepilog NONE\n' "$slots"
        printf 'shell_start_mode unix_behavior\nstarter_method NONE\nsuspend_method NONE\n'
        printf 'resume_method NONE\nterminate_method NONE\nnotify 00:00:60\nowner_list NONE\n'
        printf 'user_lists NONE\nxuser_lists NONE\nsubordinate_list NONE\ncomplex_values NONE\n'
        printf 'projects NONE\nxprojects NONE\ncalendar NONE\ninitial_state default\n'
        for l in s_rt h_rt s_cpu h_cpu s_fsize h_fsize s_data h_data s_stack h_stack s_core h_core s_rss h_rss s_vmem h_vmem; do
            printf '%s INFINITY\n' "$l"
        done
    } >"$f/queue"
    (
        # shellcheck disable=SC1091
        . "$dir/common/settings.sh"
        qconf -ssconf >"$f/sconf"
        # One scheduling pass a second and one right after every submission and job end
        # (SGE's defaults: every 15 s); no load adjustments, no per-job scheduling info.
        sed -i -e 's/^schedule_interval .*/schedule_interval 0:0:1/' \
            -e 's/^flush_submit_sec .*/flush_submit_sec 1/' \
            -e 's/^flush_finish_sec .*/flush_finish_sec 1/' \
            -e 's/^job_load_adjustments .*/job_load_adjustments NONE/' \
            -e 's/^load_adjustment_decay_time .*/load_adjustment_decay_time 0:0:0/' \
            -e 's/^schedd_job_info .*/schedd_job_info false/' "$f/sconf"
        qconf -Msconf "$f/sconf"
        qconf -as "$HOST"
        qconf -Ae "$f/exechost"
        qconf -Ap "$f/pe"
        qconf -Aq "$f/queue"
    ) >>"$dir/log/init.log" 2>&1 || { tail_log "$dir/log/init.log"; die "$name: configuring the cell failed"; }
    touch "$dir/.configured"
}

queue_usable() { # the cell's queue instance shows no state flag (u, a, E, d, ...)
    local dir=$1 line
    line=$(
        # shellcheck disable=SC1091
        . "$dir/common/settings.sh"
        qstat -f -q "$QUEUE" 2>/dev/null | awk -v q="$QUEUE@" 'index($1, q) == 1'
    )
    [ -n "$line" ] && [ "$(awk '{print NF}' <<<"$line")" = 5 ]
}

i=0
for spec in $CELLS; do
    IFS=: read -r name slots <<<"$spec"
    [[ "$name" =~ ^[a-z][a-z0-9]*$ ]] || die "bad cell name '$name' (lower-case letter, then letters/digits)"
    [[ "$slots" =~ ^[1-9][0-9]*$ ]] || die "bad slot count '$slots' for cell $name"
    dir="$BASE/$name"
    qport=$((GE_PORT_BASE + 10 * i))
    eport=$((qport + 1))
    if [ -f "$dir/.configured" ] && [ -f "$dir/common/settings.sh" ]; then
        # A configured cell keeps its ports (its hosts and clients know them).
        qport=$(sed -n 's/^SGE_QMASTER_PORT=\([0-9]*\);.*/\1/p' "$dir/common/settings.sh")
        eport=$(sed -n 's/^SGE_EXECD_PORT=\([0-9]*\);.*/\1/p' "$dir/common/settings.sh")
    fi
    mkdir -p "$dir/log"
    if ! pid_alive "$dir/spool/qmaster/qmaster.pid" sge_qmaster; then
        port_busy "$qport" && die "$name: port $qport is in use (choose another GE_PORT_BASE)"
        if [ ! -f "$dir/.configured" ]; then
            init_cell "$name" "$dir"
        fi
        cat >"$dir/common/settings.sh" <<EOF
SGE_ROOT=$BASE; export SGE_ROOT
SGE_CELL=$name; export SGE_CELL
SGE_QMASTER_PORT=$qport; export SGE_QMASTER_PORT
SGE_EXECD_PORT=$eport; export SGE_EXECD_PORT
EOF
        log "$name: starting sge_qmaster on port $qport"
        # shellcheck disable=SC1091
        (. "$dir/common/settings.sh"; cd "$dir/log"; setsid "$SGEBIN/sge_qmaster" </dev/null >>"$dir/log/qmaster.out" 2>&1)
        wait_for "$WAIT_SECS" "$name's sge_qmaster" \
            bash -c '. "$1/common/settings.sh"; qconf -sh' _ "$dir" ||
            { tail_log "$dir/spool/qmaster/messages"; die "$name: sge_qmaster does not answer"; }
    fi
    [ -f "$dir/.configured" ] || configure_cell "$name" "$dir" "$slots"
    if ! pid_alive "$(execd_pid_file "$dir")" sge_execd; then
        port_busy "$eport" && die "$name: port $eport is in use (choose another GE_PORT_BASE)"
        log "$name: starting sge_execd on port $eport"
        # shellcheck disable=SC1091
        (. "$dir/common/settings.sh"; cd "$dir/log"; setsid "$SGEBIN/sge_execd" </dev/null >>"$dir/log/execd.out" 2>&1)
    fi
    wait_for "$WAIT_SECS" "$name's queue $QUEUE@$HOST" queue_usable "$dir" ||
        { tail_log "$dir/spool/qmaster/messages"; die "$name: the queue is not usable"; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$dir/common/settings.sh" \
        "$BASE" "$name" "$qport" "$eport" "$slots" "$HOST" "$QUEUE" "$PE" >>"$BASE/cells.tsv.new"
    i=$((i + 1))
done
mv "$BASE/cells.tsv.new" "$BASE/cells.tsv"
log "up: $CELLS (SGE_ROOT $BASE)"
