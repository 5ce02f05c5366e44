"""A real `coalloc serve` (the embedded default: three local clusters alpha, beta, gamma)
in a temporary state directory, started for the session and stopped after it. The binary
is `COALLOC_BIN`, else the repository's target/debug/coalloc."""

import json
import os
import pathlib
import signal
import subprocess
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


def coalloc_bin():
    b = os.environ.get("COALLOC_BIN") or str(REPO / "target" / "debug" / "coalloc")
    if not os.access(b, os.X_OK):
        pytest.exit(f"no coalloc binary at {b}: build it (cargo build --bin coalloc) "
                    "or set COALLOC_BIN", returncode=2)
    return b


class Server:
    def __init__(self, state, config=None):
        self.bin = coalloc_bin()
        self.state = state
        self.log = open(state.parent / "serve.log", "w")
        env = {k: v for k, v in os.environ.items()
               if k not in ("COALLOC_URL", "COALLOC_TOKEN", "COALLOC_SOCKET",
                            "COALLOC_STATE_DIR")}
        # Components call `coalloc barrier`: this build's binary first on their PATH.
        env["PATH"] = os.path.dirname(self.bin) + os.pathsep + env.get("PATH", "")
        extra = ["--config", str(config)] if config else []
        self.proc = subprocess.Popen([self.bin, "serve", "--state-dir", str(state), *extra],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while not (state / "server.json").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("coalloc serve did not start: "
                                   + (state.parent / "serve.log").read_text())
            time.sleep(0.05)
        self.url = json.loads((state / "server.json").read_text())["url"]
        self.token = (state / "token").read_text().strip()

    def cli(self, *args, env=None, check=True):
        """`coalloc ARGS` with this server's state directory (unless ARGS give one)."""
        e = {k: v for k, v in os.environ.items()
             if k not in ("COALLOC_URL", "COALLOC_TOKEN", "COALLOC_SOCKET")}
        e.update(env or {})
        state = [] if "--state-dir" in args else ["--state-dir", str(self.state)]
        r = subprocess.run([self.bin, *args, *state],
                           capture_output=True, text=True, env=e, timeout=120)
        if check and r.returncode != 0:
            raise AssertionError(f"coalloc {args}: {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def user(self, name):
        out = self.cli("user", "add", name, "--json").stdout
        return json.loads(out)["token"]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("coalloc")
    s = Server(base / "state")
    yield s
    s.stop()


@pytest.fixture
def admin(server):
    import coalloc
    return coalloc.Client(state_dir=server.state)
