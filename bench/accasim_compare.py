#!/usr/bin/env python3
"""Compare two schedules job by job (`job_id,submit,start,end` CSV files, as written by
`coalloc replay --schedule` and bench/accasim_run.py):

    python3 bench/accasim_compare.py A.csv B.csv [--label-a coalloc] [--label-b accasim] [--json]

Reports the jobs in each file and in both, how many have the same start (and the same end),
how many differ, and the distribution of the differences `start(B) - start(A)` in seconds over
the jobs that differ (count earlier / later, min, percentiles, max, mean), the mean wait of
each side, and the first jobs that differ. Exit code 0 when every common job has the same
start and end and both files hold the same jobs, else 1.
"""
import argparse
import json
import sys


def load(path):
    jobs = {}
    with open(path) as f:
        header = next(f).strip()
        assert header == "job_id,submit,start,end", f"{path}: unexpected header {header!r}"
        for line in f:
            n, submit, start, end = line.strip().split(",")
            jobs[int(n)] = (
                int(submit),
                int(start) if start else None,
                int(end) if end else None,
            )
    return jobs


def pct(sorted_values, q):
    """Nearest-rank percentile."""
    if not sorted_values:
        return None
    k = max(1, -(-q * len(sorted_values) // 100))
    return sorted_values[int(k) - 1]


def main():
    ap = argparse.ArgumentParser(description="job-by-job comparison of two schedules")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--label-a", default="A")
    ap.add_argument("--label-b", default="B")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--show", type=int, default=5, help="how many differing jobs to list")
    args = ap.parse_args()
    a, b = load(args.a), load(args.b)
    common = [n for n in a if n in b]
    same_submit = sum(1 for n in common if a[n][0] == b[n][0])
    unstarted = [n for n in common if a[n][1] is None or b[n][1] is None]
    both = [n for n in common if a[n][1] is not None and b[n][1] is not None]
    same_start = [n for n in both if a[n][1] == b[n][1]]
    same_both = [n for n in same_start if a[n][2] == b[n][2]]
    diffs = sorted(b[n][1] - a[n][1] for n in both if a[n][1] != b[n][1])
    first_diff = [n for n in both if a[n][1] != b[n][1]][: args.show]

    def mean_wait(s):
        w = [s[n][1] - s[n][0] for n in both]
        return sum(w) / len(w) if w else None

    r = {
        "a": args.label_a,
        "b": args.label_b,
        "jobs_a": len(a),
        "jobs_b": len(b),
        "common": len(common),
        "only_a": len(a) - len(common),
        "only_b": len(b) - len(common),
        "same_submit": same_submit,
        "not_started_in_one": len(unstarted),
        "same_start": len(same_start),
        "same_start_and_end": len(same_both),
        "different_start": len(diffs),
        "b_earlier": sum(1 for d in diffs if d < 0),
        "b_later": sum(1 for d in diffs if d > 0),
        "diff_min": diffs[0] if diffs else None,
        "diff_p10": pct(diffs, 10),
        "diff_p50": pct(diffs, 50),
        "diff_p90": pct(diffs, 90),
        "diff_max": diffs[-1] if diffs else None,
        "diff_mean": sum(diffs) / len(diffs) if diffs else None,
        "diff_mean_abs": sum(abs(d) for d in diffs) / len(diffs) if diffs else None,
        "mean_wait_a": mean_wait(a),
        "mean_wait_b": mean_wait(b),
        "first_different": [
            {"job": n, args.label_a: a[n], args.label_b: b[n]} for n in first_diff
        ],
    }
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        la, lb = args.label_a, args.label_b
        print(f"jobs: {la} {r['jobs_a']}, {lb} {r['jobs_b']}, in both {r['common']}"
              f" (same submit {same_submit})")
        print(f"same start: {r['same_start']} (and same end: {r['same_start_and_end']});"
              f" different start: {r['different_start']}; not started in one:"
              f" {r['not_started_in_one']}")
        if diffs:
            print(f"start({lb}) - start({la}) over the {len(diffs)} that differ:"
                  f" {r['b_earlier']} earlier, {r['b_later']} later;"
                  f" min {r['diff_min']}, p10 {r['diff_p10']}, median {r['diff_p50']},"
                  f" p90 {r['diff_p90']}, max {r['diff_max']} s;"
                  f" mean {r['diff_mean']:.1f} s, mean |diff| {r['diff_mean_abs']:.1f} s")
        if r["mean_wait_a"] is not None:
            print(f"mean wait: {la} {r['mean_wait_a']:.2f} s, {lb} {r['mean_wait_b']:.2f} s")
        for x in r["first_different"]:
            print(f"  job {x['job']}: {la} {x[la]}, {lb} {x[lb]} (submit, start, end)")
    ok = (
        r["only_a"] == 0
        and r["only_b"] == 0
        and not unstarted
        and len(same_both) == len(common)
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
