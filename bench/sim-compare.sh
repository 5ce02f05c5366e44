#!/usr/bin/env bash
# Issue 22's goals, an old and a new build side by side in one session: bench/sim.sh with
# each binary, one after the other, then the same schedules checked with `cmp` (replay
# `--schedule` CSVs, FCFS and EASY of the whole SDSC-BLUE and KTH-SP2; the engine's
# `jobs/*.jsonl` of EASY on SDSC-BLUE and of the periodic KOALA-C policies on KTH-SP2).
#
#   bash bench/sim-compare.sh OLD_BIN NEW_BIN [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1
new=$2
reps=${3:-3}
uptime
echo "== old: $old"
bash bench/sim.sh "$old" "$reps"
echo "== new: $new"
bash bench/sim.sh "$new" "$reps"
uptime
traces=$(cd "${COALLOC_TRACES:-../shared/traces}" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out" bench/sim/easy-sdsc-blue-jsonl.toml' EXIT
for t in SDSC-BLUE-2000-4.2-cln:examples/sites-sdsc-blue.toml KTH-SP2-1996-2.1-cln:examples/sites-kth-sp2.toml; do
    name=${t%%:*}
    sites=${t#*:}
    for policy in fcfs easy; do
        for b in old new; do
            bin=$old
            [ "$b" = new ] && bin=$new
            "$bin" replay "$traces/$name.swf.gz" --sites "$sites" --policy "$policy" \
                --schedule "$out/$b-$name-$policy.csv" --json >/dev/null
        done
        cmp "$out/old-$name-$policy.csv" "$out/new-$name-$policy.csv"
        echo "same schedule: replay $policy $name"
    done
done
sed 's/^seeds = 1/seeds = 1\njobs_jsonl = true/' bench/sim/easy-sdsc-blue.toml \
    >bench/sim/easy-sdsc-blue-jsonl.toml
for b in old new; do
    bin=$old
    [ "$b" = new ] && bin=$new
    "$bin" sim bench/sim/easy-sdsc-blue-jsonl.toml -q -j1 --out "$out/$b-easy" >/dev/null
    "$bin" sim bench/sim/periodic-kth.toml -q -j1 --out "$out/$b-periodic" >/dev/null
done
for run in easy periodic; do
    for f in $(cd "$out/old-$run" && find . -name '*.jsonl' | sort); do
        cmp "$out/old-$run/$f" "$out/new-$run/$f"
        echo "same jobs: sim $run $f"
    done
done
