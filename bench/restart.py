"""A restart after ten million journal events (issue 23, item 4), and what snapshots cost the
driver on the way.

Starts `coalloc serve` (three local sites, all marked unusable so that nothing runs,
`min_job_age = 1s`), queues QUEUED two-component jobs (arrays of ARRAY elements), then churns:
submits an array and cancels it, again and again, until the journal's last entry number
(`seq`, every input the server took: a submission, a cancel, the bookkeeping of jobs leaving
memory) passes EVENTS. Then `kill -9`, a restart, and the time until `/v1/health` answers.
Prints a Markdown table and, with --json, one JSON object.

  python3 bench/restart.py target/release/coalloc [--queued 1000000] [--events 10000000]
          [--array 10000] [--snapshot-every 25000] [--wait 3] [--json] [--postgres URL]

--wait 0 kills the server the moment the last churn request is answered, in the middle of
the storm (the worst case: as many entries after the newest snapshot as it gets).

--postgres URL (issue 32): the journal, snapshots and history in a new database `restart`
of the PostgreSQL cluster at URL (`postgres://coalloc@127.0.0.1:PORT`, as bench/pgcluster.sh
starts one); sizes are then the tables'. With --copy-at-kill DIR, the database as the kill
left it is copied too, to `restart_saved` (CREATE DATABASE ... TEMPLATE: its files), for
bench/restart-state.sh. `psql` must be on the PATH.

Standard library only; uses serverlib's HTTP helper.
"""
import argparse, atexit, json, os, re, signal, sqlite3, statistics, subprocess, sys, tempfile, time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import connect  # noqa: E402

SPEC = json.dumps({
    "kind": "unordered",
    "component": [
        {"count": 1, "executable": "/bin/true"},
        {"count": 1, "executable": "/bin/true"},
    ],
}).encode()


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def psql(url, sql):
    """Run SQL on the database at `url` with psql; what it printed (tuples only)."""
    return subprocess.run(["psql", url, "-AtX", "-v", "ON_ERROR_STOP=1", "-c", sql],
                          check=True, capture_output=True, text=True).stdout.strip()


def query(state, pg, sql):
    """One number from the journal's database: SQLite's in `state`, or PostgreSQL's at `pg`."""
    if pg:
        return int(psql(pg, sql) or 0)
    db = sqlite3.connect(f"file:{state}/journal.sqlite?mode=ro", uri=True, timeout=30)
    try:
        return db.execute(sql).fetchone()[0] or 0
    finally:
        db.close()


def last_seq(state, pg=None):
    return query(state, pg, "SELECT max(seq) FROM journal")


def request(url, auth, method, path, body=None):
    headers = dict(auth, **({"Content-Type": "application/json"} if body else {}))
    req = urllib.request.Request(url + path, data=body, headers=headers, method=method)
    return json.loads(urllib.request.urlopen(req, timeout=600).read())


def start(coalloc, config, state, log):
    try:
        os.remove(os.path.join(state, "server.json"))
    except FileNotFoundError:
        pass
    server = subprocess.Popen([coalloc, "serve", "--config", config, "--state-dir", state],
                              stdout=subprocess.DEVNULL, stderr=open(log, "a"))
    # Not left running if this script fails.
    atexit.register(lambda: server.poll() is None and server.kill())
    return server


def server_url(state):
    """The API's address from `server.json`, once the server has written it whole."""
    while True:
        try:
            return json.load(open(f"{state}/server.json"))["url"]
        except (OSError, ValueError, KeyError):
            time.sleep(0.002)


def wait_health(url, since, timeout=120):
    while True:
        try:
            urllib.request.urlopen(url + "/v1/health", timeout=5).read()
            return time.monotonic() - since
        except OSError:
            if time.monotonic() - since > timeout:
                sys.exit("the restarted server did not answer")
            time.sleep(0.005)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("coalloc")
    ap.add_argument("--queued", type=int, default=1_000_000)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--array", type=int, default=10_000)
    ap.add_argument("--snapshot-every", type=int, default=25_000)
    ap.add_argument("--wait", type=float, default=3.0,
                    help="seconds between the storm's end and the kill")
    ap.add_argument("--copy-at-kill", metavar="DIR",
                    help="copy the state directory as the kill left it to DIR (to profile "
                    "the restart by hand)")
    ap.add_argument("--postgres", metavar="URL",
                    help="the journal in a new database of the PostgreSQL cluster at URL")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    pg = None
    if a.postgres:
        psql(f"{a.postgres}/postgres", "CREATE DATABASE restart")
        pg = f"{a.postgres}/restart"

    root = tempfile.mkdtemp(prefix="coalloc-restart-")
    state, config, log = f"{root}/state", f"{root}/config.toml", f"{root}/server.log"
    sites = "".join(f'[[site]]\nname = "{n}"\nprocessors = 4\nmanager = {{ type = "local" }}\n'
                    for n in ("alpha", "beta", "gamma"))
    open(config, "w").write(
        f'[server]\nmin_job_age = "1s"\nsnapshot_every = {a.snapshot_every}\n'
        + (f'journal = "{pg}"\n' if pg else "") +
        f'{sites}[scheduler]\npolicy = "fcfs"\n')
    server = start(a.coalloc, config, state, log)
    url, auth, _ = connect(state, 0.2)
    for n in ("alpha", "beta", "gamma"):
        request(url, auth, "PUT", f"/v1/sites/{n}/usable", b'{"usable": false}')
    empty = rss_mib(server.pid)

    def array(n):
        return request(url, auth, "POST", f"/v1/jobs?array=0-{n - 1}", SPEC)["job"]

    t0 = time.monotonic()
    queued = 0
    while queued < a.queued:
        n = min(a.array, a.queued - queued)
        array(n)
        queued += n
    queue_s = time.monotonic() - t0
    print(f"queued {queued} jobs in {queue_s:.1f} s", file=sys.stderr)

    t0 = time.monotonic()
    churned = 0
    seq = last_seq(state, pg)
    reported = seq
    while seq < a.events:
        first = array(a.array)
        request(url, auth, "DELETE", f"/v1/arrays/{first}")
        churned += a.array
        seq = last_seq(state, pg)
        if seq - reported >= 1_000_000:
            reported = seq
            el = time.monotonic() - t0
            print(f"  {seq:,} events, {churned:,} jobs submitted and cancelled, {el:.0f} s, "
                  f"RSS {rss_mib(server.pid):.0f} MiB", file=sys.stderr)
    churn_s = time.monotonic() - t0
    time.sleep(a.wait)  # the last cancelled jobs age out; a snapshot may finish
    seq = last_seq(state, pg)
    before = rss_mib(server.pid)
    if pg:
        journal = query(state, pg, "SELECT pg_total_relation_size('journal')")
        snapshot = query(state, pg, "SELECT sum(length(bytes)) FROM snapshot "
                         "WHERE seq = (SELECT max(seq) FROM snapshot)")
    else:
        journal = sum(os.path.getsize(f"{state}/{f}") for f in os.listdir(state)
                      if f.startswith("journal.sqlite"))
        snapshot = os.path.getsize(f"{state}/snapshot.bin") if os.path.exists(
            f"{state}/snapshot.bin") else 0
    kept = query(state, pg, "SELECT count(*) FROM journal")

    server.send_signal(signal.SIGKILL)
    server.wait()
    if a.copy_at_kill:
        subprocess.run(["cp", "-a", state, a.copy_at_kill], check=True)
        if pg:
            # The killed server's sessions end when PostgreSQL notices: until then the
            # database cannot be a template.
            for _ in range(100):
                try:
                    psql(f"{a.postgres}/postgres", "CREATE DATABASE restart_saved TEMPLATE restart")
                    break
                except subprocess.CalledProcessError:
                    time.sleep(0.1)
            else:
                sys.exit("could not copy the database restart")
        # The copy's dirty pages would be written back during the restart and slow it.
        subprocess.run(["sync"], check=True)
    t0 = time.monotonic()
    server = start(a.coalloc, config, state, log)
    url = server_url(state)
    restart_s = wait_health(url, t0)
    time.sleep(0.5)
    after = rss_mib(server.pid)
    page = request(url, auth, "GET", "/v1/jobs?state=pending&limit=1")
    still = len(page["jobs"])
    server.send_signal(signal.SIGTERM)
    server.wait()

    text = re.sub(r"\x1b\[[0-9;]*m", "", open(log).read())
    # The driver's pauses for forked snapshots; not the one it writes itself at the SIGTERM
    # above ("snapshot taken ... bytes=", 0.4 s for a million jobs: a stop, not a pause).
    pauses = [int(m) for m in re.findall(r"snapshot taken \(forked\).*? ms=(\d+)", text)]
    writes = [int(m) for m in re.findall(r"snapshot written.*? ms=(\d+)", text)]
    compactions = [int(m) for m in re.findall(r"journal compacted.*? ms=(\d+)", text)]
    restored = re.findall(r"snapshot restored and journal replayed covered=(\d+) replayed=(\d+)"
                          r"(?: restore_ms=(\d+) replay_ms=(\d+))?",
                          text)
    covered, replayed, restore_ms, replay_ms = (
        [int(x) if x else None for x in restored[-1]] if restored else [None] * 4)
    out = {
        "queued": queued, "queue_s": round(queue_s, 1), "events": seq, "churned_jobs": churned,
        "churn_s": round(churn_s, 1), "events_per_s": round((seq - queued) / churn_s),
        "rss_empty_mib": round(empty, 1), "rss_before_kill_mib": round(before, 1),
        "rss_after_restart_mib": round(after, 1),
        "journal_mib": round(journal / 2**20, 1), "journal_entries_kept": kept,
        "snapshot_mib": round(snapshot / 2**20, 1), "restart_s": round(restart_s, 2),
        "restart_covered_seq": covered, "restart_replayed_entries": replayed,
        "restart_restore_ms": restore_ms, "restart_replay_ms": replay_ms,
        "snapshots": len(pauses),
        "snapshot_pause_ms_median": statistics.median(pauses) if pauses else None,
        "snapshot_pause_ms_max": max(pauses) if pauses else None,
        "snapshot_write_ms_median": statistics.median(writes) if writes else None,
        "snapshot_write_ms_max": max(writes) if writes else None,
        "compaction_ms_median": statistics.median(compactions) if compactions else None,
        "compaction_ms_max": max(compactions) if compactions else None,
        "queued_after_restart_seen": still > 0, "state_dir": root,
    }
    if a.json:
        print(json.dumps(out))
        return
    print("| measured | value |\n| --- | ---: |")
    for k, v in out.items():
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
