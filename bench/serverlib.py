"""What the bench scripts that drive `coalloc serve` share: start it (the embedded default)
on a new temporary state directory, wait until it listens, call its HTTP API with its token,
and read a process's CPU time from /proc. Imported by barrier_wait_cpu.py, job_cpu.py,
server_events.py and experiments/seed-002/microbench.py."""
import json, os, subprocess, sys, tempfile, time, urllib.request


def serve(coalloc, prefix, config=None):
    """`coalloc serve` on a new state directory (the embedded default, or the configuration
    file `config`); returns (process, state directory)."""
    state = tempfile.mkdtemp(prefix=prefix)
    extra = ["--config", config] if config else []
    server = subprocess.Popen([coalloc, "serve", "--state-dir", state] + extra,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return server, state


def connect(state, settle, timeout=20):
    """Wait (up to `timeout` s) for the server of `state` to listen, then `settle` s more;
    returns (url, auth headers, call), where call(path, body=None) sends a GET, or a POST of
    the JSON bytes `body`, and returns the decoded answer."""
    deadline = time.time() + timeout
    while not os.path.exists(os.path.join(state, "server.json")):
        if time.time() > deadline:
            sys.exit("the server did not start")
        time.sleep(0.02)
    time.sleep(settle)
    url = json.load(open(os.path.join(state, "server.json")))["url"]
    auth = {"Authorization": "Bearer " + open(os.path.join(state, "token")).read().strip()}

    def call(path, body=None):
        headers = dict(auth, **({"Content-Type": "application/json"} if body else {}))
        req = urllib.request.Request(url + path, data=body, headers=headers)
        return json.loads(urllib.request.urlopen(req).read())

    return url, auth, call


def process_cpu_ms(pid):
    """User + system CPU time of process `pid`, in ms."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000 / os.sysconf("SC_CLK_TCK")
