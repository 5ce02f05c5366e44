#!/usr/bin/env bash
# Several builds' whole `coalloc replay` processes, interleaved: N rounds, each build run once
# per round (so that a slow spell of the machine falls on every build alike), then the
# median wall, user and system seconds of each (`/usr/bin/time`; parse included).
#
#   bash bench/replay-pair.sh N BIN...
#
# Environment: TRACE (default ../shared/traces/SDSC-BLUE-2000-4.2-cln.swf.gz), SITES
# (default examples/sites-sdsc-blue.toml), POLICY (default easy).
set -euo pipefail
cd "$(dirname "$0")/.."
n=$1
shift
trace=${TRACE:-../shared/traces/SDSC-BLUE-2000-4.2-cln.swf.gz}
sites=${SITES:-examples/sites-sdsc-blue.toml}
policy=${POLICY:-easy}
times=$(mktemp)
trap 'rm -f "$times"' EXIT
for _ in $(seq "$n"); do
    for bin in "$@"; do
        /usr/bin/time -a -o "$times" -f "$bin %e %U %S" \
            "$bin" replay "$trace" --sites "$sites" --policy "$policy" --json >/dev/null
    done
done
python3 - "$times" <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    bin, wall, user, sys_ = line.split()
    runs[bin].append((float(wall), float(user), float(sys_)))
for bin, v in runs.items():
    med = lambda i: statistics.median(x[i] for x in v)
    print(f"{bin} wall {med(0):.3f} user {med(1):.3f} sys {med(2):.3f} "
          f"u+s {statistics.median(x[1] + x[2] for x in v):.3f} (n={len(v)})")
EOF
