#!/usr/bin/env python3
"""Server CPU while components wait at the start barrier.

Starts `coalloc serve` (the embedded default) for each binary given, submits one job of 8
`coalloc-barrier` components and a ninth that sleeps 3 s before its check-in, and prints the
server's CPU time (user + system, /proc) over 2 s while the eight wait.

    cargo build --release --bin coalloc --bin coalloc-barrier
    python3 bench/barrier_wait_cpu.py [COALLOC_BINARY...]   # default target/release/coalloc
"""
import json, os, subprocess, sys, tempfile, time, urllib.request

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
barrier = os.path.join(root, "target/release/coalloc-barrier")
for coalloc in sys.argv[1:] or [os.path.join(root, "target/release/coalloc")]:
    state = tempfile.mkdtemp(prefix="coalloc-wait-")
    server = subprocess.Popen([coalloc, "serve", "--state-dir", state],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not os.path.exists(os.path.join(state, "server.json")):
            time.sleep(0.02)
        time.sleep(0.3)
        url = json.load(open(os.path.join(state, "server.json")))["url"]
        auth = {"Authorization": "Bearer " + open(os.path.join(state, "token")).read().strip(),
                "Content-Type": "application/json"}
        comps = [{"count": 1, "job_type": "single", "executable": barrier} for _ in range(8)]
        comps.append({"count": 1, "job_type": "single", "executable": "/bin/sh",
                      "arguments": ["-c", "sleep 3; exec " + barrier]})
        body = json.dumps({"kind": "unordered", "component": comps}).encode()
        urllib.request.urlopen(urllib.request.Request(url + "/v1/jobs", data=body, headers=auth)).read()
        time.sleep(0.5)

        def cpu_ms():
            f = open(f"/proc/{server.pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) * 1000 // os.sysconf("SC_CLK_TCK")

        c0 = cpu_ms()
        time.sleep(2)
        print(f"{coalloc}: server CPU while 8 components wait 2 s at the barrier: {cpu_ms() - c0} ms")
    finally:
        server.terminate()
        server.wait()
        subprocess.run(["rm", "-rf", state])
