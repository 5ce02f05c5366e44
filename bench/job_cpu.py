#!/usr/bin/env python3
"""Latency and CPU of K-component jobs submitted one at a time, for comparing two builds.

Starts `ROOT/target/release/coalloc serve` (the embedded default: three local clusters of
16 slots) in a temporary state directory and submits JOBS jobs of K one-slot
`coalloc-barrier` components, one at a time, half a second apart. Per job it prints the
server's `barrier_release - submit`, and the CPU time of the whole machine (/proc/stat) and
of the server process over the job's life (submit until the client saw it end, polling every
5 ms); then the median latency. The state directory is left for
`python3 bench/journal_timeline.py STATE_DIR`.

    python3 bench/job_cpu.py ROOT [K] [JOBS]     # default 25 components, 8 jobs

Alternating two checkouts (ROOT and OTHER, each with its release build) at the same load:

    for r in OTHER ROOT OTHER ROOT; do python3 bench/job_cpu.py $r | tail -2; done
"""
import json, os, sys, time

from serverlib import connect, process_cpu_ms, serve

root = sys.argv[1]
k = int(sys.argv[2]) if len(sys.argv) > 2 else 25
jobs = int(sys.argv[3]) if len(sys.argv) > 3 else 8
coalloc = os.path.join(root, "target/release/coalloc")
barrier = os.path.join(root, "target/release/coalloc-barrier")
server, state = serve(coalloc, "coalloc-jobcpu-")
tick = os.sysconf("SC_CLK_TCK")


def machine_ms():
    v = list(map(int, open("/proc/stat").readline().split()[1:]))
    return (sum(v) - v[3] - v[4]) * 1000 / tick


try:
    _, _, call = connect(state, settle=0.3)

    job = json.dumps({"kind": "unordered",
                      "component": [{"count": 1, "executable": barrier}] * k}).encode()
    latencies = []
    for _ in range(jobs):
        m0, s0 = machine_ms(), process_cpu_ms(server.pid)
        jid = call("/v1/jobs", job)["job"]
        while True:
            j = call(f"/v1/jobs/{jid}")
            if j["state"] in ("finished", "failed"):
                break
            time.sleep(0.005)
        m1, s1 = machine_ms(), process_cpu_ms(server.pid)
        if j["state"] != "finished" or j.get("barrier_release") is None:
            sys.exit(f"job {jid} did not finish: {j}")
        latency = j["barrier_release"] - j["submit"]
        latencies.append(latency)
        print(f"job {jid}: {latency} ms; machine CPU {m1 - m0:.0f} ms, server CPU {s1 - s0:.0f} ms",
              flush=True)
        time.sleep(0.5)
    latencies.sort()
    print("state directory", state)
    print("median", latencies[len(latencies) // 2], "ms; all", latencies)
finally:
    server.terminate()
    server.wait()
