#!/usr/bin/env bash
# The server at scale (issue 23): a queue of a million two-component jobs (submit rates, RSS
# per queued job, `coalloc status` times, journal size, restart after SIGKILL), then 100,000
# jobs that end and age out into the history. Builds the release binary, then runs
# crates/coalloc-cli/examples/scale_bench.rs against real `coalloc serve` processes.
#
#   bash bench/scale.sh                                  # 1,000,000 queued, 100,000 aged
#   bash bench/scale.sh --jobs 200000 --single 50000 --aged 20000
#   bash bench/scale.sh --postgres       # issue 32: the same run on SQLite, then with the
#                                        # journal in PostgreSQL, and the two side by side
#   bash bench/scale.sh --postgres --lease 30s   # server.lease on PostgreSQL (default 3 s)
#
# --postgres starts a throwaway PostgreSQL cluster (bench/pgcluster.sh: Debian's binaries,
# fsync on, synchronous_commit on; a submission is answered after its commit is flushed, as
# on SQLite) and stops and removes it at the end, failed or not. The binaries are those of
# $CARGO_TARGET_DIR (target/ if unset).
set -euo pipefail
cd "$(dirname "$0")/.."
postgres=0 args=()
for a in "$@"; do
  if [ "$a" = --postgres ]; then postgres=1; else args+=("$a"); fi
done
nice -n 10 cargo build --release --bin coalloc --example scale_bench -p coalloc-cli >&2
rel=${CARGO_TARGET_DIR:-$PWD/target}/release
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr); $(date -u +%FT%TZ); load average $(load)"
if [ $postgres = 0 ]; then
  exec "$rel/examples/scale_bench" "$rel/coalloc" "${args[@]}"
fi
. bench/pgcluster.sh
out=$(mktemp -d /tmp/coalloc-scale-both-XXXXXX)
trap 'pg_stop; rm -rf "$out"' EXIT
pg_start
echo "== journal on SQLite"
"$rel/examples/scale_bench" "$rel/coalloc" "${args[@]}" | tee "$out/sqlite"
echo "== journal on PostgreSQL (load average $(load))"
"$rel/examples/scale_bench" "$rel/coalloc" "${args[@]}" --postgres "$PG_URL" | tee "$out/postgres"
echo "== side by side ($(date -u +%FT%TZ); load average $(load))"
# The lines "- WHAT: FIGURES" of the two runs, in the same order: a Markdown table.
python3 - "$out/sqlite" "$out/postgres" <<'PY'
import sys
def items(path):
    return [l[2:].split(": ", 1) for l in open(path) if l.startswith("- ") and ": " in l]
print("| measured | SQLite | PostgreSQL |\n| --- | --- | --- |")
for (what, a), (_, b) in zip(items(sys.argv[1]), items(sys.argv[2])):
    print(f"| {what} | {a.strip()} | {b.strip()} |")
PY
