#!/usr/bin/env bash
# The server at scale (issue 23): a queue of a million two-component jobs (submit rates, RSS
# per queued job, `coalloc status` times, journal size, restart after SIGKILL), then 100,000
# jobs that end and age out into the history. Builds the release binary, then runs
# crates/coalloc-cli/examples/scale_bench.rs against real `coalloc serve` processes.
#
#   bash bench/scale.sh                                  # 1,000,000 queued, 100,000 aged
#   bash bench/scale.sh --jobs 200000 --single 50000 --aged 20000
#   bash bench/scale.sh --postgres       # the journal in PostgreSQL (issue 32): a throwaway
#                                        # cluster of Debian's postgresql, started and stopped
set -euo pipefail
cd "$(dirname "$0")/.."
nice -n 10 cargo build --release --bin coalloc --example scale_bench -p coalloc-cli >&2
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr); $(date -u +%FT%TZ)"
exec target/release/examples/scale_bench "$PWD/target/release/coalloc" "$@"
