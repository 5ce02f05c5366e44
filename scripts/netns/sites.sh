#!/usr/bin/env bash
# sites.sh — separate "hosts" on this one machine, with Linux network namespaces, for tests of
# sites that are really apart (each its own network, its own daemons, its own keys).
# The project's copy of the team's shared recipe (shared/netns/sites.sh), extended.
#
#   sites.sh up N [--rate RATE] [--compute | --compute-sites LIST] [--route-compute]
#   sites.sh down                             # removes exactly what `up` made
#   sites.sh exec I CMD...                    # run CMD inside site I (nsenter --net)
#   sites.sh exec I-c CMD...                  # ... inside site I's compute side
#
# Layout (all addresses live only inside namespaces this script made, and on its bridge):
#   - a bridge `ca-wan` in the root namespace, 10.200.0.1/24: the "internet" between sites;
#     the server runs in the root namespace and is reached there as 10.200.0.1.
#   - site I: namespace `ca-siteI` (its login node), 10.200.0.(10+I) on the bridge, and lo up.
#     Sites reach the server and each other over the bridge.
#   - --rate RATE (e.g. 100mbit, or 200mbit,20mbit,100mbit for one rate per site in order):
#     a token-bucket limit (tc tbf) on each site's link, both directions; `none` in the list
#     leaves that site's link unlimited.
#   - --compute: every site also gets `ca-siteI-c` (its compute nodes), 10.201.I.2/24, joined
#     to its login namespace only (10.201.I.1). --compute-sites 2,3: only those sites do.
#     Without --route-compute a compute side reaches its own login node and nothing else.
#   - --route-compute: compute sides also reach the OTHER sites (their login addresses
#     10.200.0.(10+J) and their compute sides 10.201.J.0/24), never the server: the login
#     namespace forwards (ip_forward=1 in that namespace only), the compute side has /32 host
#     routes to the other sites' login addresses and /24 routes to their compute networks via
#     10.201.I.1, every other site has a route to 10.201.I.0/24 via 10.200.0.(10+I). There
#     is no route to 10.200.0.1 from a compute side (connect: "Network is unreachable"), and
#     the root namespace has no route to any 10.201.x network either. No iptables.
#
# Environment:
#   CA_SITES_STATE   the file listing what `up` made, read by `down` [/run/ca-sites.list]
#                    (give a test run and a developer run different files)
#   CA_SITES_PREFIX  name prefix of namespaces and links [ca]: two topologies can coexist
#                    only with different prefixes AND different CA_SITES_NET
#   CA_SITES_NET     first two octets of the bridge network [10.200]; compute sides use the
#                    next second octet (10.201.I.0/24)
# Needs root, iproute2 (ip, tc) and the kernel's veth, bridge and tbf; no netem.
set -eEuo pipefail
cmd=${1:-}; shift || true
P=${CA_SITES_PREFIX:-ca}
NET=${CA_SITES_NET:-10.200}
CNET=${NET%%.*}.$((${NET#*.} + 1))
state=${CA_SITES_STATE:-/run/$P-sites.list}    # what `up` made, for `down`
log() { echo "sites.sh: $*" >&2; }

up() {
    local n=$1; shift
    local rate="" csites="" route=0 i j
    [[ "$n" =~ ^[1-9]$ ]] || { log "site count must be 1..9"; exit 2; }
    while [ $# -gt 0 ]; do
        case $1 in
            --rate) rate=$2; shift 2 ;;
            --compute) csites=$(seq -s, 1 "$n"); shift ;;
            --compute-sites) csites=$2; shift 2 ;;
            --route-compute) route=1; shift ;;
            *) log "unknown option $1"; exit 2 ;;
        esac
    done
    has_compute() { [[ ",$csites," == *",$1,"* ]]; }
    [ -e "$state" ] && { log "already up (see $state); run: $0 down"; exit 1; }
    if ip link show "$P-wan" >/dev/null 2>&1 || [ -e "/run/netns/$P-site1" ]; then
        log "$P-wan or $P-site1 exists but $state does not: another topology is up" \
            "(set CA_SITES_STATE to its state file, or CA_SITES_PREFIX/CA_SITES_NET)"
        exit 1
    fi
    mkdir -p "$(dirname "$state")"
    : >"$state"
    # on any failure: remove what was made so far, then fail
    fail_up() { local rc=$?; trap - ERR; log "up failed; removing what it made"; down >/dev/null; exit "$rc"; }
    trap fail_up ERR
    ip link add "$P-wan" type bridge; echo "link $P-wan" >>"$state"
    ip addr add "$NET.0.1/24" dev "$P-wan"
    ip link set "$P-wan" up
    for i in $(seq 1 "$n"); do
        local ns=$P-site$i
        ip netns add "$ns"; echo "netns $ns" >>"$state"
        ip link add "$P-s$i-h" type veth peer name "$P-s$i-n"; echo "link $P-s$i-h" >>"$state"
        ip link set "$P-s$i-n" netns "$ns"
        ip link set "$P-s$i-h" master "$P-wan"
        ip link set "$P-s$i-h" up
        ip netns exec "$ns" ip link set lo up
        ip netns exec "$ns" ip addr add "$NET.0.$((10 + i))/24" dev "$P-s$i-n"
        ip netns exec "$ns" ip link set "$P-s$i-n" up
        if [ -n "$rate" ]; then
            local r; r=$(echo "$rate" | cut -d, -f"$i"); [ -n "$r" ] || r=${rate##*,}
        fi
        if [ -n "$rate" ] && [ "$r" != none ]; then
            tc qdisc add dev "$P-s$i-h" root tbf rate "$r" burst 64kb latency 200ms
            ip netns exec "$ns" tc qdisc add dev "$P-s$i-n" root tbf rate "$r" burst 64kb latency 200ms
        fi
        if has_compute "$i"; then
            ip netns add "$ns-c"; echo "netns $ns-c" >>"$state"
            # created in the login namespace, so nothing of it is left in the root one
            ip netns exec "$ns" ip link add "$P-c$i-l" type veth peer name "$P-c$i-c"
            ip netns exec "$ns" ip link set "$P-c$i-c" netns "$ns-c"
            ip netns exec "$ns" ip addr add "$CNET.$i.1/24" dev "$P-c$i-l"
            ip netns exec "$ns" ip link set "$P-c$i-l" up
            ip netns exec "$ns-c" ip link set lo up
            ip netns exec "$ns-c" ip addr add "$CNET.$i.2/24" dev "$P-c$i-c"
            ip netns exec "$ns-c" ip link set "$P-c$i-c" up
        fi
    done
    if [ "$route" = 1 ]; then
        for i in $(seq 1 "$n"); do
            has_compute "$i" || continue
            # /proc/sys/net is the writer's namespace's: this turns forwarding on in ca-siteI only
            ip netns exec "$P-site$i" sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward'
            for j in $(seq 1 "$n"); do
                [ "$j" = "$i" ] && continue
                ip netns exec "$P-site$i-c" ip route add "$NET.0.$((10 + j))/32" via "$CNET.$i.1"
                ip netns exec "$P-site$j" ip route add "$CNET.$i.0/24" via "$NET.0.$((10 + i))"
                if has_compute "$j"; then
                    ip netns exec "$P-site$i-c" ip route add "$CNET.$j.0/24" via "$CNET.$i.1"
                fi
            done
        done
    fi
    trap - ERR
    log "up: $n site(s) (state $state); server side $NET.0.1; site I at $NET.0.(10+I)${rate:+; rate $rate}${csites:+; compute sides $csites at $CNET.I.2}$([ "$route" = 1 ] && echo ', routed to the other sites')"
}

down() {
    [ -e "$state" ] || { log "nothing to take down ($state absent)"; return 0; }
    # namespaces first (their veth ends go with them, routes and sysctls too), then the links
    # left in the root one
    # processes still inside: SIGTERM, up to 2 s, then SIGKILL to those still inside (a
    # slurmstepd ignores SIGTERM); read again each time, so no reused pid is hit
    local i
    ns_pids() { awk '$1 == "netns" { print $2 }' "$state" |
        while read -r name; do ip netns pids "$name" 2>/dev/null; done; }
    ns_pids | xargs -r kill 2>/dev/null || true
    for ((i = 0; i < 20; i++)); do
        [ -z "$(ns_pids)" ] && break
        sleep 0.1
    done
    ns_pids | xargs -r kill -KILL 2>/dev/null || true
    tac "$state" | while read -r kind name; do
        case $kind in
            netns) ip netns del "$name" 2>/dev/null || true ;;
        esac
    done
    tac "$state" | while read -r kind name; do
        if [ "$kind" = link ]; then ip link del "$name" 2>/dev/null || true; fi
    done
    rm -f "$state"
    log "down"
}

case $cmd in
    up) up "$@" ;;
    down) down ;;
    exec) i=$1; shift; exec nsenter --net="/run/netns/$P-site$i" -- "$@" ;;
    *) sed -n '2,34p' "$0"; exit 2 ;;
esac
