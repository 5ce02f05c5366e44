#!/usr/bin/env bash
# The scheduling core's benchmarks (coalloc-core/benches): placement over 1,000 sites, one
# scheduling pass over 10,000 queued jobs, memory per queued job. Prints every figure, then
# the goals with PASS/FAIL. Results and commands are recorded in bench/RESULTS.md.
#
#   bash bench/core.sh             # everything (about 5 minutes on 2 cores, build included)
#   bash bench/core.sh --quick     # criterion's --quick: fewer samples
#
# Extra arguments go to the criterion benches (placement, pass). CARGO_TARGET_DIR is
# honoured; COALLOC_BENCH_JOBS / COALLOC_BENCH_SITES / COALLOC_BENCH_POLICIES change the
# sizes (see the benches' documentation).
set -euo pipefail
cd "$(dirname "$0")/.."

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {
    local bench=$1
    shift
    echo "== cargo bench -p coalloc-core --bench $bench $*" >&2
    cargo bench -p coalloc-core --bench "$bench" -- "$@" 2>&1 | tee "$out/$bench.txt" >&2
}

run placement "$@"
run pass "$@"
run memory

# Criterion prints `name time: [low mid high]`, or the name on the line before when it is
# long. Print `name: mid unit`.
figures() {
    awk '
        /^(Benchmarking|Found|  [0-9]|Warming|Collecting|Analyzing)/ { next }
        /time:/ {
            name = $0
            sub(/[[:space:]]*time:.*/, "", name)
            if (name == "") name = prev
            match($0, /\[[^]]*\]/)
            split(substr($0, RSTART + 1, RLENGTH - 2), v, " ")
            printf "%s: %s %s\n", name, v[3], v[4]
            next
        }
        /^[^[:space:]]/ { prev = $0 }
    ' "$1"
}

# A criterion figure in milliseconds.
to_ms() {
    awk -v x="$1" -v u="$2" 'BEGIN {
        f = (u == "ns") ? 1e-6 : (u == "µs" || u == "us") ? 1e-3 : (u == "ms") ? 1 : 1000
        printf "%.3f", x * f
    }'
}

echo
echo "== figures"
figures "$out/placement.txt"
figures "$out/pass.txt"
grep -h '^fpfs:\|^easy:\|^no `easy`' "$out/pass.txt" || true
grep -h '^memory' "$out/memory.txt"

echo
echo "== goals"
echo "placement: no goal given"
line=$(figures "$out/pass.txt" | grep '/fpfs/none fit:' || true)
if [ -n "$line" ]; then
    set -- ${line##*: }
    ms=$(to_ms "$1" "$2")
    verdict=$(awk -v m="$ms" 'BEGIN { print (m <= 20) ? "PASS" : "FAIL" }')
    echo "FPFS pass, none fit: $ms ms (goal <= 20 ms): $verdict"
fi
line=$(figures "$out/pass.txt" | grep '/fpfs/some fit:' || true)
if [ -n "$line" ]; then
    set -- ${line##*: }
    ms=$(to_ms "$1" "$2")
    verdict=$(awk -v m="$ms" 'BEGIN { print (m <= 20) ? "PASS" : "FAIL" }')
    echo "FPFS pass, some fit: $ms ms (goal <= 20 ms): $verdict"
fi
grep -h 'bytes per queued job (' "$out/memory.txt" |
    sed -E 's/^memory\/([^:]*): ([0-9]+) bytes per queued job.*goal <= ([0-9]+): ([A-Z]+).*/memory per queued job, \1: \2 B (goal <= \3 B): \4/'
