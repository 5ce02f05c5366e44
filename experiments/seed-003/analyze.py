#!/usr/bin/env python3
"""Seed 003 §6.3: per-experiment statistics and the load-over-time figures.

Reads what `coalloc sim dcs.toml` wrote (results/dcs/runs.csv, jobs/RUN.jsonl,
sites/RUN.jsonl) and the background sweeps' summary.csv files, and writes:

- results/dcs/per_experiment.csv: per experiment, mean and standard deviation of the
  response time, runtime, DUROC overhead and wait (as the thesis's Fig. 6.6 table), the
  duration (makespan), and the most jobs running at once, counted again here from the
  per-job start/end times as a check on the simulator's `max_concurrent` metric;
- results/dcs/timeline.{png,svg}: the system load due to DCS jobs over time, one panel per
  experiment (the thesis's Figs. 6.2-6.6, without the other users' load), rebuilt from the
  per-job log (a job holds its processors from its placement to its end), because the
  simulator's own load samples stop at t = 0 for a batch submitted at t = 0;
- results/compare.{png,svg}: most concurrent jobs and mean response time, the thesis's
  figures beside ours on idle clusters and with a static background.

The statistics use the standard library only; the figures need matplotlib (run.sh
installs it with pip when it is missing).
"""

import csv
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DCS = os.path.join(HERE, "results", "dcs")

# The thesis's own figures (§6.3 text and the Fig. 6.6 table); None where it gives none.
PAPER_MAX_CONCURRENT = {"exp1": 7, "exp2": 5}
PAPER_EXP5 = {"response": (634.7, 335.3), "runtime": (92.4, 15.6), "overhead": (25.3, 6.5)}
# The DUROC overhead we model: the start latency of dcs.toml.
OVERHEAD = 25.3


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def mean_sd(xs):
    if not xs:
        return (float("nan"), float("nan"))
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return (m, 0.0)
    return (m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)))


def max_concurrent(intervals):
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now = most = 0
    for _, d in edges:  # at equal times ends (-1) sort first
        now += d
        most = max(most, now)
    return most


def per_experiment():
    runs = read_csv(os.path.join(DCS, "runs.csv"))
    rows = []
    for r in runs:
        jobs = read_jsonl(os.path.join(DCS, "jobs", r["run"] + ".jsonl"))
        done = [j for j in jobs if j["fate"] == "finished"]
        resp = [j["end"] - j["submit"] for j in done]
        run = [j["end"] - j["start"] for j in done]
        wait = [j["start"] - j["submit"] for j in done]
        mc = max_concurrent([(j["start"], j["end"]) for j in done])
        if mc != int(float(r["max_concurrent"])):
            sys.exit(f"{r['run']}: max_concurrent {r['max_concurrent']} but the jobs give {mc}")
        rm, rs = mean_sd(resp)
        um, us = mean_sd(run)
        wm, ws = mean_sd(wait)
        rows.append({
            "experiment": r["experiment"],
            "jobs_finished": len(done),
            "response_mean": round(rm, 1),
            "response_sd": round(rs, 1),
            "runtime_mean": round(um, 1),
            "runtime_sd": round(us, 1),
            "overhead_mean": OVERHEAD,
            "overhead_sd": 0.0,
            "wait_mean": round(wm, 1),
            "wait_sd": round(ws, 1),
            "duration": round(float(r["makespan"]), 1),
            "max_concurrent": mc,
            "coallocated_share": round(float(r["coallocated_share"]), 3),
        })
    out = os.path.join(DCS, "per_experiment.csv")
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out}")
    for row in rows:
        print("  ", row)
    return runs, rows


def load_steps(jobs, total):
    """DCS load (% of the clusters' processors) as steps: every job holds its processors
    from its placement (the start command; DUROC's overhead runs from there) to its end."""
    edges = {}
    for j in jobs:
        if j["fate"] != "finished" or j["placed"] is None:
            continue
        edges[j["placed"]] = edges.get(j["placed"], 0) + j["size"]
        edges[j["end"]] = edges.get(j["end"], 0) - j["size"]
    t, y, busy = [0.0], [0.0], 0
    for time in sorted(edges):
        busy += edges[time]
        t.append(time)
        y.append(100.0 * busy / total)
    return t, y


def timelines(runs):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # The sites of each run, from the experiment axis of dcs.toml.
    total = {"exp1": 144 + 3 * 64}
    fig, axes = plt.subplots(len(runs), 1, figsize=(9, 2.1 * len(runs)), sharex=True)
    for ax, r in zip(axes, runs):
        jobs = read_jsonl(os.path.join(DCS, "jobs", r["run"] + ".jsonl"))
        t, y = load_steps(jobs, total.get(r["experiment"], 144 + 64))
        ax.step(t, y, where="post", color="tab:blue", lw=1.5)
        ax.set_ylim(0, 105)
        ax.set_ylabel("DCS load %")
        ax.grid(alpha=0.3)
        ax.set_title(
            f"{r['experiment']}: max {int(float(r['max_concurrent']))} jobs at once, "
            f"duration {float(r['makespan']):.0f} s, mean response {float(r['mean_response']):.0f} s",
            fontsize=10, loc="left")
    axes[-1].set_xlabel("time (s)")
    fig.suptitle("Seed 003 §6.3: system load due to DCS jobs (idle clusters)")
    fig.tight_layout()
    for ext in ("png", "svg"):
        p = os.path.join(DCS, "timeline." + ext)
        fig.savefig(p, dpi=110)
        print(f"wrote {p}")
    plt.close(fig)


def compare(rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bg = {}
    for name, exp_col in (("background", "experiment"), ("background-exp1", None)):
        path = os.path.join(HERE, "results", name, "summary.csv")
        if not os.path.exists(path):
            continue
        for r in read_csv(path):
            exp = r[exp_col] if exp_col else "exp1"
            bg[(exp, r["background"])] = r
    exps = [r["experiment"] for r in rows]
    share = "0.25"
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.2))
    x = list(range(len(exps)))
    w = 0.27
    paper = [PAPER_MAX_CONCURRENT.get(e) for e in exps]
    idle = [r["max_concurrent"] for r in rows]
    withbg = [float(bg[(e, share)]["max_concurrent"]) if (e, share) in bg else 0 for e in exps]
    a1.bar([i - w for i in x], [p or 0 for p in paper], w, label="thesis (DAS-2, real background)",
           color="tab:gray")
    for i, p in enumerate(paper):
        if p is None:
            a1.text(i - w, 0.2, "n/a", ha="center", fontsize=8, rotation=90)
    a1.bar(x, idle, w, label="sim, idle clusters", color="tab:blue")
    a1.bar([i + w for i in x], withbg, w, label=f"sim, static background b = {share}",
           color="tab:orange")
    a1.set_xticks(x, exps)
    a1.set_ylabel("most DCS jobs running at once")
    a1.legend(fontsize=8)
    a1.grid(axis="y", alpha=0.3)

    paper_resp = [PAPER_EXP5["response"][0] if e == "exp5" else 0 for e in exps]
    idle_resp = [r["response_mean"] for r in rows]
    bg_resp = [float(bg[(e, share)]["mean_response"]) if (e, share) in bg else 0 for e in exps]
    a2.bar([i - w for i in x], paper_resp, w, label="thesis (only exp5 given)", color="tab:gray")
    a2.bar(x, idle_resp, w, label="sim, idle clusters", color="tab:blue")
    a2.bar([i + w for i in x], bg_resp, w, label=f"sim, static background b = {share}",
           color="tab:orange")
    a2.set_xticks(x, exps)
    a2.set_ylabel("mean response time (s)")
    a2.legend(fontsize=8)
    a2.grid(axis="y", alpha=0.3)
    fig.suptitle("Seed 003 §6.3: the thesis's figures beside the simulation")
    fig.tight_layout()
    for ext in ("png", "svg"):
        p = os.path.join(HERE, "results", "compare." + ext)
        fig.savefig(p, dpi=110)
        print(f"wrote {p}")
    plt.close(fig)


def main():
    runs, rows = per_experiment()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib is missing: no figures (pip install matplotlib)")
        return
    timelines(runs)
    compare(rows)


if __name__ == "__main__":
    main()
