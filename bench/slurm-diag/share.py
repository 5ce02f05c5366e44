#!/usr/bin/env python3
"""coalloc's share of the co-allocation latency over the Slurm rig (bench/RESULTS.md, "Slurm backend").

Starts `coalloc serve` with one Slurm site per cluster of the rig (like bench/slurm.sh), submits N
jobs of K one-CPU components (round-robin alpha, beta, gamma), each at a random moment on quiet
clusters, and prints per job: when the `sbatch` RPCs reached the controllers and when Slurm
started the components (slurmctld's log, ms), both after the submit request, and the barrier
release after the last start. With EXE=$PWD/bench/slurm-diag/bar.sh each component is a wrapper that
logs when it starts and when `coalloc-barrier` returns (to /tmp/coalloc-slurm-diag-comp.log),
and a second table splits each component's time. Throwaway diagnostics, not a benchmark.

    cargo build --release --bin coalloc --bin coalloc-barrier
    COALLOC_SLURM_RIG=/tmp/coalloc-slurm [MONITOR=100ms] [EXE=...] python3 bench/slurm-diag/share.py K N
"""
import json, os, random, re, subprocess, sys, tempfile, time, urllib.request, datetime
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
B = os.environ.get("COALLOC_SLURM_RIG", "/tmp/coalloc-slurm")
COMP_LOG = "/tmp/coalloc-slurm-diag-comp.log"
K = int(sys.argv[1]); N = int(sys.argv[2])
rows = [l.rstrip("\n").split("\t") for l in open(f"{B}/clusters.tsv") if not l.startswith("#")]
names = [r[0] for r in rows]; confs = [r[1] for r in rows]
st = tempfile.mkdtemp(prefix="coalloc-slurm-diag-")
if os.path.exists(COMP_LOG):
    os.remove(COMP_LOG)
MON = os.environ.get('MONITOR', '100ms')
cfg = '[server]\nmonitor_interval = "' + MON + '"\nsample_interval = "5s"\n'
for r in rows:
    cfg += f'[[site]]\nname = "{r[0]}"\nprocessors = {int(r[3])*int(r[4])}\nmanager = {{ type = "slurm", slurm_conf = "{r[1]}" }}\n'
cfg += '[scheduler]\npolicy = "fcfs"\nfit = "worst"\n'
open(f"{st}/config.toml", "w").write(cfg)
srv = subprocess.Popen([f"{root}/target/release/coalloc", "serve", "--config", f"{st}/config.toml", "--state-dir", f"{st}/s"], stdout=subprocess.DEVNULL, stderr=open(f"{st}/server.log", "w"))
try:
    while not os.path.exists(f"{st}/s/server.json"): time.sleep(0.05)
    time.sleep(0.2)
    url = json.load(open(f"{st}/s/server.json"))["url"]; tok = open(f"{st}/s/token").read().strip()
    def api(path, body=None):
        req = urllib.request.Request(url + path, data=None if body is None else json.dumps(body).encode(), headers={"Authorization": f"Bearer {tok}", "Content-Type": "application/json"}, method="POST" if body is not None else "GET")
        return json.load(urllib.request.urlopen(req))
    def quiet():
        for _ in range(500):
            if all(not subprocess.run(["squeue", "-h", "-t", "PD,CF,R,CG,S", "-o", "%i"], env=dict(os.environ, SLURM_CONF=c), capture_output=True, text=True).stdout.strip() for c in confs): return
            time.sleep(0.02)
    out = []
    for n in range(N):
        quiet(); time.sleep(0.3 + random.random())
        comps = [{"count": 1, "job_type": "single", "executable": os.environ.get("EXE", f"{root}/target/release/coalloc-barrier"), "site": names[i % 3]} for i in range(K)]
        t_client = time.time()
        jid = api("/v1/jobs", {"kind": "ordered", "max_wall_time": "5m", "component": comps})["job"]
        while True:
            j = api(f"/v1/jobs/{jid}")
            if j["state"] in ("finished", "failed"): break
            time.sleep(0.05)
        out.append((jid, t_client, j))
    time.sleep(1)
finally:
    srv.terminate(); srv.wait()
# slurmctld logs: submit RPC and start per Slurm job id; job names from squeue
def ts(s): return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%f").timestamp() * 1000
ev = {}
for name, conf in zip(names, confs):
    ids = {}
    for line in subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i|%j"], env=dict(os.environ, SLURM_CONF=conf), capture_output=True, text=True).stdout.split():
        i, nm = line.split("|", 1); ids[i] = nm
    for line in open(f"{B}/{name}/log/slurmctld.log"):
        m = re.match(r"\[([0-9T:.-]+)\] (.*)", line)
        if not m: continue
        t, msg = ts(m.group(1)), m.group(2)
        for pat, kind in ((r"_slurm_rpc_submit_batch_job: JobId=(\d+)", "submit"), (r"sched: Allocate JobId=(\d+)", "start"), (r"_start_job: Started JobId=(\d+)", "start")):
            mm = re.search(pat, msg)
            if mm and mm.group(1) in ids:
                ev.setdefault((ids[mm.group(1)], name), {})[kind] = (t, name)
print("job  k  latency | sbatch RPCs after submit (first..last) | Slurm starts after submit (first..last) | release after last start")
for jid, tc, j in out:
    sub = j["submit"]; rel = j["barrier_release"]
    mine = {k: v for k, v in ev.items() if re.match(rf"coalloc-J{jid}-c\d+-L", k[0]) and v.get("submit", (0,))[0] >= tc * 1000 - 50}
    subs = sorted(v["submit"][0] for v in mine.values() if "submit" in v)
    starts = sorted(v["start"][0] for v in mine.values() if "start" in v)
    base = tc * 1000  # client clock just before the POST (same machine)
    print(f"{jid:>4} {K} {rel - sub:>6} | {subs[0]-base:6.0f} .. {subs[-1]-base:6.0f} | {starts[0]-base:6.0f} .. {starts[-1]-base:6.0f} | {(base + (rel - sub)) - starts[-1]:6.0f}   (n={len(mine)}, submit clock diff {sub - base:.0f})")
# per component: Slurm start -> script start (slurmstepd + sh), script start -> barrier returned
if os.path.exists(COMP_LOG):
    comp = {}
    for line in open(COMP_LOG):
        j, c, t0, t1, rc = line.split()
        comp[(int(j), int(c))] = (int(t0) / 1e6, int(t1) / 1e6)
    print("job comp | slurm start->script start | script start->barrier returned | release - script start")
    for jid, tc, j in out:
        base = tc * 1000; rel = base + (j["barrier_release"] - j["submit"])
        for k, v in sorted(ev.items()):
            m = re.match(rf"coalloc-J{jid}-c(\d+)-L", k[0])
            if not m or v.get("submit", (0,))[0] < base - 50 or "start" not in v: continue
            c = int(m.group(1))
            if (jid, c) not in comp: continue
            t0, t1 = comp[(jid, c)]
            print(f"{jid:>4} {c:>3} {v['start'][1]:>6} | {t0 - v['start'][0]:8.0f} | {t1 - t0:8.0f} | {rel - t0:8.0f}")
