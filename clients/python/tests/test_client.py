"""The Python client against a real `coalloc serve`: jobs, output, events, files, sites and
the rendezvous store; the routes it calls against the server's OpenAPI document; bad input
refused with the CLI's own messages; another user's job refused."""

import json
import os
import subprocess
import sys
import threading

import pytest

import coalloc
from coalloc import BadInput, Forbidden, NotFound


def echo_job(text, site=None, extra=""):
    comp = {"count": 1, "job_type": "single", "executable": "/bin/sh",
            "arguments": ["-c", f"coalloc barrier || exit 1; echo {text}; echo err-{text} >&2{extra}"]}
    if site:
        comp["site"] = site
    return {"kind": "ordered" if site else "unordered", "max_wall_time": "2m",
            "component": [comp]}


def test_every_route_the_client_calls_is_in_the_openapi_document(admin):
    doc = admin.openapi()
    assert doc["info"]["title"] == "coalloc"
    for method, path in coalloc.ROUTES:
        assert path in doc["paths"], f"{path} not documented"
        assert method in doc["paths"][path], f"{method.upper()} {path} not documented"
    # The output route's parameters are the ones the client sends.
    params = {p["name"] for p in doc["paths"]["/v1/jobs/{id}/output"]["get"]["parameters"]}
    assert {"id", "component", "launch", "stream", "offset", "length", "follow"} <= params
    # The job view has the fields the client reads.
    job = doc["components"]["schemas"]["JobView"]["properties"]
    assert {"id", "state", "components", "user"} <= set(job)


def test_health_and_sites(admin):
    assert admin.health()["ok"] is True
    names = [s["name"] for s in admin.sites()["sites"]]
    assert names == ["alpha", "beta", "gamma"]


def test_submit_wait_output_and_byte_ranges(admin):
    job = admin.submit(echo_job("hello-py", site="beta"))
    view = admin.wait(job, timeout=60)
    assert view["state"] == "finished", view
    assert view["components"][0]["site"] == "beta"
    assert admin.output(job, component=0) == b"hello-py\n"
    assert admin.output(job, component=0, stream="stderr") == b"err-hello-py\n"
    assert admin.output(job, component=0, offset=2, length=3) == b"llo"
    launches = admin.launches(job)
    assert len(launches) == 1
    assert launches[0]["component"] == 0
    assert launches[0]["stdout"] == len(b"hello-py\n")
    assert launches[0]["stderr"] == len(b"err-hello-py\n")
    listed = [j["id"] for j in admin.jobs(state="all")]
    assert job in listed


def test_follow_streams_output_until_the_component_ends(admin):
    job = admin.submit(echo_job("first", extra="; sleep 1; echo second; sleep 1; echo third"))
    admin.wait(job, states=("running", "finished"), timeout=60)
    got = b"".join(admin.follow(job, component=0))
    assert got == b"first\nsecond\nthird\n"
    assert admin.status(job)["state"] == "finished"


def test_cancel_and_events(admin):
    seen = []
    subscribed = threading.Event()
    box = {}

    def listen():
        stream = admin.events(timeout=60)
        subscribed.set()
        for ev in stream:
            seen.append(ev)
            if ev.get("job") == box.get("job") and ev.get("event") == "cancelled":
                return

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    subscribed.wait(10)
    job = admin.submit(echo_job("long", extra="; sleep 60"))
    box["job"] = job
    admin.wait(job, states=("running",), timeout=60)
    answer = admin.cancel(job)
    assert answer == {"job": job, "cancelled": True}, answer
    view = admin.wait(job, timeout=60)
    assert view["state"] == "failed", view
    t.join(20)
    names = [e["event"] for e in seen if e.get("job") == job]
    assert "placed" in names, seen
    assert "component_submitted" in names, seen
    assert "cancelled" in names, seen


def test_bad_job_files_get_the_clis_messages(server, admin, tmp_path):
    cases = {
        "broken.toml": 'name = "x"\nkind = "unordered"\n[[component]]\ncount = "two"\n',
        "nocomp.json": '{"kind": "unordered", "component": []}',
        "bad.rsl": "+(&(count=2)(executable=/bin/true)",
        "job.txt": "whatever",
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text)
        r = server.cli("submit", str(path), check=False)
        assert r.returncode == 2, (name, r.stderr)
        cli = r.stderr.strip().removeprefix("error: ")
        with pytest.raises(BadInput) as e:
            admin.submit_file(path)
        assert str(e.value) == cli, name


def test_bad_arguments_are_refused_before_anything_is_sent(admin):
    with pytest.raises(BadInput, match="unknown stream `both`"):
        admin.output(1, stream="both")
    with pytest.raises(BadInput, match="non-negative integer"):
        admin.status(-3)
    with pytest.raises(BadInput, match="needs its format"):
        admin.submit("name = 'x'")
    with pytest.raises(NotFound, match="no job 999999"):
        admin.status(999999)
    with pytest.raises(NotFound, match="no job 999999"):
        admin.output(999999)


def test_another_users_output_is_refused(server, admin):
    alice = coalloc.Client(url=server.url, token=server.user("alice"))
    bob = coalloc.Client(url=server.url, token=server.user("bob"))
    job = alice.submit(echo_job("alices-secret"))
    assert alice.wait(job, timeout=60)["state"] == "finished"
    assert alice.output(job) == b"alices-secret\n"
    with pytest.raises(Forbidden, match="belongs to `alice`"):
        bob.output(job)
    with pytest.raises(Forbidden):
        bob.launches(job)
    assert admin.output(job) == b"alices-secret\n"


def test_remote_cli_logs_over_http(server, tmp_path):
    """`coalloc logs` of a user with COALLOC_URL + COALLOC_TOKEN and no access to the state
    directory: their own job's output, another user's refused."""
    carol_token = server.user("carol")
    dave_token = server.user("dave")
    carol = coalloc.Client(url=server.url, token=carol_token)
    job = carol.submit(echo_job("carols-output"))
    carol.wait(job, timeout=60)
    nowhere = str(tmp_path / "no-state-here")

    def logs(token, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith("COALLOC_")}
        env.update({"COALLOC_URL": server.url, "COALLOC_TOKEN": token})
        return subprocess.run([server.bin, "logs", str(job), *args, "--state-dir", nowhere],
                              capture_output=True, text=True, env=env, timeout=60)

    r = logs(carol_token)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"==> job {job} component 0 launch L{carol.launches(job)[0]['launch']} " \
                       f"(stdout) <==\ncarols-output\n"
    r = logs(carol_token, "--err")
    assert "err-carols-output" in r.stdout
    r = logs(carol_token, "--json")
    assert json.loads(r.stdout)["launches"][0]["text"] == "carols-output\n"
    r = logs(dave_token)
    assert r.returncode == 2
    assert f"job {job} belongs to `carol`, not to `dave`" in r.stderr


def test_files(admin, tmp_path):
    data = tmp_path / "grid.dat"
    data.write_bytes(b"x" * 1000)
    admin.register_file("alpha", "grid.dat", data)
    listed = admin.files()
    text = json.dumps(listed)
    assert "grid.dat" in text and "alpha" in text
    admin.remove_file("grid.dat")
    assert "grid.dat" not in json.dumps(admin.files())


def test_a_component_uses_the_barrier_and_the_store_from_python(admin, tmp_path):
    script = tmp_path / "comp.py"
    script.write_text(
        "from coalloc.runtime import Component\n"
        "me = Component.from_env()\n"
        "assert me.barrier()\n"
        "me.kv_put(f'addr/{me.component}', f'{me.site}:{me.component}')\n"
        "peer = me.kv_get(f'addr/{1 - me.component}', wait=30)\n"
        "print(me.site, me.component, 'sees', peer)\n")
    env = {"PYTHONPATH": os.pathsep.join(sys.path)}
    comps = [{"site": s, "count": 1, "job_type": "single", "executable": sys.executable,
              "arguments": [str(script)], "environment": env} for s in ("alpha", "gamma")]
    job = admin.submit({"kind": "ordered", "max_wall_time": "2m", "component": comps})
    view = admin.wait(job, timeout=90)
    assert view["state"] == "finished", (view, admin.output(job, 0, stream="stderr"))
    assert admin.output(job, component=0) == b"alpha 0 sees gamma:1\n"
    assert admin.output(job, component=1) == b"gamma 1 sees alpha:0\n"
    # The admin reads the store too.
    assert admin.kv_get(job, "addr/0") == "alpha:0"


def test_a_component_follows_the_server_that_answers(admin, tmp_path):
    # As a leader's standby would be: a first address that refuses every connection.
    script = tmp_path / "follow.py"
    script.write_text(
        "import os\n"
        "from coalloc.runtime import Component\n"
        "env = dict(os.environ)\n"
        "dead, url = 'http://127.0.0.1:9', env['COALLOC_URL']\n"
        "env['COALLOC_BARRIER_URL'] = env['COALLOC_BARRIER_URL'].replace(url, dead)\n"
        "env['COALLOC_URL'] = dead + ',' + url\n"
        "me = Component.from_env(env)\n"
        "assert me.barrier()\n"
        "me.kv_put('k', 'v')\n"
        "print(me.kv_get('k'), me.urls[me._at % 2] == url)\n")
    env = {"PYTHONPATH": os.pathsep.join(sys.path)}
    comp = {"site": "alpha", "count": 1, "job_type": "single", "executable": sys.executable,
            "arguments": [str(script)], "environment": env}
    job = admin.submit({"kind": "ordered", "max_wall_time": "2m", "component": [comp]})
    view = admin.wait(job, timeout=90)
    assert view["state"] == "finished", (view, admin.output(job, 0, stream="stderr"))
    assert admin.output(job, component=0) == b"v True\n"


def test_the_component_runtime_refuses_a_missing_environment():
    with pytest.raises(BadInput, match="not inside a coalloc component"):
        coalloc.Component.from_env({})
