#!/usr/bin/env bash
# coalloc's trace replay side by side with AccaSim 1.1.3, same machine, same session: both
# simulators on KTH-SP2 (100 processors) and SDSC-BLUE (1,152) under FCFS and EASY, timed,
# and their schedules compared job by job (issue "Simulator": goal >= 100x the jobs per
# second of AccaSim; FCFS schedules identical job by job).
#
#   bash bench/accasim.sh [REPS]        # REPS repetitions of every measurement (default 2)
#
# Environment:
#   ACCASIM_VENV   the venv for AccaSim (default ${XDG_CACHE_HOME:-~/.cache}/coalloc-accasim-venv;
#                  created with `pip install accasim==1.1.3` when missing)
#   OUT            where schedules, JSON and the summary go (default /tmp/coalloc-accasim)
#   TRACES         folder of the traces (default ../shared/traces)
#   BLUE_FCFS_TIMEOUT  AccaSim's FCFS on SDSC-BLUE is stopped after this many seconds
#                  (AccaSim's own timeout; default 300, 0 for none): it completed about a
#                  quarter of the trace in 300 s under load, as its FIFO dispatcher re-sorts and
#                  walks the whole queue at every time point and the FCFS queue is long. Under FCFS a job's
#                  start depends only on the jobs before it, so the jobs it completed by then
#                  are compared with coalloc's whole run.
#   BLUE_EASY_FIRST  EASY on SDSC-BLUE (both simulators) runs on the first N job lines only
#                  (default 50000; empty for the whole trace, which AccaSim had not finished
#                  after 11 minutes under load)
#
# What is timed: coalloc's `seconds` (the replay on the core; reading and parsing the gzipped
# trace excluded) and, around it, the whole process (`/usr/bin/time`: wall, user+sys CPU,
# parse included). AccaSim: its own measure of its simulation loop, which reads and parses the
# SWF file as it goes (import, set-up and our CSV writing excluded), and the CPU time of that
# call. AccaSim's FCFS runs with --same-instant (one more dispatching step at an instant where
# a zero-runtime job freed its processors; see bench/accasim_run.py). The textbook-EASY
# dispatcher written for AccaSim (bench/accasim_run.py, policy easy-textbook) runs once per
# trace as a control for the EASY comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-2}
venv=${ACCASIM_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/coalloc-accasim-venv}
out=${OUT:-/tmp/coalloc-accasim}
traces=${TRACES:-../shared/traces}
blue_fcfs_timeout=${BLUE_FCFS_TIMEOUT:-300}
blue_easy_first=${BLUE_EASY_FIRST-50000}
mkdir -p "$out"

cargo build --release --bin coalloc >&2
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("accasim") == "1.1.3"' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet accasim==1.1.3
fi
py="$venv/bin/python"

echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/{print $2}') GiB"
echo "python: $("$py" --version), accasim $("$py" -c 'import importlib.metadata as m; print(m.version("accasim"))')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

results="$out/results.jsonl"
: > "$results"

# coalloc NAME TRACE SITES POLICY FIRST REP
run_coalloc() {
    local name=$1 trace=$2 sites=$3 policy=$4 first=$5 rep=$6
    local tag="$name-$policy${first:+-first$first}"
    local csv="$out/$tag-coalloc.csv" json="$out/$tag-coalloc-$rep.json" timef="$out/$tag-coalloc-$rep.time"
    /usr/bin/time -f '%e %U %S %M' -o "$timef" target/release/coalloc replay "$trace" \
        --sites "$sites" --policy "$policy" ${first:+--first "$first"} --json --schedule "$csv" > "$json"
    python3 - "$json" "$timef" "$tag" "$rep" "$(cut -d' ' -f1 /proc/loadavg)" >> "$results" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1])); wall, user, sys_, rss = open(sys.argv[2]).read().split()
print(json.dumps({"sim": "coalloc", "tag": sys.argv[3], "rep": int(sys.argv[4]), "jobs": j["jobs"],
    "completed": j["completed"], "seconds": j["seconds"], "wall": float(wall),
    "cpu": float(user) + float(sys_), "rss_kb": int(rss), "load": float(sys.argv[5])}))
EOF
    tail -n1 "$results" >&2
}

# accasim NAME TRACE PROCS POLICY FIRST REP [EXTRA...]
run_accasim() {
    local name=$1 trace=$2 procs=$3 policy=$4 first=$5 rep=$6
    shift 6
    local tag="$name-$policy${first:+-first$first}"
    local csv="$out/$tag-accasim.csv" json="$out/$tag-accasim-$rep.json"
    local extra=()
    [ "$policy" = fcfs ] && extra+=(--same-instant)
    "$py" bench/accasim_run.py "$trace" --processors "$procs" --policy "$policy" \
        ${first:+--first "$first"} "${extra[@]}" "$@" --schedule "$csv" --workdir "$out/work" --json \
        > "$json" || true
    python3 - "$json" "$tag" "$rep" "$(cut -d' ' -f1 /proc/loadavg)" >> "$results" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print(json.dumps({"sim": "accasim", "tag": sys.argv[2], "rep": int(sys.argv[3]), "jobs": j["jobs"],
    "completed": j["completed"], "seconds": j["accasim_seconds"], "wall": j["wall_seconds"],
    "cpu": j["cpu_seconds"], "timeout": j["timeout"], "load": float(sys.argv[4])}))
EOF
    tail -n1 "$results" >&2
}

kth="$traces/KTH-SP2-1996-2.1-cln.swf.gz"
blue="$traces/SDSC-BLUE-2000-4.2-cln.swf.gz"
for rep in $(seq 1 "$reps"); do
    echo "== repetition $rep" >&2
    for policy in fcfs easy; do
        run_coalloc kth "$kth" examples/sites-kth-sp2.toml "$policy" "" "$rep"
        run_accasim kth "$kth" 100 "$policy" "" "$rep"
    done
    run_coalloc blue "$blue" examples/sites-sdsc-blue.toml fcfs "" "$rep"
    if [ "$blue_fcfs_timeout" != 0 ]; then
        run_accasim blue "$blue" 1152 fcfs "" "$rep" --timeout "$blue_fcfs_timeout"
    else
        run_accasim blue "$blue" 1152 fcfs "" "$rep"
    fi
    run_coalloc blue "$blue" examples/sites-sdsc-blue.toml easy "$blue_easy_first" "$rep"
    run_accasim blue "$blue" 1152 easy "$blue_easy_first" "$rep"
done
# The control, once per trace: AccaSim with the textbook-EASY dispatcher.
run_accasim kth "$kth" 100 easy-textbook "" 1 --same-instant
run_accasim blue "$blue" 1152 easy-textbook "$blue_easy_first" 1 --same-instant
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "## job-by-job comparisons (A = coalloc, B = AccaSim)"
compare() {
    echo "-- $1: $2 vs $3"
    python3 bench/accasim_compare.py "$out/$2.csv" "$out/$3.csv" --label-a coalloc --label-b accasim || true
}
compare "KTH-SP2 FCFS" kth-fcfs-coalloc kth-fcfs-accasim
compare "SDSC-BLUE FCFS (AccaSim: the jobs it completed before its timeout, last repetition)" blue-fcfs-coalloc blue-fcfs-accasim
compare "KTH-SP2 EASY (AccaSim's)" kth-easy-coalloc kth-easy-accasim
compare "KTH-SP2 EASY (textbook EASY in AccaSim)" kth-easy-coalloc kth-easy-textbook-accasim
compare "SDSC-BLUE EASY (AccaSim's)" "blue-easy${blue_easy_first:+-first$blue_easy_first}-coalloc" "blue-easy${blue_easy_first:+-first$blue_easy_first}-accasim"
compare "SDSC-BLUE EASY (textbook EASY in AccaSim)" "blue-easy${blue_easy_first:+-first$blue_easy_first}-coalloc" "blue-easy-textbook${blue_easy_first:+-first$blue_easy_first}-accasim"

echo
echo "## jobs per second"
python3 - "$results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| simulator | run | rep | jobs | time (s) | jobs/s | wall (s) | CPU (s) | load |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for r in rows:
    # A run stopped at its timeout: the rate is of the jobs it completed.
    note = " (stopped at timeout, %d completed)" % r["completed"] if r.get("timeout") else ""
    done = r["completed"] if r.get("timeout") else r["jobs"]
    print(f"| {r['sim']} | {r['tag']}{note} | {r['rep']} | {r['jobs']:,} | {r['seconds']:.3f} |"
          f" {done / r['seconds']:,.0f} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['load']:.1f} |")
print()
print("ratio per repetition, coalloc / AccaSim jobs per second: (a) coalloc's replay time (from")
print("the start of the trace's reading, which overlaps the replay) vs AccaSim's loop time;")
print("(b) coalloc's whole process vs AccaSim's loop;")
print("(c) CPU seconds, coalloc's whole process vs AccaSim's loop")
acc = {(r["tag"], r["rep"]): r for r in rows if r["sim"] == "accasim" and not r.get("timeout")}
for r in rows:
    a = acc.get((r["tag"], r["rep"])) if r["sim"] == "coalloc" else None
    if a and a["jobs"] == r["jobs"]:
        print(f"  {r['tag']} rep {r['rep']}: (a) {a['seconds'] / r['seconds']:,.0f}x"
              f"  (b) {a['seconds'] / r['wall']:,.0f}x  (c) {a['cpu'] / r['cpu']:,.0f}x")
EOF
