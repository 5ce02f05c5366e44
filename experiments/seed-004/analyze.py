#!/usr/bin/env python3
"""Tables of seed 004 from the simulator's CSVs (standard library only).

- results/table2.csv: seed 004's Table II, the traces as used (jobs of at most 32
  processors; LCG: its first 50,000 jobs), from `coalloc trace stats --json` in
  results/table2/ (written by run.sh).
- results/best_limits.csv: per trace and chain set-up, the TAGS-chain runtime limit with the
  lowest average bounded slowdown (with its standard error σ/√n over the RND seeds, §V-D),
  and, beside it, the limit with the lowest plain slowdown, from
  results/sweep/summary.csv: our stand-in for the document's withheld Table III.
- results/ranking.csv: per trace, the policies ordered by the geometric mean over 1..10
  chains of the average bounded slowdown, from results/compare/summary.csv, with the number
  of chain counts at which each policy is the best (with and without SJF-ideal).
- checks that compare.toml uses the best limits (4 chains, RR) of the sweep.

Prints both tables as Markdown.
"""
import csv
import json
import math
import re
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The results folder: the first argument (run.sh gives its fresh folder), else results/.
RES = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results"
TRACES = ["KTH-SP2", "CTC-SP2", "SDSC-BLUE", "LCG", "SDSC-SP2", "HPC2N", "LANL-CM5"]
TRACE_FILES = {
    "KTH-SP2": "KTH-SP2-1996-2.1-cln", "CTC-SP2": "CTC-SP2-1996-3.1-cln",
    "SDSC-BLUE": "SDSC-BLUE-2000-4.2-cln", "LCG": "LCG-2005-1",
    "SDSC-SP2": "SDSC-SP2-1998-4.2-cln", "HPC2N": "HPC2N-2002-2.2-cln",
    "LANL-CM5": "LANL-CM5-1994-4.1-cln",
}


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def table2():
    out = []
    for trace in TRACES:
        path = RES / "table2" / f"{TRACE_FILES[trace]}.json"
        if not path.exists():
            continue
        d = json.loads(path.read_text())
        m = d["run_time"]["minutes"]
        out.append({
            "trace": trace,
            "jobs_read": d["jobs"]["read"],
            "jobs_kept": f'{d["jobs"]["kept"]} ({d["jobs"]["kept_percent"]:.1f}%)',
            "mean_runtime_min": f'{m["mean"]:.1f}',
            "p25_min": f'{m["p25"]:.1f}',
            "p50_min": f'{m["p50"]:.1f}',
            "p75_min": f'{m["p75"]:.1f}',
            "p99_min": f'{m["p99"]:.1f}',
        })
    with open(RES / "table2.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows(out)
    return out


def sem(r, key):
    v = r.get(f"{key}_sem", "")
    return f"{float(v):.2f}" if v else ""


def best_limits():
    sweep = rows(RES / "sweep" / "summary.csv")
    by = defaultdict(list)
    for r in sweep:
        by[(r["trace"], r["chains"])].append(r)
    out = []
    for (trace, chains), rs in sorted(by.items(), key=lambda kv: (TRACES.index(kv[0][0]), kv[0][1])):
        b = min(rs, key=lambda r: float(r["mean_bounded_slowdown"]))
        s = min(rs, key=lambda r: float(r["mean_slowdown"]))
        worst = max(rs, key=lambda r: float(r["mean_bounded_slowdown"]))
        out.append({
            "trace": trace,
            "chains": chains,
            "best_limit_min": b["limit_min"],
            "bounded_slowdown": f'{float(b["mean_bounded_slowdown"]):.2f}',
            "bounded_slowdown_sem": sem(b, "mean_bounded_slowdown"),
            "wait_s": f'{float(b["mean_wait"]):.0f}',
            "short_wait_s": f'{float(b["short.mean_wait"]):.0f}',
            "long_wait_s": f'{float(b["long.mean_wait"]):.0f}',
            "worst_limit_min": worst["limit_min"],
            "worst_bounded_slowdown": f'{float(worst["mean_bounded_slowdown"]):.2f}',
            "best_limit_plain_slowdown_min": s["limit_min"],
            "plain_slowdown": f'{float(s["mean_slowdown"]):.2f}',
        })
    with open(RES / "best_limits.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows(out)
    return out


def ranking():
    comp = rows(RES / "compare" / "summary.csv")
    by = defaultdict(dict)
    for r in comp:
        by[(r["trace"], r["policy"])][int(r["chains"])] = float(r["mean_bounded_slowdown"])
    out = []
    for trace in TRACES:
        policies = sorted({p for (t, p) in by if t == trace})
        chains = sorted({c for (t, p), v in by.items() if t == trace for c in v})
        wins = defaultdict(int)
        wins_real = defaultdict(int)  # without SJF-ideal, which no real system can run
        for c in chains:
            best = min(policies, key=lambda p: by[(trace, p)].get(c, math.inf))
            wins[best] += 1
            real = [p for p in policies if p != "SJF-ideal"]
            wins_real[min(real, key=lambda p: by[(trace, p)].get(c, math.inf))] += 1
        gm = {p: math.exp(sum(math.log(v) for v in by[(trace, p)].values()) / len(by[(trace, p)]))
              for p in policies}
        for rank, p in enumerate(sorted(policies, key=lambda p: gm[p]), 1):
            d = by[(trace, p)]
            out.append({
                "trace": trace,
                "rank": rank,
                "policy": p,
                "geomean_bounded_slowdown": f"{gm[p]:.2f}",
                "chains_1": f"{d.get(1, math.nan):.1f}",
                "chains_2": f"{d.get(2, math.nan):.1f}",
                "chains_4": f"{d.get(4, math.nan):.2f}",
                "chains_10": f"{d.get(10, math.nan):.2f}",
                "best_at_chain_counts": wins.get(p, 0),
                "best_without_sjf_ideal": wins_real.get(p, 0) if p != "SJF-ideal" else "",
            })
    with open(RES / "ranking.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows(out)
    return out


def check_compare(best):
    """compare.toml's TAGS-chain limits must be the sweep's best at 4 chains (RR)."""
    text = (HERE / "compare.toml").read_text()
    used = dict(zip(TRACES, re.findall(r'\.swf\.gz", \d+, \["(\d+)m"\]\]', text)))
    ok = True
    for b in best:
        if b["chains"] == "4-RR" and used.get(b["trace"]) != b["best_limit_min"]:
            print(f'WARNING: compare.toml uses {used.get(b["trace"])} min for {b["trace"]}, '
                  f'the sweep says {b["best_limit_min"]} min', file=sys.stderr)
            ok = False
    return ok


def markdown(table):
    keys = list(table[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in table]
    return "\n".join(lines)


def main():
    if (RES / "table2").is_dir():
        print(markdown(table2()))
        print()
    best = best_limits()
    print(markdown(best))
    print()
    if (RES / "compare" / "summary.csv").exists():
        print(markdown(ranking()))
        check_compare(best)


if __name__ == "__main__":
    main()
