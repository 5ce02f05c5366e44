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
  per-job log (a job holds its processors from its placement to its end);
- results/background/per_load.csv: the dynamic-background sweep (background.toml) per
  experiment and other users' load Ul: mean and standard error (σ/√n over the seeds) of
  the most concurrent DCS jobs, the duration, the mean response time and the measured
  local load;
- results/background-timeline/timeline.{png,svg}: one run per experiment at Ul = 0.2
  (seed 1; background-timeline.toml, checked equal to its background.toml twin), DCS's
  load and the other users' load over time (the thesis's Figs. 6.2-6.6 with background);
- results/compare.{png,svg}: most concurrent jobs and mean response time, the thesis's
  figures beside ours on idle clusters and at every background load.

The statistics use the standard library only; the figures need matplotlib (run.sh
installs it with pip when it is missing).
"""

import csv
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The results folder: the first argument (run.sh gives its fresh folder), else results/.
RES = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results")
DCS = os.path.join(RES, "dcs")
BG = os.path.join(RES, "background")

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


def per_load():
    """The dynamic-background sweep (background.toml): per experiment and local load, the
    mean over the seeds and its standard error (σ/√n) of the most concurrent DCS jobs, the
    duration and the mean response time, and the measured local load."""
    path = os.path.join(BG, "runs.csv")
    if not os.path.exists(path):
        return []
    groups = {}
    for r in read_csv(path):
        groups.setdefault((r["experiment"], r["ul"]), []).append(r)
    rows = []
    for (exp, load), rs in groups.items():
        row = {"experiment": exp, "ul": load, "seeds": len(rs)}
        for key, col in (("max_concurrent", "max_concurrent"), ("duration", "makespan"),
                         ("response", "mean_response"), ("measured_local_load", "local_load")):
            xs = [float(r[col]) for r in rs if r.get(col, "") != ""]
            m, sd = mean_sd(xs)
            row[key + "_mean"] = round(m, 3)
            row[key + "_se"] = round(sd / math.sqrt(len(xs)), 3) if xs else float("nan")
        row["max_concurrent_min"] = min(int(float(r["max_concurrent"])) for r in rs)
        row["max_concurrent_max"] = max(int(float(r["max_concurrent"])) for r in rs)
        row["finished_min"] = min(int(float(r["finished"])) for r in rs)
        rows.append(row)
    out = os.path.join(BG, "per_load.csv")
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out}")
    for row in rows:
        print("  ", row)
    return rows


def compare(rows, bg):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exps = [r["experiment"] for r in rows]
    loads = sorted({r["ul"] for r in bg}, key=float)
    at = {(r["experiment"], r["ul"]): r for r in bg}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.5))
    x = list(range(len(exps)))
    n = 2 + len(loads)
    w = 0.8 / n
    off = lambda i: (i - (n - 1) / 2) * w
    paper = [PAPER_MAX_CONCURRENT.get(e) for e in exps]
    a1.bar([i + off(0) for i in x], [p or 0 for p in paper], w,
           label="thesis (DAS-2, real background)", color="tab:gray")
    for i, p in enumerate(paper):
        if p is None:
            a1.text(i + off(0), 0.2, "n/a", ha="center", fontsize=7, rotation=90)
    a1.bar([i + off(1) for i in x], [r["max_concurrent"] for r in rows], w,
           label="sim, idle clusters", color="tab:blue")
    a2.bar([i + off(0) for i in x],
           [PAPER_EXP5["response"][0] if e == "exp5" else 0 for e in exps], w,
           label="thesis (only exp5 given)", color="tab:gray")
    a2.bar([i + off(1) for i in x], [r["response_mean"] for r in rows], w,
           label="sim, idle clusters", color="tab:blue")
    cmap = plt.get_cmap("Oranges")
    for k, load in enumerate(loads):
        c = cmap(0.35 + 0.6 * k / max(1, len(loads) - 1))
        rs = [at.get((e, load)) for e in exps]
        for ax, key in ((a1, "max_concurrent"), (a2, "response")):
            ax.bar([i + off(2 + k) for i in x], [r[key + "_mean"] if r else 0 for r in rs], w,
                   yerr=[r[key + "_se"] if r else 0 for r in rs], capsize=2, color=c,
                   label=f"sim, other users' load Ul = {load} (mean ± σ/√n)")
    for ax, label in ((a1, "most DCS jobs running at once"), (a2, "mean response time (s)")):
        ax.set_xticks(x, exps)
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Seed 003 §6.3: the thesis's figures beside the simulation, "
                 "idle and with a dynamic background")
    fig.tight_layout()
    for ext in ("png", "svg"):
        p = os.path.join(RES, "compare." + ext)
        fig.savefig(p, dpi=110)
        print(f"wrote {p}")
    plt.close(fig)


def background_timelines(load="0.2", seed="1"):
    """The thesis's Figs. 6.2-6.6 with their background: per experiment, one run's load
    over time, DCS's and the other users' (the simulator's samples, every 20 s), as a share
    of all processors."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tl = os.path.join(RES, "background-timeline")
    if not os.path.exists(os.path.join(tl, "runs.csv")):
        return
    runs = read_csv(os.path.join(tl, "runs.csv"))
    twins = {r["experiment"]: r for r in read_csv(os.path.join(BG, "runs.csv"))
             if r["ul"] == load and r["seed"] == seed}
    for r in runs:
        t = twins[r["experiment"]]
        for key in ("max_concurrent", "makespan", "mean_response", "finished"):
            if r[key] != t[key]:
                sys.exit(f"{r['experiment']}: {key} {r[key]} in background-timeline, "
                         f"{t[key]} in background (Ul = {load}, seed {seed})")
    fig, axes = plt.subplots(len(runs), 1, figsize=(9, 2.1 * len(runs)), sharex=True)
    for ax, r in zip(axes, runs):
        total = 144 + 3 * 64 if r["experiment"] == "exp1" else 144 + 64
        jobs = read_jsonl(os.path.join(tl, "jobs", r["run"] + ".jsonl"))
        at = min(j["submit"] for j in jobs)
        # Both loads from the simulator's samples (ms; the per-job log is in seconds): what
        # the clusters' processors were doing, DCS's components or other users' jobs.
        mine, others = {}, {}
        for smp in read_jsonl(os.path.join(tl, "sites", r["run"] + ".jsonl")):
            mine[smp["time"]] = mine.get(smp["time"], 0) + smp["coalloc"]
            others[smp["time"]] = others.get(smp["time"], 0) + smp["others"]
        ts = sorted(others)
        ax.step([v / 1000 - at for v in ts], [100.0 * mine[v] / total for v in ts],
                where="post", color="tab:blue", lw=1.5, label="DCS")
        ax.step([v / 1000 - at for v in ts], [100.0 * others[v] / total for v in ts],
                where="post", color="tab:orange", lw=1, label="other users")
        ax.set_xlim(-600, max(j["end"] for j in jobs if j["end"]) - at + 300)
        ax.set_ylim(0, 105)
        ax.set_ylabel("load %")
        ax.grid(alpha=0.3)
        ax.set_title(
            f"{r['experiment']}: max {int(float(r['max_concurrent']))} jobs at once, "
            f"duration {float(r['makespan']):.0f} s, mean response {float(r['mean_response']):.0f} s",
            fontsize=10, loc="left")
    axes[0].legend(fontsize=8, loc="upper right")
    axes[-1].set_xlabel("time after the batch's submission (s)")
    fig.suptitle(f"Seed 003 §6.3: DCS and other users' load (Ul = {load}, seed {seed})")
    fig.tight_layout()
    for ext in ("png", "svg"):
        p = os.path.join(tl, "timeline." + ext)
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
    bg = per_load()
    compare(rows, bg)
    background_timelines()


if __name__ == "__main__":
    main()
