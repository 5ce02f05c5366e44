#!/usr/bin/env bash
# Server benchmarks (issue "Server"): co-allocation latency on the local backend for 1, 2, 4,
# 8, 16 and 25 components (submit -> barrier released), and durable submissions per second
# over HTTP. Builds the release binary, then runs crates/coalloc-cli/examples/server_bench.rs
# against real `coalloc serve` processes on temporary state directories.
#
#   bash bench/server.sh                    # 10 repetitions, 20,000 submissions, 16 threads
#   bash bench/server.sh --reps 20 --jobs 50000 --threads 32
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin coalloc --bin coalloc-barrier --example server_bench -p coalloc-cli -p coalloc-runtime >&2
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr); $(date -u +%FT%TZ)"
exec target/release/examples/server_bench "$PWD/target/release/coalloc" "$@"
