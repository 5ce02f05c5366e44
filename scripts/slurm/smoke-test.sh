#!/usr/bin/env bash
# smoke-test.sh — end-to-end check of up.sh/down.sh: down, up, submit to every cluster
# at once, poll, cancel one, check final states and idle CPUs, down.
#   usage: smoke-test.sh [BASE_DIR]     (same CLUSTERS/PORT_BASE knobs as up.sh)
# Prints 'N passed, M failed' and exits non-zero on any failure.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BASE="${1:-${COALLOC_SLURM_RIG:-/tmp/coalloc-slurm}}"
pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
state() { SLURM_CONF="$BASE/$1/slurm.conf" squeue -h -t all -j "$2" -o %T 2>/dev/null; }
wait_state() { # wait_state CLUSTER JOBID REGEX SECONDS
    local t0=$SECONDS
    until [[ "$(state "$1" "$2")" =~ ^($3)$ ]]; do
        [ $((SECONDS - t0)) -lt "$4" ] || return 1
        sleep 0.1
    done
}

uplog=$(mktemp)
"$HERE/down.sh" "$BASE" 2>/dev/null
if "$HERE/up.sh" "$BASE" >"$uplog" 2>&1; then ok "up.sh"; else bad "up.sh"; cat "$uplog"; fi
if "$HERE/up.sh" "$BASE" >"$uplog" 2>&1; then ok "up.sh again (idempotent)"; else bad "up.sh again"; cat "$uplog"; fi
grep -q 'started' "$uplog" && bad "second up.sh started something: $(grep started "$uplog")"
rm -f "$uplog"

mapfile -t names < <(grep -v '^#' "$BASE/clusters.tsv" | cut -f1)
declare -A total jid
for n in "${names[@]}"; do
    total[$n]=$(SLURM_CONF="$BASE/$n/slurm.conf" sinfo -h -o %C | cut -d/ -f4)
done

# submit one 8-CPU job to every cluster at the same time
tmp=$(mktemp -d)
for n in "${names[@]}"; do
    # shellcheck disable=SC2016  # $SLURM_* expand inside the job
    (cd "$tmp" && SLURM_CONF="$BASE/$n/slurm.conf" sbatch --parsable -n 8 -J "smoke-$n" \
        -o "$tmp/%x-%j.out" --wrap 'echo "$SLURM_CLUSTER_NAME $SLURM_NTASKS"; sleep 5' \
        >"$tmp/$n.jid") &
done
wait
for n in "${names[@]}"; do
    jid[$n]=$(cat "$tmp/$n.jid")
    check "$n: sbatch --parsable gave a job id (${jid[$n]})" test -n "${jid[$n]}"
done
for n in "${names[@]}"; do
    check "$n: job RUNNING within 5 s" wait_state "$n" "${jid[$n]}" RUNNING 5
    check "$n: sinfo %C shows 8 allocated" test \
        "$(SLURM_CONF="$BASE/$n/slurm.conf" sinfo -h -o %C)" = "8/$((total[$n] - 8))/0/${total[$n]}"
    check "$n: squeue --json lists the job" bash -c \
        "SLURM_CONF='$BASE/$n/slurm.conf' squeue --json | grep -q '\"job_id\": ${jid[$n]},'"
done

# cancel the last cluster's job, let the others finish
last=${names[-1]}
SLURM_CONF="$BASE/$last/slurm.conf" scancel "${jid[$last]}"
check "$last: scancel -> CANCELLED" wait_state "$last" "${jid[$last]}" CANCELLED 10
for n in "${names[@]}"; do
    [ "$n" = "$last" ] && continue
    check "$n: job COMPLETED" wait_state "$n" "${jid[$n]}" COMPLETED 15
    check "$n: scontrol show job: ExitCode=0:0" bash -c \
        "SLURM_CONF='$BASE/$n/slurm.conf' scontrol show job -o ${jid[$n]} | grep -q 'ExitCode=0:0'"
    check "$n: job output" grep -qx "$n 8" "$tmp/smoke-$n-${jid[$n]}.out"
done
for n in "${names[@]}"; do
    t0=$SECONDS
    while [ "$(SLURM_CONF="$BASE/$n/slurm.conf" sinfo -h -o %C)" != "0/${total[$n]}/0/${total[$n]}" ] &&
        [ $((SECONDS - t0)) -lt 10 ]; do sleep 0.1; done
    check "$n: all ${total[$n]} CPUs idle again" test \
        "$(SLURM_CONF="$BASE/$n/slurm.conf" sinfo -h -o %C)" = "0/${total[$n]}/0/${total[$n]}"
done
rm -rf "$tmp"

check "down.sh" "$HERE/down.sh" "$BASE" 2>/dev/null
left=$(ls "$BASE"/*/run/*.pid "$BASE"/munge/munged.pid 2>/dev/null)
check "no pid files left" test -z "$left"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
