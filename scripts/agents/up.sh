#!/usr/bin/env bash
# up.sh — the topology of the site-agent tests: three sites that are really apart, on this
# one machine (issue 16, item 7). See README.md next to this file.
#
#   usage: up.sh [BASE]      BASE defaults to $COALLOC_AGENT_RIG, else /tmp/coalloc-agents
#
#   - namespaces ca-site1..3 on the bridge ca-wan; the server side is 10.200.0.1 in the root
#     namespace; site I's login node is 10.200.0.(10+I) (scripts/netns/sites.sh);
#   - site 2 also has a compute side, ca-site2-c at 10.201.2.2, that reaches its login node
#     (10.201.2.1) and the other sites, never the server;
#   - s1: a Slurm cluster entirely inside ca-site1 (munged, slurmctld, slurmd at 10.200.0.11);
#   - s2: a Slurm cluster whose munged and slurmctld run in ca-site2 (on 10.201.2.1) and whose
#     slurmd runs in ca-site2-c (10.201.2.2): its jobs and job steps run on the compute side;
#   - s3: a local site, nothing but its namespace.
#   s1 and s2 each have their own munged, socket and key (BASE/sI/munge/); each is a rig of
#   scripts/slurm/up.sh of its own (base BASE/sI, cluster directory BASE/sI/sI).
#   Writes BASE/sites.tsv. Idempotent: a second run while all is up starts nothing.
#   Exits 77 (and starts nothing) where network namespaces cannot be made.
#
# Environment: PORT_BASE (slurmctld port of both clusters, each in its own namespace) [6900],
# S1_CPUS [32], S2_CPUS [32], INSTALL (scripts/slurm/up.sh), CA_SITES_STATE
# [BASE/netns.list], CA_SITES_PREFIX [ca], CA_SITES_NET [10.200] (scripts/netns/sites.sh).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SCRIPTS=$(dirname "$HERE")
BASE="${1:-${COALLOC_AGENT_RIG:-/tmp/coalloc-agents}}"
PORT_BASE="${PORT_BASE:-6900}"
S1_CPUS="${S1_CPUS:-32}"
S2_CPUS="${S2_CPUS:-32}"
log() { echo "agents/up.sh: $*" >&2; }
die() { echo "agents/up.sh: error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (network namespaces, SlurmUser=root)"
[[ "$BASE" != *[[:space:]]* ]] || die "BASE must not contain whitespace (it goes into slurm.conf)"
mkdir -p "$BASE"
BASE=$(cd "$BASE" && pwd)
chmod 755 "$BASE"
exec 8>"$BASE/.agents.lock"
flock -w 120 8 || die "another agents/up.sh or down.sh holds $BASE/.agents.lock"

export CA_SITES_STATE="${CA_SITES_STATE:-$BASE/netns.list}"
P=${CA_SITES_PREFIX:-ca}
NET=${CA_SITES_NET:-10.200}
CNET=${NET%%.*}.$((${NET#*.} + 1))

# ---------------------------------------------------------------- namespaces
if ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1; then
    [ "${INSTALL:-1}" = 1 ] || die "ip/tc missing and INSTALL=0: install iproute2"
    log "installing iproute2"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2; } >/dev/null ||
        die "apt-get install iproute2 failed"
fi
probe=$P-probe$$
if ! ip netns add "$probe" 2>/dev/null; then
    # a failed add may leave its mount point behind (seen in a user namespace)
    ip netns del "$probe" 2>/dev/null || rm -f "/run/netns/$probe" 2>/dev/null || true
    echo "agents/up.sh: network namespaces cannot be made here (ip netns add failed): skipped" >&2
    exit 77
fi
ip netns del "$probe"

netns_up() { # everything the state file lists still exists
    local kind name
    [ -s "$CA_SITES_STATE" ] || return 1
    while read -r kind name; do
        case $kind in
            netns) [ -e "/run/netns/$name" ] || return 1 ;;
            link) ip link show "$name" >/dev/null 2>&1 || return 1 ;;
        esac
    done <"$CA_SITES_STATE"
}
if netns_up; then
    log "namespaces already up ($CA_SITES_STATE)"
else
    [ ! -e "$CA_SITES_STATE" ] || "$SCRIPTS/netns/sites.sh" down 8>&-   # half there: afresh
    "$SCRIPTS/netns/sites.sh" up 3 --compute-sites 2 --route-compute 8>&-
fi

# ---------------------------------------------------------------------- Slurm
# Each cluster is a scripts/slurm rig of its own: own base, munged, key, socket. The lock's
# fd 8 is closed for them: a daemon that inherits it would hold the lock for its lifetime.
NETNS=$P-site1 CTLD_ADDR=$NET.0.11 NODE_NETNS='' NODE_ADDR='' CLUSTERS="s1:$S1_CPUS" \
    PORT_BASE=$PORT_BASE "$SCRIPTS/slurm/up.sh" "$BASE/s1" 8>&-
NETNS=$P-site2 CTLD_ADDR=$CNET.2.1 NODE_NETNS=$P-site2-c NODE_ADDR=$CNET.2.2 CLUSTERS="s2:$S2_CPUS" \
    PORT_BASE=$PORT_BASE "$SCRIPTS/slurm/up.sh" "$BASE/s2" 8>&-

# ----------------------------------------------------------------- sites.tsv
{
    printf '# agent rig sites; the server is %s.0.1 (root namespace). compute_addr: the address of the\n' "$NET"
    printf '# login node (its agent) that the site'"'"'s compute processes reach; compute_netns: where they run\n'
    printf '# name\tnetns\tkind\tslurm_conf\tlogin_addr\tcompute_addr\tcompute_netns\n'
    printf 's1\t%s\tslurm\t%s\t%s\t%s\t-\n' "$P-site1" "$BASE/s1/s1/slurm.conf" "$NET.0.11" "$NET.0.11"
    printf 's2\t%s\tslurm\t%s\t%s\t%s\t%s\n' "$P-site2" "$BASE/s2/s2/slurm.conf" "$NET.0.12" "$CNET.2.1" "$P-site2-c"
    printf 's3\t%s\tlocal\t-\t%s\t%s\t-\n' "$P-site3" "$NET.0.13" "$NET.0.13"
} >"$BASE/sites.tsv.new"
mv "$BASE/sites.tsv.new" "$BASE/sites.tsv"
log "up: sites s1 s2 s3 (table: $BASE/sites.tsv; stop: $HERE/down.sh $BASE)"
log "clients: ip netns exec $P-site2 env SLURM_CONF=$BASE/s2/s2/slurm.conf sinfo"
