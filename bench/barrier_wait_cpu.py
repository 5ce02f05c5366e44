#!/usr/bin/env python3
"""Server CPU while components wait at the start barrier.

Starts `coalloc serve` (the embedded default) for each binary given, submits one job of 8
`coalloc-barrier` components and a ninth that sleeps 3 s before its check-in, and prints the
server's CPU time (user + system, /proc) over 2 s while the eight wait.

    cargo build --release --bin coalloc --bin coalloc-barrier
    python3 bench/barrier_wait_cpu.py [COALLOC_BINARY...]   # default target/release/coalloc
"""
import json, os, subprocess, sys, time

from serverlib import connect, process_cpu_ms, serve

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
barrier = os.path.join(root, "target/release/coalloc-barrier")
for coalloc in sys.argv[1:] or [os.path.join(root, "target/release/coalloc")]:
    server, state = serve(coalloc, "coalloc-wait-")
    try:
        _, _, call = connect(state, settle=0.3)
        comps = [{"count": 1, "job_type": "single", "executable": barrier} for _ in range(8)]
        comps.append({"count": 1, "job_type": "single", "executable": "/bin/sh",
                      "arguments": ["-c", "sleep 3; exec " + barrier]})
        call("/v1/jobs", json.dumps({"kind": "unordered", "component": comps}).encode())
        time.sleep(0.5)
        c0 = process_cpu_ms(server.pid)
        time.sleep(2)
        cpu = int(process_cpu_ms(server.pid) - c0)
        print(f"{coalloc}: server CPU while 8 components wait 2 s at the barrier: {cpu} ms")
    finally:
        server.terminate()
        server.wait()
        subprocess.run(["rm", "-rf", state])
