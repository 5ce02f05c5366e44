#!/usr/bin/env python3
"""An FCFS scheduler written independently of coalloc, to check `coalloc replay --policy fcfs`
job by job. Usage (from the repository root):

    coalloc replay traces/KTH-SP2-1996-2.1-cln.swf.gz --sites examples/sites-kth-sp2.toml \
        --policy fcfs --schedule /tmp/kth_fcfs.csv
    python3 bench/fcfs_check.py traces/KTH-SP2-1996-2.1-cln.swf.gz 100 /tmp/kth_fcfs.csv

Jobs with an unknown runtime or processor count are skipped, as coalloc's SWF reader does.
"""
import gzip
import heapq
import sys

trace, processors, schedule = sys.argv[1], int(sys.argv[2]), sys.argv[3]
jobs = []
with gzip.open(trace, "rt") as f:
    for line in f:
        if line.startswith(";") or not line.strip():
            continue
        x = line.split()
        number, submit, run, alloc, req = int(x[0]), int(x[1]), int(x[3]), int(x[4]), int(x[7])
        procs = alloc if alloc != -1 else req
        if run == -1 or procs == -1:
            continue
        jobs.append((number, submit, run, procs))

free, ends, last_start, ours = processors, [], 0, {}
for number, submit, run, procs in jobs:
    t = max(submit, last_start)
    while True:
        while ends and ends[0][0] <= t:
            free += heapq.heappop(ends)[1]
        if free >= procs:
            break
        t = ends[0][0]
    free -= procs
    heapq.heappush(ends, (t + run, procs))
    ours[number] = (submit, t, t + run)
    last_start = t

theirs = {}
with open(schedule) as f:
    next(f)
    for line in f:
        a = [int(v) for v in line.strip().split(",")]
        theirs[a[0]] = tuple(a[1:])
bad = [n for n in ours if ours[n] != theirs.get(n)]
waits = [s - u for u, s, _ in ours.values()]
print(f"jobs {len(ours)}, mismatches {len(bad)} {bad[:5]}")
print(f"total wait {sum(waits)} s, mean wait {sum(waits) / len(waits):.2f} s")
sys.exit(1 if bad else 0)
