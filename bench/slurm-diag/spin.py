#!/usr/bin/env python3
"""The server's CPU while a component waits at the barrier (bench/RESULTS.md, "Slurm backend").

Starts `coalloc serve` on the Slurm rig, measures its CPU for 3 s idle, then submits a job of two
components (alpha: `coalloc-barrier`; beta: `sleep 3` first) and measures its CPU for 2 s while
the first waits. Throwaway diagnostics.

    COALLOC_SLURM_RIG=/tmp/coalloc-slurm python3 bench/slurm-diag/spin.py
"""
import json, os, subprocess, sys, tempfile, time, urllib.request
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
B = os.environ.get("COALLOC_SLURM_RIG", "/tmp/coalloc-slurm")
late = os.path.join(os.path.dirname(os.path.abspath(__file__)), "late.sh")
rows = [l.rstrip("\n").split("\t") for l in open(f"{B}/clusters.tsv") if not l.startswith("#")]
st = tempfile.mkdtemp(prefix="coalloc-slurm-diag-")
cfg = '[server]\nmonitor_interval = "100ms"\nsample_interval = "5s"\n'
for r in rows:
    cfg += f'[[site]]\nname = "{r[0]}"\nprocessors = {int(r[3])*int(r[4])}\nmanager = {{ type = "slurm", slurm_conf = "{r[1]}" }}\n'
cfg += '[scheduler]\npolicy = "fcfs"\nfit = "worst"\n'
open(f"{st}/config.toml", "w").write(cfg)
srv = subprocess.Popen([f"{root}/target/release/coalloc", "serve", "--config", f"{st}/config.toml", "--state-dir", f"{st}/s"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def cpu(): 
    f = open(f"/proc/{srv.pid}/stat").read().rsplit(")", 1)[1].split(); return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
try:
    while not os.path.exists(f"{st}/s/server.json"): time.sleep(0.05)
    time.sleep(0.3)
    url = json.load(open(f"{st}/s/server.json"))["url"]; tok = open(f"{st}/s/token").read().strip()
    def api(path, body=None):
        req = urllib.request.Request(url + path, data=None if body is None else json.dumps(body).encode(), headers={"Authorization": f"Bearer {tok}", "Content-Type": "application/json"}, method="POST" if body is not None else "GET")
        return json.load(urllib.request.urlopen(req))
    c0, t0 = cpu(), time.time(); time.sleep(3); c1, t1 = cpu(), time.time()
    print(f"idle server: {100*(c1-c0)/(t1-t0):.0f}% of a core")
    comps = [{"count": 1, "job_type": "single", "executable": f"{root}/target/release/coalloc-barrier", "site": "alpha"},
             {"count": 1, "job_type": "single", "executable": late, "site": "beta"}]
    jid = api("/v1/jobs", {"kind": "ordered", "max_wall_time": "5m", "component": comps})["job"]
    time.sleep(1.5)
    c0, t0 = cpu(), time.time(); time.sleep(2); c1, t1 = cpu(), time.time()
    print(f"one component waiting at the barrier: {100*(c1-c0)/(t1-t0):.0f}% of a core")
    while api(f"/v1/jobs/{jid}")["state"] not in ("finished", "failed"): time.sleep(0.1)
    j = api(f"/v1/jobs/{jid}"); print("job", j["state"], j["barrier_release"] - j["submit"], "ms")
finally:
    srv.terminate(); srv.wait()
