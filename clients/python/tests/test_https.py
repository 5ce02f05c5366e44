"""The client over HTTPS (issue 32 item 4), against a real `coalloc serve` on loopback with
`tls = "on"` and an operator's certificate for 127.0.0.1 (made with openssl): trusted by its
pinned fingerprint (given, from the environment, from `coalloc login`'s pins, from the
server's own server.json) or by a CA file; another pin refused before anything is sent; no
token ever sent over plain HTTP beyond loopback; a component's runtime pins the
fingerprint the server gives it and checks in over HTTPS."""

import json
import shutil
import subprocess
import time

import pytest

import coalloc
from coalloc import BadInput
from coalloc.runtime import Component

from conftest import Server


def sites_config(tls):
    s = f'[server]\ntls = "on"\n{tls}'
    for name in ("alpha", "beta", "gamma"):
        s += f'[[site]]\nname = "{name}"\nprocessors = 4\nmanager = {{ type = "local" }}\n'
    return s


@pytest.fixture(scope="module")
def https_server(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make the operator's certificate")
    base = tmp_path_factory.mktemp("coalloc-https")
    cert, key = base / "api.crt", base / "api.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True)
    config = base / "config.toml"
    config.write_text(sites_config(f'tls_cert = "{cert}"\ntls_key = "{key}"\n'))
    s = Server(base / "state", config=config)
    s.cert = cert
    yield s
    s.stop()


def served(s):
    return json.loads((s.state / "server.json").read_text())


def test_the_server_speaks_https_on_loopback_with_tls_on(https_server):
    info = served(https_server)
    assert https_server.url.startswith("https://127.0.0.1:"), https_server.url
    assert info["fingerprint"].startswith("sha256:") and len(info["fingerprint"]) == 71


def test_a_pinned_fingerprint_is_trusted_and_another_refused(https_server, tmp_path):
    s = https_server
    fp = served(s)["fingerprint"]
    elsewhere = tmp_path / "nowhere"  # no server.json, no pins
    c = coalloc.Client(url=s.url, token=s.token, state_dir=elsewhere, fingerprint=fp)
    assert [x["name"] for x in c.sites()["sites"]] == ["alpha", "beta", "gamma"]
    # Written as people write it: upper case, colons.
    colons = ":".join(fp[7:][i:i + 2] for i in range(0, 64, 2)).upper()
    c = coalloc.Client(url=s.url, token=s.token, state_dir=elsewhere, fingerprint=colons)
    assert c.health()["ok"] is True
    wrong = "sha256:" + "0" * 64
    c = coalloc.Client(url=s.url, token=s.token, state_dir=elsewhere, fingerprint=wrong)
    with pytest.raises(BadInput) as e:
        c.health()
    assert "not the pinned one" in str(e.value) and fp in str(e.value), str(e.value)
    with pytest.raises(BadInput):
        coalloc.Client(url=s.url, token=s.token, state_dir=elsewhere, fingerprint="abc")


def test_the_pin_comes_from_the_environment_login_or_server_json(https_server, tmp_path,
                                                                 monkeypatch):
    s = https_server
    fp = served(s)["fingerprint"]
    # The server's own state directory: its server.json names URL and fingerprint.
    c = coalloc.Client(state_dir=s.state)
    assert (c.url, c.fingerprint) == (s.url, fp)
    assert c.health()["ok"] is True
    # `coalloc login` on another machine: known-servers.json in the user's state directory.
    mine = tmp_path / "mine"
    r = s.cli("login", s.url, "--fingerprint", fp, "--state-dir", str(mine))
    assert r.stdout.strip() == fp
    c = coalloc.Client(url=s.url, token=s.token, state_dir=mine)
    assert c.fingerprint == fp
    assert c.health()["ok"] is True
    # COALLOC_FINGERPRINT, over the stored pin.
    monkeypatch.setenv("COALLOC_FINGERPRINT", "sha256:" + "1" * 64)
    c = coalloc.Client(url=s.url, token=s.token, state_dir=mine)
    assert c.fingerprint == "sha256:" + "1" * 64
    with pytest.raises(BadInput):
        c.health()


def test_a_ca_file_vouches_for_the_operators_certificate(https_server, tmp_path, monkeypatch):
    s = https_server
    elsewhere = tmp_path / "nowhere"
    c = coalloc.Client(url=s.url, token=s.token, state_dir=elsewhere, ca_file=str(s.cert))
    assert c.fingerprint is None
    assert c.health()["ok"] is True
    monkeypatch.setenv("COALLOC_CA_FILE", str(s.cert))
    assert coalloc.Client(url=s.url, token=s.token, state_dir=elsewhere).health()["ok"]
    monkeypatch.delenv("COALLOC_CA_FILE")
    # Neither pin nor CA file: the system's CAs do not know it.
    c = coalloc.Client(url=s.url, token=s.token, state_dir=elsewhere)
    with pytest.raises(BadInput) as e:
        c.health()
    assert "certificate verify failed" in str(e.value), str(e.value)


def test_no_token_goes_over_plain_http_beyond_loopback(tmp_path):
    for url in ("http://10.0.0.1:4417", "http://server.example.org:4417", "http://0.0.0.0:1"):
        with pytest.raises(BadInput) as e:
            coalloc.Client(url=url, token="secret", state_dir=tmp_path)
        assert "refusing to send a bearer token over plain HTTP" in str(e.value)
    for url in ("http://127.0.0.1:1", "http://[::1]:1", "http://localhost:1"):
        assert coalloc.Client(url=url, token="secret", state_dir=tmp_path).url == url


def test_a_component_checks_in_over_https_with_the_servers_fingerprint(https_server, tmp_path):
    s = https_server
    fp = served(s)["fingerprint"]
    # A job of two components: one runs the Rust runtime (`coalloc barrier`), the other
    # waits until this test's Python runtime has checked in for it with its environment.
    envfile = tmp_path / "env.json"
    py = (f"python3 -c 'import json,os; json.dump(dict(os.environ), open(\"{envfile}.tmp\", \"w\"))'"
          f" && mv {envfile}.tmp {envfile} && while [ ! -e {tmp_path}/done ]; do sleep 0.05; done")
    job = {"kind": "unordered", "max_wall_time": "2m", "component": [
        {"count": 1, "job_type": "single", "executable": "/bin/sh",
         "arguments": ["-c", "coalloc barrier || exit 1; coalloc kv get py --wait 60s"]},
        {"count": 1, "job_type": "single", "executable": "/bin/sh", "arguments": ["-c", py]},
    ]}
    admin = coalloc.Client(state_dir=s.state)
    jid = admin.submit(job)
    deadline = time.monotonic() + 60
    while not envfile.exists():
        assert time.monotonic() < deadline, admin.job(jid)
        time.sleep(0.05)
    env = json.loads(envfile.read_text())
    assert env["COALLOC_URL"] == s.url
    assert env["COALLOC_SERVER_FINGERPRINT"] == fp
    me = Component.from_env(env)
    assert me.barrier() is True
    me.kv_put("py", "over-https")
    (tmp_path / "done").write_text("")
    view = admin.wait(jid, timeout=60)
    assert view["state"] == "finished", view
    assert admin.output(jid, component=0) == b"over-https\n"
    # Another pin: the runtime refuses the server rather than retrying it.
    env["COALLOC_SERVER_FINGERPRINT"] = "sha256:" + "0" * 64
    with pytest.raises(coalloc.CoallocError) as e:
        Component.from_env(env).barrier(patience=5)
    assert "certificate fingerprint mismatch" in str(e.value), str(e.value)
