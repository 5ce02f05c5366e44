#!/usr/bin/env python3
"""Seed 002 §4.2's microbenchmarks on a real `coalloc serve` (local backend).

Starts the server on `origin.toml` (one machine of 64 processor slots) in a temporary state
directory, listens to its event stream (GET /v1/events), and submits, one at a time:

- Fig. 2: one component of P = 1, 2, 4, ..., 64 processes (`job_type = "multiple"`, GRAM's
  default: P independent processes);
- Fig. 4: 64 processes split into M = 1, 2, 4, 8, 12, 16, 20, 25 components (sizes differ by
  at most one), all on the one machine, as the document's subjobs were.

Every process is `/bin/bash -c` that notes the time (`$EPOCHREALTIME`, µs), runs `coalloc barrier` (the
co-allocation barrier: it checks in and returns when the server releases the job), notes
the time again and appends `component t_in t_out` to a file. Per job the script keeps the
server's timestamps (submit, placed, barrier_release), the events of its components
(component_submitted, component_started, component_checked_in; the server's clock, ms) and
every process's time in and out of the barrier (same host, same clock).

Writes OUT/jobs.csv (one row per job), OUT/processes.csv (one row per process) and
OUT/events.csv (one row per event), times in ms after the job's submit (server's).

    python3 microbench.py COALLOC OUT [--reps N]     # default 10
"""
import json, os, shutil, statistics, subprocess, sys, tempfile, threading, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from serverlib import connect, serve  # noqa: E402

FIG2_PROCESSES = [1, 2, 4, 8, 16, 32, 64]
FIG4_COMPONENTS = [1, 2, 4, 8, 12, 16, 20, 25]
TOTAL = 64
EVENTS = ("component_submitted", "component_started", "component_checked_in")


def split(total, parts):
    """`total` processes over `parts` components, sizes differing by at most one."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def main():
    coalloc, out = sys.argv[1], sys.argv[2]
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 10
    # The barrier program: `coalloc barrier`, or the small `coalloc-barrier` of
    # coalloc-runtime when it is beside the coalloc binary (as bench/server.sh does).
    small = os.path.join(os.path.dirname(os.path.abspath(coalloc)), "coalloc-barrier")
    barrier = [small] if os.path.isfile(small) else [coalloc, "barrier"]
    print("barrier program:", " ".join(barrier))
    os.makedirs(out, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="coalloc-seed002-")
    server, state = serve(coalloc, "coalloc-seed002-", os.path.join(HERE, "origin.toml"))
    events = []
    try:
        url, auth, call = connect(state, settle=0.3)

        def listen():
            req = urllib.request.Request(url + "/v1/events", headers=auth)
            for line in urllib.request.urlopen(req):
                if line.startswith(b"data:"):
                    events.append(json.loads(line[5:]))

        threading.Thread(target=listen, daemon=True).start()
        time.sleep(0.3)
        rows, procs, ev_rows = [], [], []
        n = 0

        def run(figure, sizes, rep):
            nonlocal n
            n += 1
            waits = os.path.join(scratch, f"w{n}")
            script = ('t0=$EPOCHREALTIME; "$0" "$@" >/dev/null; t1=$EPOCHREALTIME; '
                      f'echo "$COALLOC_COMPONENT $t0 $t1" >> {waits}')
            comps = [{"count": c, "job_type": "multiple", "executable": "/bin/bash",
                      "arguments": ["-c", script] + barrier} for c in sizes]
            job = call("/v1/jobs", json.dumps({"kind": "unordered", "component": comps}).encode())["job"]
            while True:
                j = call(f"/v1/jobs/{job}")
                if j["state"] in ("finished", "failed"):
                    break
                time.sleep(0.01)
            if j["state"] != "finished":
                sys.exit(f"job {job} failed: {j.get('last_abort')}")
            time.sleep(0.05)  # the last events reach the listener
            t0 = j["submit"]
            lines = [l.split() for l in open(waits)]
            if len(lines) != sum(sizes):
                sys.exit(f"job {job}: {len(lines)} processes reported, {sum(sizes)} expected")
            p = [(int(c), float(a) * 1e3 - t0, float(b) * 1e3 - t0) for c, a, b in lines]
            for c, a, b in p:
                procs.append([figure, len(sizes), sum(sizes), rep, job, c, round(a, 3), round(b, 3)])
            ev = [e for e in events if e.get("job") == job and e["event"] in EVENTS]
            for e in ev:
                ev_rows.append([figure, len(sizes), sum(sizes), rep, job, e["component"],
                                e["event"], e["time"] - t0])
            last = {k: max((e["time"] - t0 for e in ev if e["event"] == k), default="")
                    for k in EVENTS}
            first = {k: min((e["time"] - t0 for e in ev if e["event"] == k), default="")
                     for k in EVENTS}
            w = [b - a for _, a, b in p]
            rows.append([figure, len(sizes), sum(sizes), rep, job, j["placed"] - t0,
                         first["component_submitted"], last["component_submitted"],
                         first["component_started"], last["component_started"],
                         first["component_checked_in"], last["component_checked_in"],
                         j["barrier_release"] - t0, round(max(b for _, _, b in p), 3),
                         round(statistics.mean(w), 3), round(min(w), 3), round(max(w), 3)])

        for rep in range(reps):
            for p in FIG2_PROCESSES:
                run("fig2", [p], rep)
            for m in FIG4_COMPONENTS:
                run("fig4", split(TOTAL, m), rep)
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:  # graceful shutdown waits for the event stream
            server.kill()
            server.wait()
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    key = "figure,components,processes,rep,job"
    write(os.path.join(out, "jobs.csv"),
          key + ",placed,first_submitted,last_submitted,first_started,last_started,"
          "first_checked_in,last_checked_in,release,last_out,mean_wait,min_wait,max_wait", rows)
    write(os.path.join(out, "processes.csv"), key + ",component,barrier_in,barrier_out", procs)
    write(os.path.join(out, "events.csv"), key + ",component,event,time", ev_rows)


def write(path, header, rows):
    with open(path, "w") as f:
        f.write(header + "\n")
        for r in rows:
            f.write(",".join(str(x) for x in r) + "\n")


if __name__ == "__main__":
    main()
