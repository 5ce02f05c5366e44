#!/usr/bin/env bash
# Restart a saved server state N times and time each restart (issue 23, item 4): each run
# copies STATE (as `python3 bench/restart.py ... --copy-at-kill STATE` left it) to a scratch
# directory, starts `coalloc serve` on the copy, and prints the time until `/v1/health`
# answers and the server's own "snapshot read" / "snapshot restored" lines (read, decode,
# restore and replay times); then kill -9.
#
#   bash bench/restart-state.sh BINARY STATE CONFIG [N]     # N runs, default 3
#
# With the journal in PostgreSQL (CONFIG's `journal = "postgres://.../DB"`, as `restart.py
# --postgres URL --copy-at-kill STATE` leaves it: DB is `restart`, its copy at the kill
# `restart_saved`), each run copies DB_saved to DB_run (CREATE DATABASE ... TEMPLATE) as it
# copies STATE, and the server runs on that copy. The copy's lease is given to the copied
# state directory (`owner`, host and directory: a server restarted on its own state
# directory takes its lease at once, as after a kill). `psql` must be on the PATH.
set -euo pipefail
bin=$1 state=$2 config=$3 n=${4:-3}
work=$(mktemp -d /tmp/coalloc-restart-state-XXXXXX)
trap 'rm -rf "$work"' EXIT
pg=$(sed -n 's/^journal = "\(postgres:.*\)\/\([A-Za-z0-9_]*\)"$/\1 \2/p' "$config")
if [ -n "$pg" ]; then
  cluster=${pg% *} db=${pg#* }
  sed "s|^journal = .*|journal = \"$cluster/${db}_run\"|" "$config" >"$work/config.toml"
  config=$work/config.toml
  psql() { PGOPTIONS="-c client_min_messages=warning" command psql "$cluster/$1" -AtX -v ON_ERROR_STOP=1 -q -c "$2"; }
fi
for i in $(seq 1 "$n"); do
  rm -rf "$work/state" && cp -a "$state" "$work/state" && rm -f "$work/state/server.json"
  if [ -n "$pg" ]; then
    psql postgres "DROP DATABASE IF EXISTS ${db}_run WITH (FORCE)"
    psql postgres "CREATE DATABASE ${db}_run TEMPLATE ${db}_saved"
    psql "${db}_run" "UPDATE lease SET owner = '$(cat /proc/sys/kernel/hostname):$(realpath "$work/state")'"
  fi
  sync
  # The copies fill the page cache; a restart's fresh memory then comes slower. Empty it
  # (as root), and read the snapshot back in, as a server killed a moment ago finds it.
  echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
  if [ -n "$pg" ]; then
    psql "${db}_run" "SELECT sum(length(bytes)) FROM snapshot; SELECT count(*) FROM journal" >/dev/null
  else
    cat "$work/state"/snapshot.bin "$work/state"/journal.sqlite* >/dev/null 2>&1 || true
  fi
  # One Python process starts the server and polls it, as bench/restart.py does (a shell
  # loop of curl and python3 starts adds up to 0.4 s on a busy 2-core machine).
  health=$(python3 - "$bin" "$config" "$work/state" "$work/out" <<'PY'
import json, os, subprocess, sys, time, urllib.request
binary, config, state, out = sys.argv[1:5]
t0 = time.monotonic()
p = subprocess.Popen([binary, "serve", "--config", config, "--state-dir", state],
                     stdout=subprocess.DEVNULL, stderr=open(out, "w"))
while True:  # server.json, once written whole
    try:
        url = json.load(open(f"{state}/server.json"))["url"]
        break
    except (OSError, ValueError, KeyError):
        if p.poll() is not None:
            sys.exit(f"the server ended: see {out}")
        time.sleep(0.002)
while True:
    try:
        urllib.request.urlopen(url + "/v1/health", timeout=5).read()
        break
    except OSError:
        time.sleep(0.002)
print(f"{time.monotonic() - t0:.3f} {p.pid}")
PY
  ) || { cat "$work/out" >&2; exit 1; }
  pid=${health#* }
  lines=$(sed 's/\x1b\[[0-9;]*m//g' "$work/out" | grep -o "snapshot read.*\|snapshot restored.*" | tr '\n' ' ')
  echo "run $i: health after ${health% *} s; $lines"
  kill -9 "$pid" 2>/dev/null || true
done
