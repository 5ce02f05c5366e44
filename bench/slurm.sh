#!/usr/bin/env bash
# Slurm backend benchmark (issue "Slurm backend: co-allocation across real, independent Slurm
# clusters"): co-allocation latency, submit -> barrier released, for 1, 2, 3 and 6
# components spread round-robin over the rig's three Slurm clusters (an ordered job naming
# alpha, beta, gamma, alpha, ...; one CPU each, the component is `coalloc-barrier`), beside a
# plain `sbatch` to RUNNING on one cluster and three `sbatch`es (one per cluster, at once) to
# all RUNNING, and the same with `salloc --no-shell` (an allocation, which Slurm starts inside
# the request), on the same rig in the same run. The coalloc server's Slurm sites use
# `launch = "allocation"` unless LAUNCH=batch.
#
#   bash bench/slurm.sh [REPS]          # default 10 repetitions of each
#
# Environment: COALLOC_SLURM_RIG (the rig's BASE_DIR, default /tmp/coalloc-slurm);
# MONITOR (the server's monitor_interval, default 100ms); LAUNCH (the Slurm sites' launch
# setting: allocation, the default here, or batch); CARGO_TARGET_DIR (where the binaries
# are built, default target/); the knobs of scripts/slurm/up.sh
# (SCHED_PARAMS, PORT_BASE...) pass through. The rig is brought up if needed and taken down
# again at the end when this script started it (KEEP_UP=1 leaves it up).
#
# Latency of coalloc is read from the job (GET /v1/jobs/{id}: barrier_release - submit, the
# server's clock, ms); of sbatch and salloc, from the client's clock around the command and
# a 20 ms `squeue` poll.
#
# Every sample starts at a random moment on quiet clusters (SETTLE=1, the default): first
# no job may be left in any state but a final one on any cluster, then a pause of 0.3 s plus
# a uniform 0-1 s. Slurm 22.05 starts a batch job only in a scheduling pass: its background
# loop's pass (once a second, when a submission is queued), the backfill pass (every
# bf_interval) or the pass that the end of any job triggers (epilog complete). Without the
# pause a sample would inherit the phase of those passes from the previous sample (the jobs
# it just cancelled or that just ended trigger passes 30-50 ms later), which favours
# whatever kind of sample comes next. SETTLE=0 submits back to back as before.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REPS=${1:-10}
BASE=${COALLOC_SLURM_RIG:-/tmp/coalloc-slurm}
MONITOR=${MONITOR:-100ms}
SETTLE=${SETTLE:-1}
LAUNCH=${LAUNCH:-allocation}
SIZES=(1 2 3 6)

cargo build --release --bin coalloc --bin coalloc-barrier -p coalloc-cli -p coalloc-runtime >&2
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
COALLOC=$TARGET/release/coalloc
BARRIER=$TARGET/release/coalloc-barrier

# ---------------------------------------------------------------- the rig
uplog=$(mktemp)
if ! scripts/slurm/up.sh "$BASE" 2>"$uplog" >/dev/null; then
    cat "$uplog" >&2
    echo "slurm.sh: up.sh failed" >&2
    exit 1
fi
started=0
grep -q 'started\|installing' "$uplog" && started=1
rm -f "$uplog"

WORK=$(mktemp -d /tmp/coalloc-slurm-bench.XXXXXX)
server_pid=
cleanup() {
    [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
    [ -z "$server_pid" ] || wait "$server_pid" 2>/dev/null || true
    if [ "${KEEP_UP:-0}" = 1 ] || [ "$started" = 0 ]; then
        echo "slurm.sh: rig left up (scripts/slurm/down.sh $BASE stops it)" >&2
    else
        scripts/slurm/down.sh "$BASE" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

mapfile -t NAMES < <(awk -F'\t' '!/^#/ {print $1}' "$BASE/clusters.tsv")
mapfile -t CONFS < <(awk -F'\t' '!/^#/ {print $2}' "$BASE/clusters.tsv")
mapfile -t CPUS < <(awk -F'\t' '!/^#/ {print $4 * $5}' "$BASE/clusters.tsv")
[ "${#NAMES[@]}" -ge 3 ] || { echo "slurm.sh: the rig has fewer than three clusters" >&2; exit 1; }
sched=$(sed -n 's/^SchedulerParameters=//p' "${CONFS[0]}")

# ---------------------------------------------------------------- the server
{
    printf '[server]\nmonitor_interval = "%s"\nsample_interval = "5s"\n' "$MONITOR"
    for i in "${!NAMES[@]}"; do
        printf '[[site]]\nname = "%s"\nprocessors = %s\nmanager = { type = "slurm", slurm_conf = "%s", launch = "%s" }\n' \
            "${NAMES[$i]}" "${CPUS[$i]}" "${CONFS[$i]}" "$LAUNCH"
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

# settle: wait until no job on any cluster is pending, running or completing, then pause
# 0.3 s plus a uniform 0-1 s, so that the next submission falls at a random phase of every
# cluster's scheduling passes (see the header)
settle() {
    [ "$SETTLE" = 1 ] || return 0
    local i busy
    for _ in $(seq 500); do   # up to 10 s
        busy=0
        for i in "${!CONFS[@]}"; do
            [ -z "$(SLURM_CONF=${CONFS[$i]} squeue -h -t PD,CF,R,CG,S -o %i 2>/dev/null)" ] || busy=1
        done
        [ "$busy" = 0 ] && break
        sleep 0.02
    done
    sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", 0.3 + r / 32768 }')"
}

# submit_and_wait K: one co-allocated job of K one-CPU components; prints its latency (ms)
submit_and_wait() {
    local k=$1 comps=() i id j state
    for ((i = 0; i < k; i++)); do
        comps+=("{\"count\":1,\"job_type\":\"single\",\"executable\":\"$BARRIER\",\"site\":\"${NAMES[$((i % 3))]}\"}")
    done
    local body
    body="{\"kind\":\"ordered\",\"max_wall_time\":\"5m\",\"component\":[$(IFS=,; echo "${comps[*]}")]}"
    id=$(api -X POST "$URL/v1/jobs" -d "$body" | jq -r .job)
    for _ in $(seq 1200); do   # up to 60 s
        j=$(api "$URL/v1/jobs/$id")
        state=$(jq -r .state <<<"$j")
        case $state in finished | failed) break ;; esac
        sleep 0.05
    done
    [ "$state" = finished ] || { echo "slurm.sh: job $id ended $state: $j" >&2; exit 1; }
    jq -r '.barrier_release - .submit' <<<"$j"
}

# to_running KIND I...: one plain job per listed cluster at once, KIND sbatch (a batch job)
# or salloc (`salloc --no-shell`, an allocation without a step); ms until all are RUNNING
to_running() {
    local kind=$1 t0 ids=() i n id st all
    shift
    t0=$(now_ms)
    for i in "$@"; do
        if [ "$kind" = sbatch ]; then
            ids+=("$(SLURM_CONF=${CONFS[$i]} sbatch --parsable -J bench-plain -n 1 -o /dev/null --wrap 'sleep 1')")
        else
            ids+=("$(SLURM_CONF=${CONFS[$i]} salloc --no-shell -J bench-plain -n 1 -t 1 2>&1 |
                sed -n 's/^salloc: Granted job allocation \([0-9]*\)$/\1/p')")
        fi
    done
    for _ in $(seq 1500); do
        all=1
        n=0
        for i in "$@"; do
            id=${ids[$n]}
            n=$((n + 1))
            st=$(SLURM_CONF=${CONFS[$i]} squeue -h -j "$id" -o %T 2>/dev/null || true)
            case $st in RUNNING | COMPLETING | "") ;; *) all=0 ;; esac
        done
        [ "$all" = 1 ] && break
        sleep 0.02
    done
    echo $(($(now_ms) - t0))
    # let them end so the next sample starts on idle clusters
    n=0
    for i in "$@"; do
        SLURM_CONF=${CONFS[$i]} scancel "${ids[$n]}" 2>/dev/null || true
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
echo "rig: $BASE, clusters ${NAMES[*]} (${CPUS[*]} CPUs); SchedulerParameters=${sched:-<Slurm defaults>}; $(SLURM_CONF=${CONFS[0]} sbatch --version)"
echo "server: monitor_interval=$MONITOR, launch=$LAUNCH, release build; $REPS repetitions; SETTLE=$SETTLE; latencies in ms"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| what | n | median | p90 | min | max |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
declare -A samples
# Interleave the kinds of measurement so that a slow phase of the machine hits all alike.
for ((r = 0; r < REPS; r++)); do
    settle
    samples[sbatch1]+=" $(to_running sbatch 0)"
    settle
    samples[sbatch3]+=" $(to_running sbatch 0 1 2)"
    settle
    samples[salloc1]+=" $(to_running salloc 0)"
    settle
    samples[salloc3]+=" $(to_running salloc 0 1 2)"
    for k in "${SIZES[@]}"; do
        settle
        samples[c$k]+=" $(submit_and_wait "$k")"
    done
done
# shellcheck disable=SC2086
stats "plain sbatch to RUNNING, 1 job on ${NAMES[0]}" ${samples[sbatch1]}
# shellcheck disable=SC2086
stats "plain sbatch to RUNNING, 3 jobs (one per cluster), until all run" ${samples[sbatch3]}
# shellcheck disable=SC2086
stats "plain salloc --no-shell to RUNNING, 1 on ${NAMES[0]}" ${samples[salloc1]}
# shellcheck disable=SC2086
stats "plain salloc --no-shell to RUNNING, 3 (one per cluster), until all run" ${samples[salloc3]}
for k in "${SIZES[@]}"; do
    # shellcheck disable=SC2086
    stats "coalloc, $k component(s), submit to barrier released" ${samples[c$k]}
done
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
m1=$(python3 -c 'import statistics,sys; print(statistics.median(map(float, sys.argv[1:])))' ${samples[c1]})
m6=$(python3 -c 'import statistics,sys; print(statistics.median(map(float, sys.argv[1:])))' ${samples[c6]})
echo
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(f'6 components / 1 component (medians): {b / a:.2f} (goal <= 1.5: {\"met\" if b <= 1.5 * a else \"NOT met\"})')" "$m1" "$m6"
