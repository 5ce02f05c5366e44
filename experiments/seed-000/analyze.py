#!/usr/bin/env python3
"""Seed 000 §5: the paper's figures 2-5 from what `coalloc sim` wrote.

Reads results/koala/runs.csv (koala.toml: testbeds x seeds, with a metric column per job
subset `sSIZEcCOMPONENTSp`, e.g. `s72c8h.mean_placement_time` for size-72 jobs of 8
components and high priority) and results/utilization/sites/r000-s1.jsonl, and writes:

- results/overall.csv: per testbed, every job together (and by priority);
- results/cells.csv: per testbed and job kind (size, components, priority): jobs, the
  failure percentage (aborted runs per job, x 100: a job may fail several times, as in the
  paper's Fig. 3), the share of jobs that used co-allocation (Fig. 4), and the mean
  placement time and start delay (Fig. 5) with their spread over the seeds;
- results/fig2_utilization, fig3_failures, fig4_coallocation, fig5_placement (.png, .svg).

Statistics use the standard library only; the figures need matplotlib (run.sh installs it
with pip when it is missing).
"""

import csv
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The results folder: the first argument (run.sh gives its fresh folder), else results/.
RES = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results")
TESTBEDS = ["none", "stable", "unstable", "faults-only", "outage-only"]
FIG_TESTBEDS = ["none", "stable", "unstable"]
CELLS = [(36, 3), (36, 4), (72, 3), (72, 4), (72, 6), (72, 8)]
PRIOS = [("h", "high"), ("l", "low")]


def mean_sd(xs):
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, sd


def cells():
    runs = list(csv.DictReader(open(os.path.join(RES, "koala", "runs.csv"), newline="")))
    out = []
    for tb in TESTBEDS:
        rs = [r for r in runs if r["testbed"] == tb]
        for size, comps in CELLS:
            for p, prio in PRIOS:
                key = f"s{size}c{comps}{p}"
                col = lambda m: [float(r[f"{key}.{m}"]) for r in rs]
                jobs = sum(col("jobs"))
                fails = sum(col("submit_failures")) + sum(col("completion_failures"))
                fin = col("finished")
                coal = sum(c * f for c, f in zip(col("coallocated_share"), fin)) / max(sum(fin), 1)
                # Means over all finished jobs of all seeds (weighted by each seed's count);
                # the spread is that of the per-seed means.
                pl, sd_pl = mean_sd(col("mean_placement_time"))
                sdl, sd_sdl = mean_sd(col("mean_start_delay"))
                wpl = sum(a * f for a, f in zip(col("mean_placement_time"), fin)) / max(sum(fin), 1)
                wsd = sum(a * f for a, f in zip(col("mean_start_delay"), fin)) / max(sum(fin), 1)
                out.append({
                    "testbed": tb, "size": size, "components": comps, "priority": prio,
                    "seeds": len(rs), "jobs": int(jobs), "finished": int(sum(fin)),
                    "failure_pct": round(100.0 * fails / jobs, 1) if jobs else 0.0,
                    "coallocated_pct": round(100.0 * coal, 1),
                    "placement_time": round(wpl, 0), "placement_time_seed_sd": round(sd_pl, 0),
                    "start_delay": round(wsd, 0), "start_delay_seed_sd": round(sd_sdl, 0),
                })
    path = os.path.join(RES, "cells.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows(out)
    print(f"wrote {path}")
    return out


def overall():
    """Per testbed, every job together: results/overall.csv."""
    rows = list(csv.DictReader(open(os.path.join(RES, "koala", "summary.csv"), newline="")))
    out = []
    for r in rows:
        f = lambda k: float(r[k])
        out.append({
            "testbed": r["testbed"], "seeds": r["seeds"], "finished": f("finished"),
            "unfinished": f("unfinished"), "refused": f("refused"),
            "failure_pct": round(100 * (f("submit_failures") + f("completion_failures")) / f("jobs"), 1),
            "coallocated_pct": round(100 * f("coallocated_share"), 1),
            "placement_time": round(f("mean_placement_time")),
            "start_delay": round(f("mean_start_delay")),
            "high.placement_time": round(f("high.mean_placement_time")),
            "low.placement_time": round(f("low.mean_placement_time")),
            "high.start_delay": round(f("high.mean_start_delay")),
            "low.start_delay": round(f("low.mean_start_delay")),
            "high.failure_pct": round(100 * (f("high.submit_failures") + f("high.completion_failures")) / f("high.jobs"), 1),
            "low.failure_pct": round(100 * (f("low.submit_failures") + f("low.completion_failures")) / f("low.jobs"), 1),
            "preemptions": f("preemptions"),
            "total_load_pct": round(100 * f("total_load"), 1),
            "koala_running_pct": round(100 * f("global_load"), 1),
            "koala_held_pct": round(100 * f("wasted"), 1),
            "makespan_h": round(f("makespan") / 3600, 1),
        })
    path = os.path.join(RES, "overall.csv")
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows(out)
    print(f"wrote {path}")
    for o in out:
        print("  ", o)


def bars(rows, metric, ylabel, title, fname, testbeds, log=False):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = metric if isinstance(metric, list) else [metric]
    fig, axes = plt.subplots(len(metrics), len(testbeds),
                             figsize=(4.6 * len(testbeds), 3.6 * len(metrics)),
                             sharey="row", squeeze=False)
    labels = [f"{s}/{c}" for s, c in CELLS]
    x = list(range(len(CELLS)))
    w = 0.38
    for i, (m, yl) in enumerate(zip(metrics, ylabel if isinstance(ylabel, list) else [ylabel])):
        for j, tb in enumerate(testbeds):
            ax = axes[i][j]
            for k, (_, prio) in enumerate(PRIOS):
                ys = [next(r[m] for r in rows if r["testbed"] == tb and r["size"] == s
                           and r["components"] == c and r["priority"] == prio)
                      for s, c in CELLS]
                ax.bar([xx + (k - 0.5) * w for xx in x], ys, w, label=f"{prio} priority",
                       color=["tab:red", "tab:blue"][k])
            ax.set_xticks(x, labels)
            ax.set_xlabel("job size / number of components")
            if j == 0:
                ax.set_ylabel(yl)
            if log:
                ax.set_yscale("log")
            ax.set_title(f"testbed: {tb}", fontsize=10)
            ax.grid(axis="y", alpha=0.3)
            if i == 0 and j == 0:
                ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    for ext in ("png", "svg"):
        p = os.path.join(RES, f"{fname}.{ext}")
        fig.savefig(p, dpi=100)
        print(f"wrote {p}")
    plt.close(fig)


def utilization():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = os.path.join(RES, "utilization", "sites", "r000-s1.jsonl")
    by_time = {}
    for line in open(path):
        s = json.loads(line)
        t = by_time.setdefault(s["time"], {"koala": 0, "others": 0, "total": 0, "down": 0})
        total = s["coalloc"] + s["others"] + s["idle"]
        t["koala"] += s["coalloc"]
        t["others"] += s["others"]
        t["total"] += total
    # fs3 (site 3) is down from 8 h on (utilization.toml): the paper's 310 -> 250
    # processors; count only the processors KOALA can use.
    for line in open(path):
        s = json.loads(line)
        if s["site"] == 3 and s["time"] >= 8 * 3600 * 1000:
            by_time[s["time"]]["total"] -= s["coalloc"] + s["others"] + s["idle"]
    times = sorted(by_time)
    last_busy = max(t for t in times if by_time[t]["koala"] > 0)
    times = [t for t in times if t <= last_busy]
    mins = [t / 60000.0 for t in times]
    koala = [100.0 * by_time[t]["koala"] / by_time[t]["total"] for t in times]
    others = [100.0 * by_time[t]["others"] / by_time[t]["total"] for t in times]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    ax.stackplot(mins, others, koala, labels=["other users (local jobs)", "KOALA jobs (held + running)"],
                 colors=["tab:gray", "tab:blue"], alpha=0.8)
    total = [a + b for a, b in zip(koala, others)]
    ax.plot(mins, total, color="black", lw=0.6)
    ax.axvline(8 * 60, color="tab:red", ls="--", lw=1)
    ax.text(8 * 60 + 10, 95, "fs3 down: 310 → 250 processors", color="tab:red", fontsize=8, va="top")
    ax.set_ylim(0, 100)
    ax.set_xlabel("time (minutes)")
    ax.set_ylabel("utilization (%)")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    mean_total = sum(total) / len(total)
    above80 = 100.0 * sum(1 for x in total if x >= 80) / len(total)
    ax.set_title(f"Seed 000 Fig. 2 (sim, unstable testbed, seed 1): mean {mean_total:.0f} %, "
                 f"≥ 80 % in {above80:.0f} % of the 5-min samples", fontsize=10)
    fig.tight_layout()
    for ext in ("png", "svg"):
        p = os.path.join(RES, f"fig2_utilization.{ext}")
        fig.savefig(p, dpi=100)
        print(f"wrote {p}")
    plt.close(fig)
    print(f"utilization: mean {mean_total:.1f} %, max {max(total):.1f} %, "
          f">= 80 % in {above80:.1f} % of samples, KOALA mean {sum(koala) / len(koala):.1f} %")


def main():
    overall()
    rows = cells()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib is missing: no figures (pip install matplotlib)")
        return
    utilization()
    bars(rows, "failure_pct", "failures per 100 jobs",
         "Seed 000 Fig. 3 (sim): failures of jobs by size, components and priority",
         "fig3_failures", ["stable", "unstable"])
    bars(rows, "coallocated_pct", "jobs that used co-allocation (%)",
         "Seed 000 Fig. 4 (sim): share of jobs that used co-allocation",
         "fig4_coallocation", FIG_TESTBEDS)
    bars(rows, ["placement_time", "start_delay"], ["mean placement time (s)", "mean start delay (s)"],
         "Seed 000 Fig. 5 (sim): (a) placement times and (b) start delays",
         "fig5_placement", FIG_TESTBEDS)


if __name__ == "__main__":
    main()
