#!/usr/bin/env bash
# MPI_Init time of an 8-rank MPICH job, two ways on this one host, alternating in the same
# run: `mpiexec -n 8` (MPICH's hydra), and one coalloc job of 2 `mpi` components x 4 ranks
# on two local clusters (coalloc's PMI proxy, the co-allocation barrier in MPI_Init, the
# business cards through the server's rendezvous store). The program is bench/mpi_init.c:
# `max` and `mean` are the time ranks spent inside MPI_Init, `span` runs from the first
# rank's entry to the last rank's return. Also the whole run: mpiexec's command, and
# coalloc's submit -> finished (placement, launch, run, exit codes collected).
#
#   bash bench/mpi_init.sh                          # release build, 10 runs each
#   REPS=20 COALLOC_BIN=target/debug/coalloc bash bench/mpi_init.sh
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${REPS:-10}
bin=${COALLOC_BIN:-}
if [ -z "$bin" ]; then
    cargo build --release --bin coalloc -p coalloc-cli >&2
    bin=target/release/coalloc
fi
bin=$(realpath "$bin")
work=$(mktemp -d)
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
mpicc -O2 -o "$work/mpi_init" bench/mpi_init.c
cat >"$work/sites.toml" <<TOML
[server]
monitor_interval = "50ms"
[[site]]
name = "alpha"
processors = 4
manager = { type = "local" }
[[site]]
name = "beta"
processors = 4
manager = { type = "local" }
TOML
cat >"$work/job.json" <<JSON
{"kind": "unordered", "component": [
  {"count": 4, "job_type": "mpi", "executable": "$work/mpi_init"},
  {"count": 4, "job_type": "mpi", "executable": "$work/mpi_init"}]}
JSON
export COALLOC_STATE_DIR=$work/state
"$bin" serve --config "$work/sites.toml" 2>"$work/server.log" &
server=$!
for _ in $(seq 200); do [ -s "$COALLOC_STATE_DIR/server.json" ] && break; sleep 0.05; done
ms() { echo $(( $(date +%s%N) / 1000000 )); }
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr); $(date -u +%FT%TZ)"
echo "coalloc: $bin; mpich: $(mpichversion | awk '/Version:/ {print $3}')"
printf '%-8s %-4s %-48s %s\n' how run "MPI_Init (ms)" "whole run (ms)"
for i in $(seq "$reps"); do
    t=$(ms)
    line=$(mpiexec -n 8 "$work/mpi_init")
    printf '%-8s %-4s %-48s %s\n' mpiexec "$i" "$line" $(( $(ms) - t ))
    t=$(ms)
    job=$("$bin" submit "$work/job.json" | awk '{print $3}')
    while :; do
        state=$("$bin" status "$job" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
        case $state in finished|failed) break ;; esac
        sleep 0.01
    done
    whole=$(( $(ms) - t ))
    line=$(cat "$COALLOC_STATE_DIR"/output/"$job"/*.out | grep '^init_ms' || echo "no result ($state)")
    printf '%-8s %-4s %-48s %s\n' coalloc "$i" "$line" "$whole"
done
