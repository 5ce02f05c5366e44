#!/usr/bin/env python3
"""Seed 002 §4.2: our microbenchmarks beside the document's figures.

Reads results/jobs.csv, results/processes.csv and results/events.csv (microbench.py) and
paper.csv (the document's numbers, each with where it comes from), and writes:

- results/summary.csv: per figure and x (processes for Fig. 2, components for Fig. 4) the
  median, min and max over the repetitions of submit -> barrier released, the median of
  submit -> last process out of the barrier, the median of the mean per-process barrier wait
  (in -> out), and that wait over submit -> last process out (the kM/2 model predicts
  (M - 1) / 2M);
- results/fig3_breakdown.csv: where the time of a one-process job goes (medians);
- results/fits.csv: straight lines through every job's latency, per process (Fig. 2) and per
  component (Fig. 4);
- results/fig2_processes, fig3_breakdown, fig4_subjobs, fig5_timeline (.png and .svg).

Statistics use the standard library; the figures need matplotlib.
"""
import csv, os, statistics, sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The results folder: the first argument (run.sh gives its fresh folder), else results/.
RES = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results")


def rows(name):
    with open(os.path.join(RES, name), newline="") as f:
        return list(csv.DictReader(f))


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def group(jobs, figure, key):
    out = {}
    for j in jobs:
        if j["figure"] == figure:
            out.setdefault(int(j[key]), []).append(j)
    return dict(sorted(out.items()))


def summary(jobs):
    out = []
    for figure, key in (("fig2", "processes"), ("fig4", "components")):
        for x, js in group(jobs, figure, key).items():
            total = [float(j["release"]) for j in js]
            wait = [float(j["mean_wait"]) for j in js]
            m = int(js[0]["components"])
            out.append({
                "figure": figure, "x": x, "reps": len(js),
                "release_ms_median": med(total), "release_ms_min": min(total),
                "release_ms_max": max(total),
                "last_out_ms_median": med([float(j["last_out"]) for j in js]),
                "mean_wait_ms_median": med(wait),
                "wait_over_total": med([float(j["mean_wait"]) / float(j["last_out"]) for j in js]),
                "model_wait_over_total": (m - 1) / (2 * m),
            })
    return out


# The phases of a one-process job, from the server's timestamps and the process's own.
PHASES = [
    ("submit -> placed (journal, queue, placement)", "submit", "placed"),
    ("placed -> launch sent to the local launcher", "placed", "submitted"),
    ("launch -> process running (launcher's fork, exec of bash)", "submitted", "in"),
    ("process -> checked in (exec of coalloc barrier, HTTP check-in)", "in", "checked_in"),
    ("checked in -> barrier released (commit)", "checked_in", "release"),
    ("released -> process out of the barrier", "release", "out"),
]


def breakdown(jobs, procs):
    one = [j for j in jobs if j["figure"] == "fig2" and j["processes"] == "1"]
    ins = {p["job"]: float(p["barrier_in"]) for p in procs if p["job"] in {j["job"] for j in one}}
    out = []
    for name, a, b in PHASES:
        vals = []
        for j in one:
            t = {"submit": 0.0, "placed": float(j["placed"]),
                 "submitted": float(j["first_submitted"]), "in": ins[j["job"]],
                 "checked_in": float(j["last_checked_in"]), "release": float(j["release"]),
                 "out": float(j["last_out"])}
            vals.append(t[b] - t[a])
        out.append({"phase": name, "ms_median": med(vals), "ms_min": min(vals),
                    "ms_max": max(vals), "jobs": len(vals)})
    return out


def interp(points, xs):
    """The straight line through the document's two points, at every x of `xs`."""
    (x0, y0), (x1, y1) = points
    return [y0 + (y1 - y0) * (x - x0) / (x1 - x0) for x in xs]


def fits(jobs):
    """Least-squares lines of submit -> barrier released over every job: against processes
    (Fig. 2) and against components (Fig. 4; the document's slope is 26/24 = 1.083 s)."""
    out = []
    for figure, key, per in (("fig2", "processes", "process"), ("fig4", "components", "component")):
        pts = [(float(j[key]), float(j["release"])) for j in jobs if j["figure"] == figure]
        fit = statistics.linear_regression([x for x, _ in pts], [y for _, y in pts])
        r = statistics.correlation([x for x, _ in pts], [y for _, y in pts])
        out.append({"figure": figure, "per": per, "slope_ms": fit.slope,
                    "intercept_ms": fit.intercept, "r": r, "jobs": len(pts)})
    return out


def write(name, data):
    with open(os.path.join(RES, name), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(data[0]))
        w.writeheader()
        for r in data:
            w.writerow({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()})


def plots(summ, brk, paper, jobs, procs, events):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def save(fig, name):
        fig.tight_layout()
        for ext in ("png", "svg"):
            fig.savefig(os.path.join(RES, f"{name}.{ext}"), dpi=110)
        plt.close(fig)

    doc = lambda fig, series: [(float(p["x"]) if p["x"] else None, float(p["seconds"]))
                               for p in paper if p["figure"] == fig and p["series"] == series]

    # Fig. 2: latency against processes in one component.
    s2 = [r for r in summ if r["figure"] == "fig2"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [r["x"] for r in s2]
    ax.errorbar(xs, [r["release_ms_median"] / 1e3 for r in s2],
                yerr=[[(r["release_ms_median"] - r["release_ms_min"]) / 1e3 for r in s2],
                      [(r["release_ms_max"] - r["release_ms_median"]) / 1e3 for r in s2]],
                marker="o", capsize=3, label="coalloc: submit -> barrier released (median, min-max)")
    ax.plot(xs, [r["last_out_ms_median"] / 1e3 for r in s2], "s--",
            label="coalloc: submit -> last process out of the barrier")
    d = doc("fig2", "GRAM submission latency")
    ax.plot([p[0] for p in d], [p[1] for p in d], "k-", lw=2,
            label="document (GRAM, Origin 2000): flat, ~1.2 s (text + Fig. 3 sum)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("processes in the one component (job_type multiple)")
    ax.set_ylabel("seconds")
    ax.set_title("Seed 002 Fig. 2: submission latency vs. job size")
    ax.legend(fontsize=8)
    save(fig, "fig2_processes")

    # Fig. 3: breakdown of a one-process request.
    fig, ax = plt.subplots(figsize=(9, 4.5))
    labels = [p["series"] + " (document)" for p in paper if p["figure"] == "fig3"]
    vals = [float(p["seconds"]) * 1e3 for p in paper if p["figure"] == "fig3"]
    labels += [b["phase"] for b in brk]
    vals += [b["ms_median"] for b in brk]
    colors = ["0.4"] * (len(labels) - len(brk)) + ["C0"] * len(brk)
    y = list(range(len(labels)))[::-1]
    ax.barh(y, [max(v, 1e-3) for v in vals], color=colors)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xscale("log")
    for yi, v in zip(y, vals):
        ax.text(max(v, 1e-3), yi, f" {v:.3g} ms" if v > 0 else " < 1 ms (the server's clock: ms)",
                va="center", fontsize=7)
    ax.set_xlabel("milliseconds (log); coalloc: median of the one-process jobs")
    ax.set_title("Seed 002 Fig. 3: where a one-process request spends its time")
    save(fig, "fig3_breakdown")

    # Fig. 4 and the kM/2 model.
    s4 = [r for r in summ if r["figure"] == "fig4"]
    xs = [r["x"] for r in s4]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.5))
    a1.errorbar(xs, [r["release_ms_median"] / 1e3 for r in s4],
                yerr=[[(r["release_ms_median"] - r["release_ms_min"]) / 1e3 for r in s4],
                      [(r["release_ms_max"] - r["release_ms_median"]) / 1e3 for r in s4]],
                marker="o", capsize=3, label="coalloc: submit -> barrier released")
    a1.plot(xs, [r["mean_wait_ms_median"] / 1e3 for r in s4], "s--",
            label="coalloc: mean per-process barrier wait")
    a1.plot(xs, interp(doc("fig4", "DUROC submission time"), xs), "k-", lw=2,
            label="document: DUROC submission (2 s -> 28 s, linear)")
    a1.plot(xs, interp(doc("fig4", "average barrier wait"), xs), "k:", lw=2,
            label="document: average wait, model k(M-1)/2")
    a1.set_yscale("symlog", linthresh=0.1)
    a1.set_xlabel("components (subjobs), 64 processes in all")
    a1.set_ylabel("seconds")
    a1.set_title("Fig. 4: co-allocation time vs. subjobs")
    a1.legend(fontsize=7)
    a2.plot(xs, [r["wait_over_total"] for r in s4], "o-", label="coalloc: mean wait / (submit -> last out), median")
    a2.plot(xs, [r["model_wait_over_total"] for r in s4], "k:", lw=2,
            label="§4.2 model: (M-1)/2M (-> 1/2)")
    a2.set_ylim(0, 1)
    a2.set_xlabel("components (subjobs)")
    a2.set_ylabel("average barrier wait / total latency")
    a2.set_title("The kM/2 barrier-wait model")
    a2.legend(fontsize=8)
    save(fig, "fig4_subjobs")

    # Fig. 5: timeline of the median-latency 25-component job.
    j25 = sorted((j for j in jobs if j["figure"] == "fig4" and j["components"] == "25"),
                 key=lambda j: float(j["release"]))
    job = j25[len(j25) // 2]
    jid, rel = job["job"], float(job["release"])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 5), gridspec_kw={"width_ratios": [2, 1]})
    ev = {}
    for e in events:
        if e["job"] == jid:
            ev.setdefault(int(e["component"]), {})[e["event"]] = float(e["time"])
    for p in procs:
        if p["job"] == jid:
            c = int(p["component"])
            a1.plot([float(p["barrier_in"]) / 1e3, float(p["barrier_out"]) / 1e3], [c, c],
                    color="C1", alpha=0.35, lw=4)
    for c, e in ev.items():
        a1.plot(e.get("component_submitted", 0) / 1e3, c, "k|", ms=8)
        a1.plot(e.get("component_checked_in", 0) / 1e3, c, "C0o", ms=4)
    a1.axvline(rel / 1e3, color="C3", ls="--")
    a1.plot([], [], "k|", label="launch sent")
    a1.plot([], [], color="C1", lw=4, alpha=0.5, label="a process in the barrier (in -> out)")
    a1.plot([], [], "C0o", label="component checked in (all its processes)")
    a1.plot([], [], color="C3", ls="--", label="barrier released")
    a1.set_xlabel("seconds after submit")
    a1.set_ylabel("component")
    a1.set_title(f"coalloc: a 25-component, 64-process job (job {jid})")
    a1.legend(fontsize=7, loc="lower right")
    k = [float(p["seconds"]) for p in paper if p["figure"] == "fig5"][0]
    for i in range(25):
        a2.plot([i * k, i * k + k], [i, i], color="0.3", lw=3)
        a2.plot([i * k + k, 25 * k], [i, i], color="C1", alpha=0.35, lw=3)
    a2.axvline(25 * k, color="C3", ls="--")
    a2.set_xlabel("seconds after submit")
    a2.set_title("document's model (§4.2): one GRAM request\nafter another, k = 1.083 s; then the wait")
    save(fig, "fig5_timeline")


def main():
    jobs, procs, events = rows("jobs.csv"), rows("processes.csv"), rows("events.csv")
    with open(os.path.join(HERE, "paper.csv"), newline="") as f:
        paper = list(csv.DictReader(f))
    summ = summary(jobs)
    brk = breakdown(jobs, procs)
    write("summary.csv", summ)
    write("fig3_breakdown.csv", brk)
    lines = fits(jobs)
    write("fits.csv", lines)
    for f in lines:
        print(f"{f['figure']}: {f['slope_ms']:.1f} ms per {f['per']} + {f['intercept_ms']:.0f} ms (r = {f['r']:.2f})")
    for r in summ:
        print(f"{r['figure']} x={r['x']:>2}: release {r['release_ms_median']:8.1f} ms "
              f"[{r['release_ms_min']:.0f}, {r['release_ms_max']:.0f}], mean wait "
              f"{r['mean_wait_ms_median']:8.1f} ms, wait/total {r['wait_over_total']:.2f}")
    for b in brk:
        print(f"  {b['phase']:66} {b['ms_median']:8.2f} ms")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib is missing: no figures (pip install matplotlib)")
        return
    plots(summ, brk, paper, jobs, procs, events)


if __name__ == "__main__":
    main()
