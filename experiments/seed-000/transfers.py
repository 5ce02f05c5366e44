#!/usr/bin/env python3
"""A small version of seed 000's workload (§4) run for real, to compare its transfer figures
with the simulator's model: the server and four agent sites (fs0 65, fs1 30, fs2 30, fs3 30
processors: koala.toml's clusters, half of each held by other users), each agent in a network namespace of its own whose link to the
server is limited to 100 Mbit/s (the paper's wide-area backbone; scripts/netns/sites.sh
--rate, prefix `hx`, network 10.241), KOALA's policy, Close-to-Files and ICP with
koala.toml's parameters. The jobs are seed 000's, scaled: size 36 (3 or 4 components) or 72
(3, 4, 6, 8), random priority, one input file of 4 or 8 GB scaled by 1/100 (40 or 80 MB of
random bytes) replicated at 2 random sites, runtime 30-192 s scaled by 1/20, Poisson
arrivals (mean gap 8 s). Transfers are relayed by the server: each crosses the replica
site's link and the execution site's link, both 100 Mbit/s.

Usage (root): transfers.py COALLOC [JOBS] [SEED]. Writes results/transfers/: transfers.csv
(one line per transfer), jobs.csv (one per job) and summary.txt. Exits 77 where network
namespaces cannot be made. Takes down everything it made, also on failure."""
import csv, json, os, random, shutil, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from serverlib import connect  # noqa: E402

COALLOC = os.path.abspath(sys.argv[1])
JOBS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else 0
# koala.toml's clusters (130, 60, 60, 60) with half of each taken by its other users
# (koala.toml's local load 0.5), which the simulator models with local jobs
SITES = [("fs0", 65), ("fs1", 30), ("fs2", 30), ("fs3", 30)]
RATE, BW = "100mbit", 12_500_000  # the link, and koala.toml's bandwidth (bytes/s)
BYTES_SCALE, TIME_SCALE, GAP_MEAN = 100, 20, 8.0
OUT = os.path.join(HERE, "results", "transfers")
BASE = tempfile.mkdtemp(prefix="coalloc-seed000-transfers-")
ENV = dict(os.environ, CA_SITES_PREFIX="hx", CA_SITES_NET="10.241",
           CA_SITES_STATE=os.path.join(BASE, "netns.list"))
SITES_SH = os.path.join(ROOT, "scripts", "netns", "sites.sh")


def sites_sh(*args):
    subprocess.run(["bash", SITES_SH, *args], check=True, env=ENV)


def config():
    c = ('[server]\nmonitor_interval = "200ms"\nagent_bind = "10.241.0.1:0"\n'
         'heartbeat = "1s"\ntransfer_timeout = "10m"\n')
    for i, (name, n) in enumerate(SITES):
        others = ", ".join(f"{o} = {BW}" for o, _ in SITES[i + 1:])
        c += (f'[[site]]\nname = "{name}"\nprocessors = {n}\n'
              f'manager = {{ type = "agent", grace = "60s" }}\n'
              + (f"bandwidth = {{ {others} }}\n" if others else ""))
    return c + ('[scheduler]\npolicy = "koala"\nfit = "ctf"\nclaiming = "icp"\nmax_queued = 100\n'
                'site_errors = 10\ncompletion_errors = 10\n'
                '[scheduler.koala]\ns = 2\nscan_interval = "5s"\nmax_tries = "none"\n'
                '[scheduler.icp]\nl = 0.75\nl_step = 0.125\nl_min = 0.25\nt = 0.0\n'
                'max_claim_tries = "none"\npreempt = true\n')


def workload(rng):
    """seed 000 §4's jobs, scaled (kind = "seed000" in coalloc_sim::workload)."""
    jobs, t = [], 0.0
    for j in range(JOBS):
        size = rng.choice([36, 72])
        comps = rng.choice([3, 4] if size == 36 else [3, 4, 6, 8])
        nbytes = rng.choice([4, 8]) * 10**9 // BYTES_SCALE
        t += rng.expovariate(1 / GAP_MEAN)
        jobs.append(dict(n=j, at=t, size=size, comps=comps, prio=rng.choice(["high", "low"]),
                         bytes=nbytes, replicas=sorted(rng.sample(range(len(SITES)), 2)),
                         runtime=rng.uniform(30, 192) / TIME_SCALE))
    return jobs


def main():
    probe = subprocess.run(["ip", "netns", "add", "hx-probe"], capture_output=True)
    if probe.returncode != 0:
        print("transfers.py: network namespaces cannot be made here (root needed): skipped")
        sys.exit(77)
    subprocess.run(["ip", "netns", "del", "hx-probe"])
    sites_sh("up", str(len(SITES)), "--rate", RATE)
    procs = []
    try:
        run(procs)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        sites_sh("down")
        shutil.rmtree(BASE, ignore_errors=True)


def run(procs):
    state = os.path.join(BASE, "state")
    cfg = os.path.join(BASE, "config.toml")
    open(cfg, "w").write(config())
    log = open(os.path.join(BASE, "server.log"), "w")
    procs.append(subprocess.Popen([COALLOC, "serve", "--config", cfg, "--state-dir", state],
                                  stdout=subprocess.DEVNULL, stderr=log))
    _, _, call = connect(state, 0.2)
    for i, (name, n) in enumerate(SITES, start=1):
        d = os.path.join(BASE, f"agent-{name}")
        os.makedirs(d)
        tok = subprocess.run([COALLOC, "site", "add", name, "--state-dir", state],
                             check=True, capture_output=True, text=True).stdout
        open(os.path.join(d, "token"), "w").write(tok)
        open(os.path.join(d, "agent.toml"), "w").write(
            f'[agent]\nrelay_bind = "10.241.0.{10 + i}:7400"\n[[site]]\nname = "{name}"\n'
            f'processors = {n}\nmanager = {{ type = "local" }}\n')
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", f"hx-site{i}", COALLOC, "agent", "--token-file",
             os.path.join(d, "token"), "--config", os.path.join(d, "agent.toml"),
             "--state-dir", os.path.join(d, "state")],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "agent.log"), "w")))
    deadline = time.time() + 60
    while not all(s["link"]["connected"] and s["healthy"] for s in call("/v1/sites")["sites"]):
        if time.time() > deadline:
            sys.exit("the agents did not connect")
        time.sleep(0.2)
    rng = random.Random(SEED)
    jobs = workload(rng)
    os.makedirs(os.path.join(BASE, "files"))
    for job in jobs:
        path = os.path.join(BASE, "files", f"job{job['n']}.dat")
        open(path, "wb").write(rng.randbytes(job["bytes"]))
        for r in job["replicas"]:
            subprocess.run([COALLOC, "file", "register", SITES[r][0], f"job{job['n']}.dat", path,
                            "--state-dir", state], check=True, capture_output=True)
    events = []
    ev = subprocess.Popen([COALLOC, "events", "--json", "--state-dir", state],
                          stdout=subprocess.PIPE, text=True)
    procs.append(ev)
    threading.Thread(target=lambda: events.extend(json.loads(l) for l in ev.stdout),
                     daemon=True).start()
    time.sleep(0.5)
    t0, ids = time.time(), {}
    for job in jobs:
        time.sleep(max(0.0, t0 + job["at"] - time.time()))
        count = job["size"] // job["comps"]
        comp = {"count": count, "job_type": "single", "executable": "/bin/sh",
                "arguments": ["-c", f'"$COALLOC" barrier || exit 1; sleep {job["runtime"]:.2f}'],
                "environment": {"COALLOC": COALLOC}}
        body = {"name": f"seed000-{job['n']}", "kind": "unordered", "priority": job["prio"],
                "max_wall_time": "15m", "component": [comp] * job["comps"],
                "input_file": {"name": f"job{job['n']}.dat", "size": job["bytes"],
                               "distribution": "whole"}}
        ids[call("/v1/jobs", json.dumps(body).encode())["job"]] = job
    deadline = time.time() + 1200
    while not all(call(f"/v1/jobs/{i}")["state"] in ("finished", "failed") for i in ids):
        if time.time() > deadline:
            sys.exit("the jobs did not end in 20 minutes")
        time.sleep(1)
    time.sleep(1)
    results = {r["job"]: r for r in map(json.loads, open(os.path.join(state, "logs/result.jsonl")))}
    bw = {(s["name"], b["to"]): b.get("measured") for s in call("/v1/sites")["sites"]
          for b in s.get("bandwidth", [])}
    report(list(events), ids, results, bw, t0)


def report(events, ids, results, bw, t0):
    os.makedirs(OUT, exist_ok=True)
    started = {e["transfer"]: e for e in events if e.get("event") == "transfer_started"}
    rows = []
    for e in events:
        if e.get("event") != "transfer_done" or not e.get("moved"):
            continue
        s = started[e["transfer"]]
        begin, end = e["time"] - e["ms"], e["time"]
        rows.append(dict(job=e["job"], component=e["component"], src=s["from"], dst=s["to"],
                         bytes=e["moved"], ms=e["ms"], mb_s=round(e["moved"] / e["ms"] / 1000, 2),
                         model_ms=e["moved"] * 1000 // BW, begin=begin, end=end))
    for r in rows:  # transfers sharing a link with this one at its middle
        mid = (r["begin"] + r["end"]) / 2
        r["sharing"] = sum(1 for o in rows if o is not r and o["begin"] <= mid <= o["end"]
                           and {o["src"], o["dst"]} & {r["src"], r["dst"]})
    keys = ["job", "component", "src", "dst", "bytes", "ms", "model_ms", "mb_s", "sharing"]
    with open(os.path.join(OUT, "transfers.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    jrows = []
    for i, job in sorted(ids.items()):
        r = results.get(i, {})
        mine = [x for x in rows if x["job"] == i]
        # the last placement's FTT estimate: its JST minus its JPT (seed 000 §3.2)
        ftt = (r["last_jst"] - r["placed"]) if r.get("last_jst") and r.get("placed") else None
        arrive = (max(x["end"] for x in mine) - r["placed"]) if mine and r.get("placed") else None
        jrows.append(dict(job=i, size=job["size"], components=job["comps"], priority=job["prio"],
                          file_mb=job["bytes"] // 10**6, outcome=r.get("outcome"),
                          transfers=len(mine), ftt_ms=ftt, files_in_ms=arrive,
                          barrier_ms=(r["barrier_release"] - r["placed"]) if r.get("barrier_release") else None,
                          start_delay_ms=r.get("start_delay_ms"), placement_ms=r.get("placement_ms"),
                          placements=r.get("placement_tries")))
    with open(os.path.join(OUT, "jobs.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, list(jrows[0]))
        w.writeheader()
        w.writerows(jrows)
    moved = [j for j in jrows if j["files_in_ms"] and j["ftt_ms"]]
    alone = [r for r in rows if r["sharing"] == 0]
    shared = [r for r in rows if r["sharing"] > 0]
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
    lines = [
        f"jobs {len(ids)} (seed {SEED}), finished {sum(j['outcome'] == 'finished' for j in jrows)}; "
        f"transfers that moved bytes {len(rows)}, of {sum(r['bytes'] for r in rows) / 1e6:.0f} MB",
        f"alone on their links: {len(alone)}, mean {mean([r['mb_s'] for r in alone]):.2f} MB/s, "
        f"time / model (bytes / 12.5 MB/s) {mean([r['ms'] / r['model_ms'] for r in alone]):.3f}",
        f"sharing a link: {len(shared)}, mean {mean([r['mb_s'] for r in shared]):.2f} MB/s, "
        f"time / model {mean([r['ms'] / r['model_ms'] for r in shared]):.3f}",
        f"jobs with transfers: {len(moved)}; files in / FTT estimate (mean) "
        f"{mean([j['files_in_ms'] / j['ftt_ms'] for j in moved]):.3f}, max "
        f"{max([j['files_in_ms'] / j['ftt_ms'] for j in moved], default=float('nan')):.3f}; "
        "barrier release - JST (mean ms) "
        f"{mean([j['barrier_ms'] - j['ftt_ms'] for j in moved]):.0f}; without transfers "
        f"{mean([j['barrier_ms'] - j['ftt_ms'] for j in jrows if not j['files_in_ms'] and j['barrier_ms'] is not None and j['ftt_ms'] is not None]):.0f}",
        "measured bandwidth (EWMA, MB/s): " + ", ".join(
            f"{a}->{b} {v / 1e6:.2f}" for (a, b), v in sorted(bw.items()) if v),
    ]
    open(os.path.join(OUT, "summary.txt"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
