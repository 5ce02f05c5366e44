#!/usr/bin/env bash
# Restart a saved server state N times and time each restart (issue 23, item 4): each run
# copies STATE (as `python3 bench/restart.py ... --copy-at-kill STATE` left it) to a scratch
# directory, starts `coalloc serve` on the copy, and prints the time until `/v1/health`
# answers and the server's own "snapshot read" / "snapshot restored" lines (read, decode,
# restore and replay times); then kill -9.
#
#   bash bench/restart-state.sh BINARY STATE CONFIG [N]     # N runs, default 3
set -euo pipefail
bin=$1 state=$2 config=$3 n=${4:-3}
work=$(mktemp -d /tmp/coalloc-restart-state-XXXXXX)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 "$n"); do
  rm -rf "$work/state" && cp -a "$state" "$work/state" && rm -f "$work/state/server.json"
  sync
  # The copies fill the page cache; a restart's fresh memory then comes slower. Empty it
  # (as root), and read the snapshot back in, as a server killed a moment ago finds it.
  echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
  cat "$work/state/snapshot.bin" "$work/state"/journal.sqlite* >/dev/null
  t0=$(date +%s.%N)
  "$bin" serve --config "$config" --state-dir "$work/state" >"$work/out" 2>&1 &
  pid=$!
  until [ -f "$work/state/server.json" ]; do
    kill -0 "$pid" 2>/dev/null || { cat "$work/out" >&2; exit 1; }
    sleep 0.002
  done
  url=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['url'])" "$work/state/server.json")
  until curl -s -m 1 "$url/v1/health" >/dev/null; do sleep 0.005; done
  t1=$(date +%s.%N)
  lines=$(sed 's/\x1b\[[0-9;]*m//g' "$work/out" | grep -o "snapshot read.*\|snapshot restored.*" | tr '\n' ' ')
  echo "run $i: health after $(echo "$t1 - $t0" | bc) s; $lines"
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true
done
