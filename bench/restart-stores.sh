#!/usr/bin/env bash
# Restart at a million queued jobs on SQLite and on PostgreSQL (issue 32): for each store,
# `bench/restart.py --events 0` queues QUEUED two-component jobs through the API (arrays of
# 10,000, sites unusable, nothing churned), waits WAIT s (default 3), kill -9, restarts once and saves the
# state as the kill left it (--copy-at-kill: the state directory, and on PostgreSQL the
# database); then `bench/restart-state.sh` restarts that saved state N times, each on a fresh
# copy, and the median of the times until `/v1/health` answers is printed.
#
#   bash bench/restart-stores.sh BINARY [QUEUED] [N] [WAIT]  # default 1000000 jobs, 5, 3 s
#
# What a restart replays depends on WAIT: the snapshot taken after the queue was submitted
# covers all but the last `snapshot_every` (25,000) entries once it is written, and a
# snapshot to PostgreSQL takes longer to write than snapshot.bin (a longer WAIT leaves the
# two stores' restarts the same work).
#
# PostgreSQL: a throwaway cluster (bench/pgcluster.sh), stopped and removed at the end,
# failed or not.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "$1") queued=${2:-1000000} n=${3:-5} wait=${4:-3}
. bench/pgcluster.sh
work=$(mktemp -d /tmp/coalloc-restart-stores-XXXXXX)
trap 'pg_stop; rm -rf "$work"' EXIT
pg_start
export PATH=$PG_BIN:$PATH # psql, for restart.py and restart-state.sh
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr); $(date -u +%FT%TZ); load average $(load)"
for store in sqlite postgres; do
  extra=()
  [ $store = postgres ] && extra=(--postgres "$PG_URL")
  echo "== $store: queue $queued jobs, kill -9, restart ($(date -u +%T), load average $(load))"
  python3 bench/restart.py "$bin" --queued "$queued" --events 0 --wait "$wait" --json \
    --copy-at-kill "$work/$store" "${extra[@]}" | tee "$work/$store.json"
  root=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["state_dir"])' "$work/$store.json")
  echo "== $store: the saved state restarted $n times ($(date -u +%T), load average $(load))"
  bash bench/restart-state.sh "$bin" "$work/$store" "$root/config.toml" "$n" | tee "$work/$store.runs"
  rm -rf "$root"
done
echo "== at $queued queued: restart after kill -9 until /v1/health ($(date -u +%T), load average $(load))"
python3 - "$work" "$n" <<'PY'
import json, re, statistics, sys
work, n = sys.argv[1], sys.argv[2]
print(f"| store | entries replayed | restart.py's restart | saved state, {n} restarts | median |\n"
      "| --- | ---: | ---: | --- | ---: |")
for store, name in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
    first = json.load(open(f"{work}/{store}.json"))
    replayed, first = first["restart_replayed_entries"], first["restart_s"]
    runs = [float(x) for x in re.findall(r"health after ([0-9.]+) s", open(f"{work}/{store}.runs").read())]
    replayed = "?" if replayed is None else f"{replayed:,}"
    print(f"| {name} | {replayed} | {first:.2f} s | {', '.join(f'{r:.2f}' for r in runs)} s | "
          f"**{statistics.median(runs):.2f} s** |")
PY
