#!/usr/bin/env bash
# A profile-guided (PGO) release build of `coalloc`, for the simulator's long runs (parameter
# studies, seed-004 sweeps, `whatif`). The replay's engine and core spend much of their time
# waiting on instructions, not data: `valgrind --tool=callgrind --cache-sim=yes` of `coalloc
# replay` EASY SDSC-BLUE counts 4.2 % of instruction fetches missing the first-level cache
# against 0.8 % of data accesses (bench/RESULTS.md, twelfth session). Each instant runs a long
# path through the engine, the core's transaction and the queue policy; PGO lays the hot
# paths out together and moves the cold ones away.
#
#   bash bench/pgo.sh [OUT]      # OUT/coalloc (default target/pgo/coalloc)
#
# Then, for example: bash bench/sim-compare.sh target/release/coalloc target/pgo/coalloc 5
#
# The training runs are not the benchmarks' runs: KTH-SP2 and CTC-SP2 (replays under FCFS,
# EASY and conservative backfilling; the engine's period-driven KOALA-C policies on KTH-SP2),
# while bench/sim.sh measures SDSC-BLUE under EASY. A plain `cargo build --release` is
# unchanged: this build is separate (its own target directory) and optional.
#
# Needs llvm-profdata of rustc's own LLVM version: `rustup component add llvm-tools`.
#
# Environment: COALLOC_TRACES (default ../shared/traces), PGO_TARGET (the build's target
# directory, default target/pgo-build).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/pgo}
target=${PGO_TARGET:-target/pgo-build}
traces=$(cd "${COALLOC_TRACES:-../shared/traces}" && pwd)
sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$sysroot/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
    echo "bench/pgo.sh: no $profdata; install it with: rustup component add llvm-tools" >&2
    exit 2
fi
data=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$data" "$work" bench/sim/traces' EXIT

echo "== 1/3 instrumented build ($target/instrumented)" >&2
RUSTFLAGS="-Cprofile-generate=$data" cargo build --release --bin coalloc --locked \
    --target-dir "$target/instrumented" >&2
bin="$target/instrumented/release/coalloc"

echo "== 2/3 training runs" >&2
kth=$traces/KTH-SP2-1996-2.1-cln.swf.gz
ctc=$traces/CTC-SP2-1996-3.1-cln.swf.gz
for policy in fcfs easy conservative; do
    "$bin" replay "$kth" --sites examples/sites-kth-sp2.toml --policy "$policy" --json >/dev/null
done
cat >"$work/sites-ctc.toml" <<'EOF'
[[site]]
name = "ctc"
processors = 338
EOF
for policy in fcfs easy; do
    "$bin" replay "$ctc" --sites "$work/sites-ctc.toml" --policy "$policy" --json >/dev/null
done
ln -sfn "$traces" bench/sim/traces
"$bin" sim bench/sim/periodic-kth.toml -q -j1 --out "$work/periodic" >/dev/null
"$bin" sim bench/sim/tags-chain-kth.toml -q -j1 --out "$work/tags" >/dev/null

echo "== 3/3 optimized build ($target/optimized)" >&2
"$profdata" merge -o "$work/merged.profdata" "$data"
RUSTFLAGS="-Cprofile-use=$work/merged.profdata" cargo build --release --bin coalloc --locked \
    --target-dir "$target/optimized" >&2
mkdir -p "$out"
cp "$target/optimized/release/coalloc" "$out/coalloc"
echo "$out/coalloc"
