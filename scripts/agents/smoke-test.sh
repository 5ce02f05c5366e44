#!/usr/bin/env bash
# smoke-test.sh — end-to-end check of the agent rig (up.sh/down.sh next to this file): down,
# up, up again; batch jobs and job steps on s1 and s2 run where they must (s2's on its compute
# side); each Slurm site refuses a client that holds the other site's munge key; the compute
# side of s2 reaches the other sites but not the server; down leaves nothing behind.
#   usage: smoke-test.sh [BASE]     (default $COALLOC_AGENT_RIG, else /tmp/coalloc-agents)
# Prints 'N passed, M failed' and exits non-zero on any failure; exits 77 where network
# namespaces cannot be made (up.sh's "skipped").
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BASE="${1:-${COALLOC_AGENT_RIG:-/tmp/coalloc-agents}}"
PORT_BASE="${PORT_BASE:-6900}"
export CA_SITES_STATE="${CA_SITES_STATE:-$BASE/netns.list}"
P=${CA_SITES_PREFIX:-ca}
NET=${CA_SITES_NET:-10.200}
CNET=${NET%%.*}.$((${NET#*.} + 1))
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
in_ns() { local ns=$1; shift; if [ -n "$ns" ]; then nsenter --net="/run/netns/$ns" -- "$@"; else "$@"; fi; }
# client CONF NETNS CMD...: a Slurm client with slurm.conf CONF, run in NETNS
client() { local conf=$1 ns=$2; shift 2; SLURM_CONF=$conf in_ns "$ns" "$@"; }
# slurm SITE NETNS CMD...: a Slurm client of SITE's cluster, run in NETNS
slurm() { local site=$1; shift; client "$BASE/$site/$site/slurm.conf" "$@"; }
state() { slurm "$1" "$P-site${1#s}" squeue -h -t all -j "$2" -o %T 2>/dev/null; }
wait_state() { # wait_state SITE JOBID REGEX SECONDS
    local t0=$SECONDS
    until [[ "$(state "$1" "$2")" =~ ^($3)$ ]]; do
        [ $((SECONDS - t0)) -lt "$4" ] || return 1
        sleep 0.1
    done
}
# tcp NETNS HOST PORT: a TCP connection from NETNS ('' = root) to HOST:PORT succeeds
# shellcheck disable=SC2016  # $0 $1 expand in the inner shell
tcp() { in_ns "$1" timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$2" "$3" 2>/dev/null; }
fails() { ! "$@"; }
quiet() { "$@" >/dev/null 2>&1; }

# ------------------------------------------------------------------ up, twice
"$HERE/down.sh" "$BASE" >/dev/null 2>&1
uplog=$(mktemp)
t0=$(date +%s%N)
"$HERE/up.sh" "$BASE" >"$uplog" 2>&1
rc=$?
if [ "$rc" = 77 ]; then cat "$uplog"; rm -f "$uplog"; exit 77; fi
if [ "$rc" = 0 ]; then ok "up.sh ($((($(date +%s%N) - t0) / 1000000)) ms)"; else bad "up.sh"; cat "$uplog"; fi
if "$HERE/up.sh" "$BASE" >"$uplog" 2>&1; then ok "up.sh again (idempotent)"; else bad "up.sh again"; cat "$uplog"; fi
if grep -qE 'started|sites.sh: up' "$uplog"; then bad "second up.sh started something: $(grep -E 'started|sites.sh: up' "$uplog")"; fi
rm -f "$uplog"

check "sites.tsv: three sites" test "$(grep -vc '^#' "$BASE/sites.tsv")" = 3
check "sites.tsv: s2 line" grep -qxF "$(printf 's2\t%s\tslurm\t%s\t%s\t%s\t%s' "$P-site2" \
    "$BASE/s2/s2/slurm.conf" "$NET.0.12" "$CNET.2.1" "$P-site2-c")" "$BASE/sites.tsv"

# ----------------------------------------------------------- jobs and steps
out=$BASE/smoke
mkdir -p "$out"
rm -f "$out"/*
declare -A where=([s1]="$P-site1 $NET.0.11/24" [s2]="$P-site2-c $CNET.2.2/24")
declare -A jid
for s in s1 s2; do
    # shellcheck disable=SC2016  # expands inside the job
    jid[$s]=$(slurm "$s" "$P-site${s#s}" sbatch --parsable -n 2 -o "$out/$s-%j.out" --wrap \
        'echo "$SLURM_CLUSTER_NAME $(ip netns identify) $(ip -4 -o addr show scope global | awk "{print \$4}")"; srun -n 1 ip netns identify')
    check "$s: sbatch in $P-site${s#s} gave a job id (${jid[$s]})" test -n "${jid[$s]}"
done
for s in s1 s2; do
    check "$s: job COMPLETED within 10 s" wait_state "$s" "${jid[$s]}" COMPLETED 10
    f="$out/$s-${jid[$s]}.out"
    check "$s: the batch script ran in ${where[$s]% *} at ${where[$s]#* }" \
        test "$(sed -n 1p "$f" 2>/dev/null)" = "$s ${where[$s]}"
    check "$s: its srun step ran in ${where[$s]% *}" test "$(sed -n 2p "$f" 2>/dev/null)" = "${where[$s]% *}"
done
got=$(slurm s2 "$P-site2" timeout 20 salloc -Q -n 1 -- srun -n 1 ip netns identify 2>&1)
check "s2: salloc -- srun from the login node $P-site2 runs the step in $P-site2-c" test "$got" = "$P-site2-c"

# --------------------------------------------------------- munge: own keys
m1=$BASE/s1/munge m2=$BASE/s2/munge
check "s1 and s2 have different munge keys" fails cmp -s "$m1/munge.key" "$m2/munge.key"
check "s1's munged decodes its own credential" bash -c "munge -n -S '$m1/munge.socket' | unmunge -S '$m1/munge.socket' >/dev/null"
check "s2's munged refuses a credential of s1's munged" \
    bash -c "! munge -n -S '$m1/munge.socket' | unmunge -S '$m2/munge.socket' >/dev/null 2>&1"
# a client of site A (A's munged and key) pointed at site B's controller, from A's namespace
for pair in s1:s2 s2:s1; do
    a=${pair%:*} b=${pair#*:}
    conf=$out/$a-client-at-$b.conf
    sed "s#^AuthInfo=socket=.*#AuthInfo=socket=$BASE/$a/munge/munge.socket#" \
        "$BASE/$b/$b/slurm.conf" >"$conf"
    check "control: a client of $b in $P-site${a#s} reaches $b's controller" \
        quiet slurm "$b" "$P-site${a#s}" sinfo -h -o %C
    ctld_log=$BASE/$b/$b/log/slurmctld.log
    n=$(wc -l <"$ctld_log")
    msg=$(client "$conf" "$P-site${a#s}" sinfo -h -o %C 2>&1)
    check "a client of $a (its munge key) is refused by $b's controller ($msg)" \
        fails quiet client "$conf" "$P-site${a#s}" sinfo -h -o %C
    sleep 0.2
    check "$b's slurmctld logged 'Munge decode failed: Invalid credential'" \
        bash -c "tail -n +$((n + 1)) '$ctld_log' | grep -q 'Munge decode failed: Invalid credential'"
done

# ---------------------------------------------- the compute side's network
port=$((PORT_BASE + 95))
python3 -m http.server --bind "$NET.0.1" "$port" >/dev/null 2>&1 &
srv0=$!
in_ns "$P-site1" python3 -m http.server --bind "$NET.0.11" "$port" >/dev/null 2>&1 &
srv1=$!
for _ in $(seq 100); do tcp "" "$NET.0.1" "$port" && tcp "$P-site1" "$NET.0.11" "$port" && break; sleep 0.1; done
check "control: $P-site2 (login node) connects to the server $NET.0.1:$port" tcp "$P-site2" "$NET.0.1" "$port"
check "$P-site2-c (compute side) cannot connect to the server $NET.0.1:$port" fails tcp "$P-site2-c" "$NET.0.1" "$port"
check "$P-site2-c connects to site 1's login node $NET.0.11:$port" tcp "$P-site2-c" "$NET.0.11" "$port"
check "$P-site2-c connects to its own login node $CNET.2.1 (slurmctld, $PORT_BASE)" tcp "$P-site2-c" "$CNET.2.1" "$PORT_BASE"
# (not a connection test: the root namespace's default route may lead to a proxy that accepts
# any connection; what matters is that no route of the root namespace leads into the rig)
check "the server has no route to $P-site2-c ($CNET.2.2)" \
    fails bash -c "ip route get '$CNET.2.2' | grep -qE 'dev $P-|via $NET\.'"
kill "$srv0" "$srv1" 2>/dev/null
wait "$srv0" "$srv1" 2>/dev/null

# ----------------------------------------------------- down leaves nothing
# a job still running on each cluster when down.sh comes; s2's forks all the time (a
# process that exits while the rig lists the job's processes must not hide any of them)
declare -A busy=([s1]='sleep 300' [s2]='while :; do sleep 0.02; done')
for s in s1 s2; do
    jid[$s]=$(slurm "$s" "$P-site${s#s}" sbatch --parsable -n 1 -o /dev/null --wrap "${busy[$s]}")
    check "$s: a job RUNNING before down (${busy[$s]})" wait_state "$s" "${jid[$s]}" RUNNING 5
done
sleep 0.5   # the job's script has started
inodes=$(awk '$1 == "netns" { print $2 }' "$CA_SITES_STATE" 2>/dev/null |
    while read -r ns; do stat -L -c %i "/run/netns/$ns"; done | tr '\n' ' ')
# procs_in INODE: the processes whose network namespace is INODE, as " pid(comm)..."
procs_in() {
    local p ino
    for p in /proc/[0-9]*; do
        ino=$(readlink "$p/ns/net" 2>/dev/null | tr -dc 0-9)
        [ -n "$ino" ] && [[ " $* " == *" $ino "* ]] && printf ' %s(%s)' "${p#/proc/}" "$(cat "$p/comm" 2>/dev/null)"
    done
}
# site s2 crashes (slurmd and slurmctld SIGKILLed): its job's slurmstepd, on the compute
# side, lives on; the Slurm rig's down.sh must still find and stop it (its sockets are not
# in the root namespace's /proc/net/unix)
c2=$(stat -L -c %i "/run/netns/$P-site2-c")
kill -KILL "$(cat "$BASE/s2/s2/run/slurmd-s2-1.pid")" "$(cat "$BASE/s2/s2/run/slurmctld.pid")"
sleep 0.2
check "s2: after a SIGKILL of its daemons, its job's slurmstepd runs on in $P-site2-c" \
    grep -q '(slurmstepd)' <<<"$(procs_in "$c2")"
PURGE=0 "$HERE/../slurm/down.sh" "$BASE/s2" >/dev/null 2>&1
for _ in $(seq 30); do   # SIGKILLed processes take a moment to exit
    left=$(procs_in "$c2")
    [ -z "$left" ] && break
    sleep 0.1
done
check "s2: the Slurm rig's down.sh leaves no process on $P-site2-c${left:+:$left}" test -z "$left"
t0=$(date +%s%N)
check "down.sh" "$HERE/down.sh" "$BASE" 2>/dev/null
echo "     (down.sh took $((($(date +%s%N) - t0) / 1000000)) ms)"
check "no state file left" test ! -e "$CA_SITES_STATE"
check "no $P-* network namespace left" test -z "$(ip netns list | grep "^$P-")"
check "no $P-* link left" test -z "$(ip -o link | awk -F': ' '{print $2}' | grep "^$P-")"
left=$(procs_in "$inodes")
check "no process left in the rig's namespaces (${inodes% })${left:+:$left}" test -z "$left"
left=$(ps -eo pid=,comm=,args= | awk -v b="$BASE/" '$2 ~ /^(slurm|munge)/ && index($0, b)')
check "no slurm/munge process of $BASE left${left:+: $left}" test -z "$left"
left=$(ls "$BASE"/s*/s*/run/*.pid "$BASE"/s*/munge/munged.pid 2>/dev/null)
check "no pid files left" test -z "$left"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
