#!/usr/bin/env bash
# What a whole `coalloc replay` asks of the instruction cache, for each build given: the
# instructions run and the first-level instruction cache's misses (`valgrind --tool=callgrind
# --cache-sim=yes`, its model of a 32 KB, 8-way cache), and the hot code, the 64-byte lines
# of machine code run about once per job or more (bench/icache.py on a `--dump-instr=yes`
# profile). Deterministic: the counts do not depend on the machine's load, so builds can be
# compared while other work runs; time them with bench/replay-pair.sh on an idle machine.
#
#   bash bench/icache.sh BIN...
#
# Environment: TRACE (default ../shared/traces/SDSC-BLUE-2000-4.2-cln.swf.gz), SITES (default
# examples/sites-sdsc-blue.toml), POLICY (default easy), TOP (functions listed by hot lines,
# default 0).
set -euo pipefail
cd "$(dirname "$0")/.."
trace=${TRACE:-../shared/traces/SDSC-BLUE-2000-4.2-cln.swf.gz}
sites=${SITES:-examples/sites-sdsc-blue.toml}
policy=${POLICY:-easy}
command -v valgrind >/dev/null || { echo "icache.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for bin in "$@"; do
    run=("$bin" replay "$trace" --sites "$sites" --policy "$policy" --json)
    valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file="$work/cs" "${run[@]}" \
        >/dev/null 2>"$work/cs.err"
    valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$work/in" "${run[@]}" \
        >/dev/null 2>/dev/null
    ir=$(sed -n 's/.*I *refs: *//p' "$work/cs.err")
    miss=$(sed -n 's/.*I1 *misses: *//p' "$work/cs.err")
    echo "== $bin"
    echo "instructions $ir, I1 misses $miss"
    python3 bench/icache.py "$work/in" 232000 "${TOP:-0}"
done
