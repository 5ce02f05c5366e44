#!/usr/bin/env bash
# Grid Engine backend benchmark (issue 17): on the rig of scripts/gridengine/, a plain
# `qsub` to running on one cell and two `qsub`s (one per cell, at once) to all running,
# beside coalloc's co-allocation latency (submit -> barrier released) for 1 and 4
# components spread round-robin over the two cells (an ordered job naming delta, epsilon,
# delta, ...; one slot each, the component is `coalloc-barrier`), interleaved in the same
# run.
#
#   bash bench/gridengine.sh [REPS]          # default 10 repetitions of each
#
# Environment: COALLOC_GE_RIG (the rig's BASE_DIR, default /tmp/coalloc-ge); MONITOR (the
# server's monitor_interval, default 100ms); PROFILE (release, the default, or debug: the
# binaries' build); CARGO_TARGET_DIR; the knobs of scripts/gridengine/up.sh (GE_PORT_BASE...)
# pass through. The rig is brought up if needed and taken down at the end when this script
# started it (KEEP_UP=1 leaves it up).
#
# coalloc's latency is read from the job (GET /v1/jobs/{id}: barrier_release - submit, the
# server's clock, ms); qsub's from the client's clock, from before the command until the
# job's first command has run (it touches a file; 5 ms polls). Every sample starts on empty cells after a pause of 0.3 s plus
# a uniform 0-1 s, so that it falls at a random phase of the qmasters' 1 s scheduling
# interval (scripts/gridengine/up.sh: schedule_interval 0:0:1, flush_submit_sec 1).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REPS=${1:-10}
BASE=${COALLOC_GE_RIG:-/tmp/coalloc-ge}
MONITOR=${MONITOR:-100ms}
PROFILE=${PROFILE:-release}
SIZES=(1 4)

flag=--release
[ "$PROFILE" = release ] || flag=
# shellcheck disable=SC2086
cargo build $flag --bin coalloc --bin coalloc-barrier -p coalloc-cli -p coalloc-runtime >&2
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
COALLOC=$TARGET/$PROFILE/coalloc
BARRIER=$TARGET/$PROFILE/coalloc-barrier

uplog=$(mktemp)
if ! scripts/gridengine/up.sh "$BASE" 2>"$uplog" >/dev/null; then
    cat "$uplog" >&2
    echo "gridengine.sh: up.sh failed" >&2
    exit 1
fi
started=0
grep -q 'starting\|installing' "$uplog" && started=1
rm -f "$uplog"

WORK=$(mktemp -d /tmp/coalloc-ge-bench.XXXXXX)
server_pid=
cleanup() {
    [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
    [ -z "$server_pid" ] || wait "$server_pid" 2>/dev/null || true
    if [ "${KEEP_UP:-0}" = 1 ] || [ "$started" = 0 ]; then
        echo "gridengine.sh: rig left up (scripts/gridengine/down.sh $BASE stops it)" >&2
    else
        scripts/gridengine/down.sh "$BASE" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

mapfile -t NAMES < <(awk -F'\t' '!/^#/ {print $1}' "$BASE/cells.tsv")
mapfile -t SETTINGS < <(awk -F'\t' '!/^#/ {print $2}' "$BASE/cells.tsv")
mapfile -t SLOTS < <(awk -F'\t' '!/^#/ {print $7}' "$BASE/cells.tsv")
[ "${#NAMES[@]}" -ge 2 ] || { echo "gridengine.sh: the rig has fewer than two cells" >&2; exit 1; }
ge() { (. "${SETTINGS[$1]}"; shift; "$@"); }   # ge I COMMAND...: run a client against cell I

{
    printf '[server]\nmonitor_interval = "%s"\nsample_interval = "5s"\n' "$MONITOR"
    for i in "${!NAMES[@]}"; do
        printf '[[site]]\nname = "%s"\nprocessors = %s\nmanager = { type = "gridengine", settings = "%s", pe = "coalloc" }\n' \
            "${NAMES[$i]}" "${SLOTS[$i]}" "${SETTINGS[$i]}"
    done
    printf '[scheduler]\npolicy = "fcfs"\nfit = "worst"\n'
} >"$WORK/config.toml"
"$COALLOC" serve --config "$WORK/config.toml" --state-dir "$WORK/state" 2>"$WORK/server.log" >/dev/null &
server_pid=$!
for _ in $(seq 200); do [ -s "$WORK/state/server.json" ] && break; sleep 0.05; done
URL=$(jq -r .url "$WORK/state/server.json")
TOKEN=$(cat "$WORK/state/token")
api() { curl -sf -H "Authorization: Bearer $TOKEN" "$@"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

settle() { # no job listed in any cell, then 0.3 s plus a uniform 0-1 s
    local i busy
    for _ in $(seq 500); do
        busy=0
        for i in "${!NAMES[@]}"; do
            [ -z "$(ge "$i" qstat -u '*' 2>/dev/null)" ] || busy=1
        done
        [ "$busy" = 0 ] && break
        sleep 0.02
    done
    sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", 0.3 + r / 32768 }')"
}

submit_and_wait() { # K one-slot components round-robin over the cells: latency in ms
    local k=$1 comps=() i id j state body
    for ((i = 0; i < k; i++)); do
        comps+=("{\"count\":1,\"job_type\":\"single\",\"executable\":\"$BARRIER\",\"site\":\"${NAMES[$((i % 2))]}\"}")
    done
    body="{\"kind\":\"ordered\",\"max_wall_time\":\"5m\",\"component\":[$(IFS=,; echo "${comps[*]}")]}"
    id=$(api -X POST "$URL/v1/jobs" -d "$body" | jq -r .job)
    for _ in $(seq 1200); do
        j=$(api "$URL/v1/jobs/$id")
        state=$(jq -r .state <<<"$j")
        case $state in finished | failed) break ;; esac
        sleep 0.05
    done
    [ "$state" = finished ] || { echo "gridengine.sh: job $id ended $state: $j" >&2; exit 1; }
    jq -r '.barrier_release - .submit' <<<"$j"
}

to_running() { # to_running I...: one plain qsub per listed cell at once; ms until all run
    # "Run" is the job's first command (it touches a file), as coalloc's latency ends at
    # the components' check-in: qstat shows `t` until the execd's next report, up to
    # load_report_time (2 s) after the job started.
    local t0 ids=() i n all
    rm -f "$WORK"/started.*
    t0=$(now_ms)
    for i in "$@"; do
        ids+=("$(echo "touch $WORK/started.$i; sleep 1" | ge "$i" qsub -terse -N bench-plain -o /dev/null -e /dev/null)")
    done
    for _ in $(seq 3000); do
        all=1
        for i in "$@"; do
            [ -e "$WORK/started.$i" ] || all=0
        done
        [ "$all" = 1 ] && break
        sleep 0.005
    done
    echo $(($(now_ms) - t0))
    n=0
    for i in "$@"; do
        ge "$i" qdel "${ids[$n]}" >/dev/null 2>&1 || true
        n=$((n + 1))
    done
}

stats() { # stats NAME SAMPLES...: | name | n | median | p90 | min | max |
    python3 - "$@" <<'EOF'
import math, statistics, sys
name, xs = sys.argv[1], sorted(float(x) for x in sys.argv[2:])
p90 = xs[math.ceil(0.9 * len(xs)) - 1]
print(f"| {name} | {len(xs)} | {statistics.median(xs):.0f} | {p90:.0f} | {xs[0]:.0f} | {xs[-1]:.0f} |")
EOF
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB, $(. /etc/os-release && echo "$PRETTY_NAME"); $(date -u +%FT%TZ)"
echo "rig: $BASE, cells ${NAMES[*]} (${SLOTS[*]} slots); $(dpkg-query -W -f='gridengine ${Version}' gridengine-master 2>/dev/null)"
echo "server: monitor_interval=$MONITOR, $PROFILE build; $REPS repetitions; latencies in ms"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| what | n | median | p90 | min | max |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
declare -A samples
for ((r = 0; r < REPS; r++)); do
    settle
    samples[q1]+=" $(to_running 0)"
    settle
    samples[q2]+=" $(to_running 0 1)"
    for k in "${SIZES[@]}"; do
        settle
        samples[c$k]+=" $(submit_and_wait "$k")"
    done
done
# shellcheck disable=SC2086
stats "plain qsub to started, 1 job on ${NAMES[0]}" ${samples[q1]}
# shellcheck disable=SC2086
stats "plain qsub to started, 1 job on each of ${NAMES[0]}, ${NAMES[1]} at once" ${samples[q2]}
for k in "${SIZES[@]}"; do
    # shellcheck disable=SC2086
    stats "coalloc co-allocation, $k component(s) over ${NAMES[0]}, ${NAMES[1]}" ${samples[c$k]}
done
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
