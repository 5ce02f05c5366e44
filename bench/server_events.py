#!/usr/bin/env python3
"""Where the co-allocation latency of one job goes, from the server's event stream.

Starts `coalloc serve` (the embedded default: three local clusters) in a temporary state
directory, listens on GET /v1/events, submits JOBS jobs of K one-slot components (each runs
`coalloc-barrier`) one second apart, and prints per job the milliseconds after the submit
request at which each kind of event arrived (first, last, count), beside the server's own
barrier_release - submit.

    cargo build --release --bin coalloc --bin coalloc-barrier
    python3 bench/server_events.py [K] [JOBS]        # default 25 components, 5 jobs
"""
import collections, json, os, subprocess, sys, threading, time, urllib.request

from serverlib import connect, serve

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
coalloc = os.path.join(root, "target/release/coalloc")
barrier = os.path.join(root, "target/release/coalloc-barrier")
k = int(sys.argv[1]) if len(sys.argv) > 1 else 25
jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 5

server, state = serve(coalloc, "coalloc-events-")
try:
    url, auth, call = connect(state, settle=0.1)

    events = []

    def listen():
        for line in urllib.request.urlopen(urllib.request.Request(url + "/v1/events", headers=auth)):
            if line.startswith(b"data:"):
                events.append((time.time(), json.loads(line[5:])))

    threading.Thread(target=listen, daemon=True).start()
    time.sleep(0.5)
    comps = [{"count": 1, "job_type": "single", "executable": barrier} for _ in range(k)]
    body = json.dumps({"kind": "unordered", "component": comps}).encode()
    submitted = {}
    for _ in range(jobs):
        t = time.time()
        submitted[call("/v1/jobs", body)["job"]] = t
        time.sleep(1.0)
    for job, t0 in submitted.items():
        seen = collections.defaultdict(list)
        for t, e in events:
            if e.get("job") == job:
                seen[e["event"]].append(round((t - t0) * 1000))
        j = call(f"/v1/jobs/{job}")
        print(f"job {job}: server barrier_release - submit = {j['barrier_release'] - j['submit']} ms")
        for name, ms in seen.items():
            print(f"  {name:20} first {ms[0]:5} ms  last {ms[-1]:5} ms  ({len(ms)})")
finally:
    server.terminate()
    try:
        server.wait(timeout=5)
    except subprocess.TimeoutExpired:  # graceful shutdown waits for the open event stream
        server.kill()
        server.wait()
