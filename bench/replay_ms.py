#!/usr/bin/env python3
"""Several builds' whole `coalloc replay` processes, interleaved N times (a slow spell of the
machine falls on every build alike): the median wall time in milliseconds (Python's
`perf_counter` around each process; `bench/replay-pair.sh`'s `/usr/bin/time` counts in
hundredths of a second), its quartiles, and the median CPU time of the process (user and
system, 10 ms resolution).

    python3 bench/replay_ms.py N BIN...

Environment: TRACE (default ../shared/traces/SDSC-BLUE-2000-4.2-cln.swf.gz), SITES (default
examples/sites-sdsc-blue.toml), POLICY (default easy). Run from the repository's root.
"""
import os
import statistics
import subprocess
import sys
import time


def main():
    n, bins = int(sys.argv[1]), sys.argv[2:]
    trace = os.environ.get("TRACE", "../shared/traces/SDSC-BLUE-2000-4.2-cln.swf.gz")
    sites = os.environ.get("SITES", "examples/sites-sdsc-blue.toml")
    policy = os.environ.get("POLICY", "easy")
    wall = {b: [] for b in bins}
    cpu = {b: [] for b in bins}
    for _ in range(n):
        for b in bins:
            t0, r0 = time.perf_counter(), os.times()
            subprocess.run(
                [b, "replay", trace, "--sites", sites, "--policy", policy, "--json"],
                stdout=subprocess.DEVNULL,
                check=True,
            )
            t1, r1 = time.perf_counter(), os.times()
            wall[b].append((t1 - t0) * 1000)
            used = r1.children_user - r0.children_user + r1.children_system - r0.children_system
            cpu[b].append(used * 1000)
    for b in bins:
        v = sorted(wall[b])
        q = lambda p: v[int(p * (len(v) - 1))]
        print(
            f"{b}: wall median {statistics.median(v):.1f} ms (q1 {q(0.25):.1f}, "
            f"q3 {q(0.75):.1f}), cpu median {statistics.median(cpu[b]):.0f} ms, n={n}"
        )


if __name__ == "__main__":
    main()
