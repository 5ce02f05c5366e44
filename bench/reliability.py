#!/usr/bin/env python3
"""Reliability runs of the server (issue 20), on the embedded default (three local clusters of
16 slots, SQLite journal) of `ROOT/target/release/coalloc serve`:

  clients  N submissions from C concurrent clients on loopback, as fast as they can. A
           submission refused with 429 or 503 is retried after a back-off; any other answer
           or a broken connection is counted as an error. Then the server is stopped with
           SIGKILL and restarted, and every job id handed out must still be there (the
           journal kept it) and be distinct: none lost, none doubled.

  soak     jobs flow for MINUTES while the server is killed with SIGKILL at a random moment
           of every minute and restarted at once on the same state directory. Each job has
           two components that check in at the barrier (`coalloc barrier`), then append
           `JOB COMPONENT LAUNCH RANK` to a log and run 1-4 s. A submission whose answer was lost
           in a kill is looked up by its unique name and made again only when the server
           does not have it. At the end every job must have finished, exactly once per
           name (none lost, none doubled), and no launch may have passed the barrier twice
           (nothing ran twice); a component that ran under two launches (its job retried)
           is counted and shown.

    python3 bench/reliability.py clients ROOT [--clients 64] [--submissions 10000]
    python3 bench/reliability.py soak ROOT [--minutes 30] [--rate 2]

Prints what it did and one line `ok` or `FAILED: ...`; exit 1 on failure.
"""
import argparse, json, os, random, signal, subprocess, sys, tempfile, threading, time
import urllib.error, urllib.request


class Server:
    """`coalloc serve` on a state directory, restartable; `call` retries nothing."""

    def __init__(self, coalloc, state):
        self.coalloc, self.state, self.proc = coalloc, state, None
        self.url, self.auth = None, None
        self.lock = threading.Lock()

    def start(self):
        try:
            os.remove(os.path.join(self.state, "server.json"))
        except FileNotFoundError:
            pass
        os.makedirs(self.state, exist_ok=True)
        log = open(os.path.join(os.path.dirname(self.state), "server.log"), "ab")
        self.proc = subprocess.Popen([self.coalloc, "serve", "--state-dir", self.state],
                                     stdout=log, stderr=log)
        deadline = time.time() + 60
        while not os.path.exists(os.path.join(self.state, "server.json")):
            if time.time() > deadline or self.proc.poll() is not None:
                sys.exit("FAILED: the server did not start (see server.log)")
            time.sleep(0.02)
        info = json.load(open(os.path.join(self.state, "server.json")))
        token = open(os.path.join(self.state, "token")).read().strip()
        with self.lock:
            self.url, self.auth = info["url"], {"Authorization": "Bearer " + token}

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill9()

    def call(self, method, path, body=None, timeout=30):
        """(status, decoded answer); raises OSError when there was no answer."""
        with self.lock:
            url, auth = self.url, self.auth
        headers = dict(auth, **({"Content-Type": "application/json"} if body else {}))
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, text.decode(errors="replace")

    def jobs(self):
        """Every job the server lists, following a paging cursor when there is one."""
        out, path = [], "/v1/jobs?state=all"
        while True:
            status, answer = self.call("GET", path)
            if status != 200:
                raise OSError(f"GET /v1/jobs: {status} {answer}")
            out += answer["jobs"]
            cursor = answer.get("next")
            if not cursor:
                return out
            path = f"/v1/jobs?state=all&after={cursor}"


retried = [0]


def submit_retrying(server, body, errors):
    """Submit until accepted; 429 and 503 are retried after a growing pause. The job id, or
    None after an answer that is neither (counted in `errors`)."""
    pause = 0.01
    while True:
        try:
            status, answer = server.call("POST", "/v1/jobs", body)
        except OSError as e:
            errors.append(f"no answer: {e}")
            return None
        if status in (200, 201):
            return answer["job"]
        if status in (429, 503):
            retried[0] += 1
            time.sleep(pause * (1 + random.random()))
            pause = min(pause * 2, 1.0)
            continue
        errors.append(f"{status}: {answer}")
        return None


def clients(args, coalloc, work):
    state = os.path.join(work, "state")
    server = Server(coalloc, state)
    server.start()
    time.sleep(0.3)
    job = {"kind": "unordered", "component": [{"count": 1, "executable": "/bin/true"}]}
    ids, errors, lock = [], [], threading.Lock()
    total = args.submissions
    done = [0]

    def client(k):
        # The first `total % clients` clients make one submission more.
        for i in range(total // args.clients + (k < total % args.clients)):
            body = dict(job, name=f"c{k}-{i}")
            j = submit_retrying(server, body, errors)
            with lock:
                done[0] += 1
                if j is not None:
                    ids.append(j)

    t0 = time.time()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        time.sleep(1)
        print(f"  {done[0]}/{total} submitted, {time.time() - t0:.0f} s",
              file=sys.stderr)
    elapsed = time.time() - t0
    print(f"{len(ids)} accepted of {total} in {elapsed:.1f} s "
          f"({len(ids) / elapsed:.0f}/s) by {args.clients} clients; {retried[0]} answers "
          f"429/503 retried; {len(errors)} errors")
    server.kill9()
    server.start()
    listed = {j["id"] for j in server.jobs()}
    missing = [i for i in ids if i not in listed]
    server.stop()
    problems = []
    if errors:
        problems.append(f"{len(errors)} submissions neither accepted nor refused with "
                        f"429/503 (first: {errors[0]})")
    if len(set(ids)) != len(ids):
        problems.append("an id was handed out twice")
    if missing:
        problems.append(f"{len(missing)} accepted jobs missing after kill -9 and restart "
                        f"(first: {missing[0]})")
    return problems


def soak(args, coalloc, work):
    state = os.path.join(work, "state")
    ran = os.path.join(work, "ran.log")
    server = Server(coalloc, state)
    server.start()
    script = (f'"$COALLOC" barrier || exit 1; '
              f'echo "$COALLOC_JOB_ID $COALLOC_COMPONENT $COALLOC_LAUNCH $COALLOC_LOCAL_RANK" >> {ran}; '
              f'sleep $((1 + $(od -An -N1 -tu1 /dev/urandom) % 4))')
    comp = {"count": 2, "job_type": "multiple", "executable": "/bin/sh", "arguments": ["-c", script],
            "environment": {"COALLOC": coalloc}}
    names, errors, stop = [], [], threading.Event()
    kills = [0]

    def submitter():
        n = 0
        while not stop.is_set():
            name = f"soak-{n}"
            body = {"name": name, "kind": "unordered", "max_wall_time": "5m",
                    "component": [comp, comp]}
            while not stop.is_set():
                try:
                    status, answer = server.call("POST", "/v1/jobs", body, timeout=10)
                except OSError:
                    # Killed mid-call: was it journaled? Ask the restarted server.
                    time.sleep(0.5)
                    try:
                        if any(j.get("name") == name for j in server.jobs()):
                            break
                    except OSError:
                        pass
                    continue
                if status in (200, 201):
                    break
                if status in (429, 503):
                    time.sleep(0.5)
                    continue
                errors.append(f"submit {name}: {status} {answer}")
                break
            names.append(name)
            n += 1
            time.sleep(random.expovariate(args.rate))

    t = threading.Thread(target=submitter)
    t.start()
    t0 = time.time()
    end = t0 + args.minutes * 60
    while time.time() < end:
        minute_end = min(end, time.time() + 60)
        kill_at = time.time() + random.uniform(0, minute_end - time.time())
        time.sleep(max(0, kill_at - time.time()))
        if time.time() >= end:
            break
        server.kill9()
        kills[0] += 1
        server.start()
        print(f"  {time.time() - t0:.0f} s: kill -9 #{kills[0]}, {len(names)} jobs submitted",
              file=sys.stderr)
        time.sleep(max(0, minute_end - time.time()))
    stop.set()
    t.join()
    # Let what was submitted finish.
    deadline = time.time() + 600
    while True:
        jobs = [j for j in server.jobs() if str(j.get("name", "")).startswith("soak-")]
        active = [j for j in jobs if j["state"] not in ("finished", "failed", "cancelled")]
        if not active or time.time() > deadline:
            break
        time.sleep(2)
    server.stop()
    by_name = {}
    for j in jobs:
        by_name.setdefault(j["name"], []).append(j)
    lines = open(ran).read().split("\n") if os.path.exists(ran) else []
    launches = [tuple(l.split()) for l in lines if l.strip()]
    seen, twice, retried = set(), [], set()
    per_component = {}
    for job, c, launch, rank in launches:
        if (job, c, launch, rank) in seen:
            twice.append((job, c, launch, rank))
        seen.add((job, c, launch, rank))
        per_component.setdefault((job, c), set()).add(launch)
    retried = {k for k, v in per_component.items() if len(v) > 1}
    finished = sum(1 for v in by_name.values() if v[0]["state"] == "finished")
    print(f"{args.minutes} min, {kills[0]} kill -9, {len(names)} jobs submitted, "
          f"{finished} finished, {len(launches)} component processes passed the barrier, "
          f"{len(retried)} components ran under a second launch (their job retried)")
    problems = []
    lost = [n for n in names if n not in by_name]
    doubled = [n for n, v in by_name.items() if len(v) > 1]
    unfinished = [n for n, v in by_name.items() if v[0]["state"] != "finished"]
    if errors:
        problems.append(f"{len(errors)} submissions refused (first: {errors[0]})")
    if lost:
        problems.append(f"{len(lost)} jobs lost (first: {lost[0]})")
    if doubled:
        problems.append(f"{len(doubled)} jobs made twice (first: {doubled[0]})")
    if unfinished:
        problems.append(f"{len(unfinished)} jobs did not finish (first: "
                        f"{by_name[unfinished[0]][0]})")
    if twice:
        problems.append(f"{len(twice)} processes of one launch passed the barrier twice "
                        f"(first: {twice[0]})")
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", choices=["clients", "soak"])
    p.add_argument("root", help="the checkout whose target/release/coalloc runs")
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--submissions", type=int, default=10000)
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--rate", type=float, default=2.0, help="jobs per second (soak)")
    p.add_argument("--binary", help="another coalloc binary than ROOT/target/release/coalloc")
    args = p.parse_args()
    coalloc = args.binary or os.path.join(os.path.abspath(args.root), "target/release/coalloc")
    work = tempfile.mkdtemp(prefix=f"coalloc-{args.run}-")
    print(f"machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}; "
          f"{coalloc}; work {work}")
    problems = (clients if args.run == "clients" else soak)(args, coalloc, work)
    if problems:
        print("FAILED: " + "; ".join(problems))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
