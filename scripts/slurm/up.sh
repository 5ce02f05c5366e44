#!/usr/bin/env bash
# up.sh — run several independent Slurm clusters on this one machine (loopback only).
# The test rig of coalloc's Slurm backend (crates/coalloc-backends/src/slurm/); adapted
# from the team's shared recipe. See README.md next to this file.
#
#   usage: [CLUSTERS='alpha:64 beta:32 gamma:16:2'] up.sh [BASE_DIR]
#          BASE_DIR defaults to $COALLOC_SLURM_RIG, else /tmp/coalloc-slurm
#
# Each cluster gets its own slurm.conf, ports, state, spool, pid and log files under
# BASE_DIR/<name>/, plus one private munged under BASE_DIR/munge/ shared by all of them.
# Idempotent: daemons already running (by their pid files) are left alone; a second run
# only starts what is missing. Ends when every node of every cluster is idle/usable.
# Point a client at a cluster with  SLURM_CONF=BASE_DIR/<name>/slurm.conf.
# Stop everything with  down.sh BASE_DIR.  See README.md next to this file.
#
# Environment knobs (defaults in brackets):
#   CLUSTERS        space-separated name:cpus[:nodes]   [alpha:64 beta:32 gamma:16:2]
#                   name: lower-case letter then letters/digits; cpus: per node;
#                   nodes: 1..9 slurmds for that cluster                            [1]
#   PORT_BASE       cluster i (0-based, in CLUSTERS order) uses PORT_BASE+10*i for
#                   slurmctld and PORT_BASE+10*i+1.. for its slurmd(s)          [6900]
#   PARTITION       partition name in every cluster                             [main]
#   SLURMD_TIMEOUT  slurm.conf SlurmdTimeout (node -> DOWN after a dead slurmd)   [10]
#   MESSAGE_TIMEOUT slurm.conf MessageTimeout (RPC timeout; clients give up on a
#                   dead slurmctld after about this many seconds)                  [5]
#   MIN_JOB_AGE     seconds a finished job stays visible in squeue/scontrol      [300]
#   SCHED_PARAMS    slurm.conf SchedulerParameters ('' = Slurm's defaults)
#                   [sched_interval=2,bf_interval=1,sched_min_interval=100000,
#                    batch_sched_delay=0,default_queue_depth=1000]
#                   A batch job never starts inside its sbatch RPC, only in the next
#                   scheduling pass: the background loop's (once a second, fixed), the
#                   backfill's (every bf_interval s, here the minimum of 1) or the one a
#                   job's end triggers. These defaults give the most passes Slurm 22.05
#                   allows (submit to RUNNING 0.1-0.9 s on an idle cluster; the shared
#                   recipe measured about 2.5 s with Slurm's own defaults, bf_interval=30,
#                   batch_sched_delay=3). No setting removes the wait (README.md, "The
#                   1-second tick").
#   KEEP_STATE      1 = a restarted cluster keeps its old jobs and job ids         [0]
#   WAIT_SECS       how long to wait for all nodes to become idle                 [60]
#   INSTALL         0 = never apt-get install (fail if packages are missing)       [1]
# Knobs for clusters inside network namespaces (scripts/agents/ uses them; README.md):
#   NETNS           network namespace that munged, slurmctld and up.sh's own clients
#                   (scontrol, sinfo) run in; '' = this one                         ['']
#   CTLD_ADDR       slurmctld's address in slurm.conf (SlurmctldHost)       [127.0.0.1]
#   NODE_NETNS      network namespace of the slurmd(s)                       [$NETNS]
#   NODE_ADDR       the slurmds' address (NodeAddr)                       [$CTLD_ADDR]
#   Every client of such a cluster must run in a namespace that reaches CTLD_ADDR
#   (down.sh runs its own in slurmctld's). A running cluster's namespace is not checked.
set -euo pipefail

BASE="${1:-${COALLOC_SLURM_RIG:-/tmp/coalloc-slurm}}"
CLUSTERS="${CLUSTERS:-alpha:64 beta:32 gamma:16:2}"
PORT_BASE="${PORT_BASE:-6900}"
PARTITION="${PARTITION:-main}"
SLURMD_TIMEOUT="${SLURMD_TIMEOUT:-10}"
MESSAGE_TIMEOUT="${MESSAGE_TIMEOUT:-5}"
MIN_JOB_AGE="${MIN_JOB_AGE:-300}"
SCHED_PARAMS="${SCHED_PARAMS-sched_interval=2,bf_interval=1,sched_min_interval=100000,batch_sched_delay=0,default_queue_depth=1000}"
KEEP_STATE="${KEEP_STATE:-0}"
WAIT_SECS="${WAIT_SECS:-60}"
INSTALL="${INSTALL:-1}"
NETNS="${NETNS:-}"
CTLD_ADDR="${CTLD_ADDR:-127.0.0.1}"
NODE_NETNS="${NODE_NETNS:-$NETNS}"
NODE_ADDR="${NODE_ADDR:-$CTLD_ADDR}"

log() { echo "up.sh: $*" >&2; }
die() { echo "up.sh: error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (SlurmUser=root, munged, slurmd)"

# ------------------------------------------------------------------ packages
missing=()
for cmd in munged munge unmunge mungekey slurmctld slurmd sbatch squeue sinfo scontrol scancel; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
done
if [ "${#missing[@]}" -gt 0 ]; then
    [ "$INSTALL" = 1 ] || die "missing ${missing[*]} and INSTALL=0"
    log "installing slurm-wlm munge (missing: ${missing[*]})"
    command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get: install slurm-wlm and munge"
    export DEBIAN_FRONTEND=noninteractive
    # The packages' maintainer scripts would start the system's munged/slurmd through
    # invoke-rc.d; this rig runs its own daemons only, so forbid service starts for the
    # duration of the install (policy-rc.d exit 101) unless a policy is already in place.
    policy=/usr/sbin/policy-rc.d own_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# temporary, written by coalloc scripts/slurm/up.sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        own_policy=1
    fi
    rc=0
    apt-get update -qq >/dev/null || rc=1
    [ "$rc" = 1 ] || apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        slurm-wlm munge >/dev/null || rc=2
    [ "$own_policy" = 0 ] || rm -f "$policy"
    [ "$rc" != 1 ] || die "apt-get update failed"
    [ "$rc" != 2 ] || die "apt-get install slurm-wlm munge failed"
    for cmd in "${missing[@]}"; do
        command -v "$cmd" >/dev/null 2>&1 || die "$cmd still missing after installing slurm-wlm munge"
    done
fi

# ------------------------------------------------------------------- helpers
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"     # pid_of, pid_alive, kill_stray_stepds, in_ns
for ns in $NETNS $NODE_NETNS; do
    [ -e "/run/netns/$ns" ] || die "network namespace $ns does not exist (ip netns list)"
done

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
    local secs=$1 what=$2 t0=$SECONDS
    shift 2
    until "$@" >/dev/null 2>&1; do
        if [ $((SECONDS - t0)) -ge "$secs" ]; then
            log "timed out after ${secs}s waiting for $what"
            return 1
        fi
        sleep 0.1
    done
}

port_busy() { # port_busy PORT [NETNS]: something already listens on 127.0.0.1:PORT (in NETNS)
    # shellcheck disable=SC2016  # $0 expands in the inner shell
    in_ns "${2:-}" bash -c '(exec 3<>"/dev/tcp/127.0.0.1/$0")' "$1" 2>/dev/null
}

tail_log() { [ -f "$1" ] && tail -n 15 "$1" | sed 's/^/    /' >&2; return 0; }

# -------------------------------------------------------------------- layout
[[ "$BASE" != *[[:space:]]* ]] || die "BASE_DIR must not contain whitespace (it goes into slurm.conf)"
mkdir -p "$BASE"
BASE=$(cd "$BASE" && pwd)
chmod 755 "$BASE"   # munged wants every directory above its socket o+x, not o+w
exec 9>"$BASE/.lock"
flock -w 120 9 || die "another up.sh/down.sh holds $BASE/.lock"
HOST=$(uname -n)
HOST=${HOST%%.*}    # slurmctld compares SlurmctldHost with the short host name

# --------------------------------------------------------------------- munge
# A private munged (own key, socket, pid, log): nothing depends on /run/munge, on the
# system's munge key or on systemd. Every slurm.conf points at it with AuthInfo=socket=.
MUNGE_DIR="$BASE/munge"
MUNGE_SOCKET="$MUNGE_DIR/munge.socket"
mkdir -p "$MUNGE_DIR"
chmod 755 "$MUNGE_DIR"
NS_NOTE=""   # a line of slurm.conf's header
[ -z "$NETNS$NODE_NETNS" ] ||
    NS_NOTE="# slurmctld and munged in network namespace ${NETNS:-(root)}, slurmd(s) in ${NODE_NETNS:-(root)} at $NODE_ADDR
"
if [ ! -s "$MUNGE_DIR/munge.key" ]; then
    mungekey --create --keyfile="$MUNGE_DIR/munge.key" --force 2>/dev/null ||
        dd if=/dev/urandom of="$MUNGE_DIR/munge.key" bs=1024 count=1 status=none
fi
chown root:root "$MUNGE_DIR/munge.key"
chmod 400 "$MUNGE_DIR/munge.key"

munge_ok() { munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET"; }
if pid_alive "$MUNGE_DIR/munged.pid" munged && munge_ok >/dev/null 2>&1; then
    log "munged already running (pid $(cat "$MUNGE_DIR/munged.pid"))"
else
    rm -f "$MUNGE_DIR/munged.pid" "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
    # --force: tolerate a BASE_DIR below a directory that is not world-traversable (e.g.
    # /root/...); every client here runs as root anyway.
    in_ns "$NETNS" setsid munged --force --socket="$MUNGE_SOCKET" --key-file="$MUNGE_DIR/munge.key" \
        --pid-file="$MUNGE_DIR/munged.pid" --log-file="$MUNGE_DIR/munged.log" \
        --seed-file="$MUNGE_DIR/munged.seed" </dev/null 9>&- >>"$MUNGE_DIR/munged.out" 2>&1 ||
        { tail_log "$MUNGE_DIR/munged.log"; die "munged failed to start"; }
    wait_for 10 munged munge_ok || { tail_log "$MUNGE_DIR/munged.log"; die "munged not answering"; }
    log "munged started (pid $(cat "$MUNGE_DIR/munged.pid"), socket $MUNGE_SOCKET)"
fi

# ------------------------------------------------------------------ clusters
write_conf() { # write_conf NAME CPUS NODES CTLD_PORT DIR
    local name=$1 cpus=$2 nodes=$3 cport=$4 dir=$5 i
    cat <<EOF
# Generated by up.sh: cluster '$name', $nodes node(s) x $cpus CPUs, on $HOST / $CTLD_ADDR.
${NS_NOTE}# Clients: SLURM_CONF=$dir/slurm.conf squeue ...
ClusterName=$name
SlurmctldHost=$HOST($CTLD_ADDR)
SlurmctldPort=$cport
SlurmdPort=$((cport + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET

StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info

# no cgroups, no accounting database, no MPI
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none

# per-CPU allocation; nodes advertise more CPUs than the machine has
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
${SCHED_PARAMS:+SchedulerParameters=$SCHED_PARAMS}
PriorityType=priority/basic
# reject at submit time what can never run here (e.g. -n 100 on a 64-CPU cluster)
EnforcePartLimits=ALL

# fast failure detection and recovery
SlurmdTimeout=$SLURMD_TIMEOUT
MessageTimeout=$MESSAGE_TIMEOUT
ReturnToService=2
MinJobAge=$MIN_JOB_AGE
KillWait=5
InactiveLimit=0

EOF
    for ((i = 1; i <= nodes; i++)); do
        echo "NodeName=$name-$i NodeHostname=$HOST NodeAddr=$NODE_ADDR Port=$((cport + i)) CPUs=$cpus RealMemory=$((cpus * 1024)) State=UNKNOWN"
    done
    echo "PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
}

idx=0
names=()
seen=" "
tsv="$BASE/clusters.tsv.new"
printf '# name\tslurm_conf\tslurmctld_port\tcpus_per_node\tnodes\tnode_names\n' >"$tsv"
for spec in $CLUSTERS; do
    IFS=: read -r name cpus nodes <<<"$spec"
    nodes=${nodes:-1}
    [[ "$name" =~ ^[a-z][a-z0-9]*$ ]] || die "bad cluster name '$name' (lower-case letter, then letters/digits)"
    [[ "$cpus" =~ ^[1-9][0-9]*$ ]] || die "bad CPU count in '$spec'"
    [[ "$nodes" =~ ^[1-9]$ ]] || die "bad node count in '$spec' (1..9)"
    [[ "$seen" != *" $name "* ]] || die "cluster '$name' listed twice"
    seen+="$name "
    cport=$((PORT_BASE + 10 * idx))
    dir="$BASE/$name"
    conf="$dir/slurm.conf"
    node_list=()
    for ((i = 1; i <= nodes; i++)); do node_list+=("$name-$i"); done

    mkdir -p "$dir/state" "$dir/spool" "$dir/run" "$dir/log"
    chmod 755 "$dir" "$dir/spool"

    # which of this cluster's daemons are already running?
    ctld_up=0 any_up=0
    pid_alive "$dir/run/slurmctld.pid" slurmctld && ctld_up=1 any_up=1
    for pf in "$dir"/run/slurmd-*.pid; do
        [ -e "$pf" ] && pid_alive "$pf" slurmd && any_up=1
    done

    write_conf "$name" "$cpus" "$nodes" "$cport" "$dir" >"$conf.new"
    if [ "$any_up" = 1 ] && [ -f "$conf" ] && ! cmp -s "$conf" "$conf.new"; then
        rm -f "$conf.new"
        die "cluster $name runs with a different config (CLUSTERS/ports/knobs changed?); run down.sh $BASE first"
    fi
    mv "$conf.new" "$conf"
    printf 'export SLURM_CONF=%s\n' "$conf" >"$dir/env.sh"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$conf" "$cport" "$cpus" "$nodes" "${node_list[*]}" >>"$tsv"

    if [ "$any_up" = 0 ]; then
        # job steps left over from a previous run whose daemons were killed
        kill_stray_stepds "$dir/spool"
        if [ "$KEEP_STATE" != 1 ]; then
            # fresh cluster: no old jobs. Job ids restart at 1, so the slurmd credential
            # state goes too (else 'Job credential revoked' for a reused job id).
            rm -rf "${dir:?}/state/"* "${dir:?}/spool/"*
        fi
    fi

    export SLURM_CONF="$conf"
    # ---- slurmctld
    if [ "$ctld_up" = 1 ]; then
        log "$name: slurmctld already running (pid $(cat "$dir/run/slurmctld.pid"))"
    else
        port_busy "$cport" "$NETNS" && die "$name: port $cport is already in use (set PORT_BASE)"
        rm -f "$dir/run/slurmctld.pid"
        in_ns "$NETNS" setsid slurmctld -f "$conf" </dev/null 9>&- >>"$dir/log/slurmctld.out" 2>&1 ||
            { tail_log "$dir/log/slurmctld.log"; die "$name: slurmctld failed to start"; }
        wait_for 30 "$name slurmctld" in_ns "$NETNS" scontrol ping ||
            { tail_log "$dir/log/slurmctld.log"; die "$name: slurmctld not answering"; }
        log "$name: slurmctld started (pid $(cat "$dir/run/slurmctld.pid"), port $cport)"
    fi
    # ---- slurmd, one per node
    i=0
    for node in "${node_list[@]}"; do
        i=$((i + 1))
        pf="$dir/run/slurmd-$node.pid"
        mkdir -p "$dir/spool/$node"
        chmod 755 "$dir/spool/$node"
        if pid_alive "$pf" slurmd; then
            log "$name: slurmd $node already running (pid $(cat "$pf"))"
            continue
        fi
        port_busy "$((cport + i))" "$NODE_NETNS" && die "$name: port $((cport + i)) is already in use (set PORT_BASE)"
        rm -f "$pf"
        in_ns "$NODE_NETNS" setsid slurmd -f "$conf" -N "$node" </dev/null 9>&- >>"$dir/log/slurmd-$node.out" 2>&1 ||
            { tail_log "$dir/log/slurmd-$node.log"; die "$name: slurmd $node failed to start"; }
        wait_for 10 "$name slurmd $node pid file" pid_alive "$pf" slurmd ||
            { tail_log "$dir/log/slurmd-$node.log"; die "$name: slurmd $node died"; }
        log "$name: slurmd $node started (pid $(cat "$pf"), port $((cport + i)))"
    done
    unset SLURM_CONF
    names+=("$name")
    idx=$((idx + 1))
done
mv "$tsv" "$BASE/clusters.tsv"

# ----------------------------------------------------------- wait until idle
cluster_ready() { # every node of cluster $1 is up (idle, or running jobs)
    local states
    states=$(SLURM_CONF="$BASE/$1/slurm.conf" in_ns "$NETNS" sinfo -h -N -o '%T' 2>/dev/null) || return 1
    [ -n "$states" ] && ! grep -qvE '^(idle|mixed|allocated)$' <<<"$states"
}
for name in "${names[@]}"; do
    if ! wait_for "$WAIT_SECS" "$name nodes to become idle" cluster_ready "$name"; then
        SLURM_CONF="$BASE/$name/slurm.conf" in_ns "$NETNS" sinfo -N -l >&2 || true
        for f in "$BASE/$name"/log/*.log; do echo "--- $f" >&2; tail_log "$f"; done
        die "$name: nodes not idle"
    fi
done

for name in "${names[@]}"; do
    printf '%-8s SLURM_CONF=%s  %s\n' "$name" "$BASE/$name/slurm.conf" \
        "$(SLURM_CONF="$BASE/$name/slurm.conf" in_ns "$NETNS" sinfo -h -o 'nodes=%D cpus(A/I/O/T)=%C state=%T' | tr '\n' ' ')"
done
log "all clusters up (table: $BASE/clusters.tsv; stop: $HERE/down.sh $BASE)"
log "tests: COALLOC_SLURM_RIG=$BASE cargo test -p coalloc-backends --test slurm"
