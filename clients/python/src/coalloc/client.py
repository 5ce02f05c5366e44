"""The coalloc server's HTTP API from Python: jobs (submit, status, wait, cancel), the event
stream, a job's output, sites, the replica catalog, and the rendezvous store.

Written against the server's OpenAPI document (``GET /openapi.json``); ``ROUTES`` lists every
route this module calls, and the test suite checks each of them against the document of a
running server. The client finds its server as the ``coalloc`` CLI does over HTTP:

1. ``url`` and ``token`` given to :class:`Client`;
2. ``COALLOC_URL`` and ``COALLOC_TOKEN`` (a token ``coalloc user add`` issued);
3. the state directory (``state_dir``, else ``COALLOC_STATE_DIR``, else ``~/.coalloc``):
   its ``server.json`` for the address and its ``token`` for the admin's token.

(The CLI's Unix socket is not spoken here: a local user without a token uses the CLI.)

An ``https://`` server (one bound beyond loopback) is trusted as the CLI trusts it, by its
certificate's pinned fingerprint: ``fingerprint``, else ``COALLOC_FINGERPRINT``, else the pin
``coalloc login URL`` stored in the state directory's ``known-servers.json``, else the
``server.json`` of the server's own state directory. Without a pin, ``ca_file`` (else
``COALLOC_CA_FILE``) or the system's CAs vouch for it (an operator's certificate). A token
is never sent over plain HTTP beyond this machine's loopback.
"""

import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request

from . import _tls
from .errors import BadInput, CoallocError, ServerError, from_status

#: Every (method, path) this client calls, as the OpenAPI document spells them.
ROUTES = [
    ("get", "/v1/health"),
    ("get", "/openapi.json"),
    ("post", "/v1/jobs"),
    ("get", "/v1/jobs"),
    ("get", "/v1/jobs/{id}"),
    ("delete", "/v1/jobs/{id}"),
    ("get", "/v1/jobs/{id}/output"),
    ("get", "/v1/history"),
    ("get", "/v1/events"),
    ("get", "/v1/sites"),
    ("post", "/v1/files"),
    ("get", "/v1/files"),
    ("delete", "/v1/files/{name}"),
    ("put", "/v1/jobs/{id}/kv/{key}"),
    ("get", "/v1/jobs/{id}/kv/{key}"),
    ("post", "/v1/jobs/{id}/barrier"),
]

#: Job file formats by extension, as the CLI reads them (`coalloc submit`).
FORMATS = {".rsl": "rsl", ".uno": "uno", ".toml": "toml", ".json": "json"}
EXTENSIONS = ".rsl, .uno, .bat, .toml, .json"

#: The states of a job that has ended.
ENDED = ("finished", "failed")

_POS = re.compile(r"^\d+:\d+: ")


def _state_dir(given=None):
    if given:
        return os.fspath(given)
    env = os.environ.get("COALLOC_STATE_DIR")
    if env:
        return env
    return os.path.join(os.path.expanduser("~"), ".coalloc")


def _job_id(job):
    """A job number, checked as the CLI's arguments are (a non-negative integer)."""
    if isinstance(job, bool) or not isinstance(job, int) or job < 0:
        raise BadInput(f"invalid job number `{job}`: a job is a non-negative integer")
    return job


class Client:
    """A connection to a running ``coalloc serve``."""

    def __init__(self, url=None, token=None, state_dir=None, timeout=60.0,
                 fingerprint=None, ca_file=None, allow_plain_http=False):
        """``allow_plain_http``: send the token over plain HTTP beyond loopback too (only a
        component's runtime, whose agent relay is plain HTTP inside its site)."""
        env = lambda k: os.environ.get(k) or None  # noqa: E731
        dir_ = _state_dir(state_dir)
        token = token or env("COALLOC_TOKEN")
        if token is None:
            try:
                with open(os.path.join(dir_, "token")) as f:
                    token = f.read().strip()
            except OSError:
                raise BadInput(
                    f"no token: set COALLOC_TOKEN (from `coalloc user add`), or give the state "
                    f"directory of a server whose `token` you may read (not {dir_})"
                ) from None
        def read_json(name):
            try:
                with open(os.path.join(dir_, name)) as f:
                    return json.load(f)
            except (OSError, ValueError):
                return None

        served = read_json("server.json") or {}
        url = url or env("COALLOC_URL")
        if url is None:
            url = served.get("url")
            if not url:
                raise BadInput(
                    f"no server is running with state directory {dir_} "
                    f"(start one with `coalloc serve --state-dir {dir_}`)"
                )
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        pin = fingerprint or env("COALLOC_FINGERPRINT")
        if pin is None and self.url.startswith("https://"):
            pin = (read_json("known-servers.json") or {}).get(self.url)
            if pin is None and (served.get("url") or "").rstrip("/") == self.url:
                pin = served.get("fingerprint")
        self.fingerprint = _tls.normalize(pin) if pin else None
        self._opener = _tls.opener(self.url, self.fingerprint,
                                   ca_file or env("COALLOC_CA_FILE"), allow_plain_http)

    # -- HTTP ------------------------------------------------------------------------------

    def _request(self, method, path, query=None, body=None, content_type=None,
                 timeout=None, token=None):
        url = self.url + path
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            q = {k: ("true" if v is True else "false" if v is False else v) for k, v in q.items()}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        data = body.encode() if isinstance(body, str) else body
        req = urllib.request.Request(url, data=data, method=method.upper())
        req.add_header("Authorization", f"Bearer {token or self.token}")
        if content_type:
            req.add_header("Content-Type", content_type)
        try:
            return self._open(req, timeout or self.timeout)
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                message = json.loads(text)["error"]
            except (ValueError, KeyError, TypeError):
                message = text.strip() or e.reason
            raise from_status(e.code, message) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise BadInput(_tls.explain(self.url, reason)) from None

    def _open(self, req, timeout):
        """Send a request over this server's connection (pinned TLS, TLS or plain HTTP);
        urllib's errors as they are."""
        return self._opener.open(req, timeout=timeout)

    def _json(self, method, path, **kw):
        with self._request(method, path, **kw) as r:
            text = r.read().decode()
        return json.loads(text) if text.strip() else None

    # -- the server --------------------------------------------------------------------------

    def health(self):
        """``{"ok": true, "version": ...}``."""
        return self._json("get", "/v1/health")

    def openapi(self):
        """The server's OpenAPI document."""
        return self._json("get", "/openapi.json")

    def sites(self):
        """The sites and the scheduler (``GET /v1/sites``): ``{"sites": [...], ...}``."""
        return self._json("get", "/v1/sites")

    # -- jobs --------------------------------------------------------------------------------

    def submit(self, job, format=None, array=None):
        """Submit a job: a dict (the native spec, as JSON), or the text of a job file in
        ``format`` (``rsl``, ``uno``, ``toml``, ``json``). Returns the job's number (an
        array's first element's)."""
        if isinstance(job, dict):
            body, format = json.dumps(job), format or "json"
        elif isinstance(job, str):
            if format is None:
                raise BadInput("a job given as text needs its format (rsl, uno, toml, json)")
            body = job
        else:
            raise BadInput(f"a job is a dict or the text of a job file, not {type(job).__name__}")
        try:
            v = self._json("post", "/v1/jobs", query={"format": format, "array": array},
                           body=body, content_type="application/json")
        except BadInput as e:
            raise type(e)(_job_message(e.message), e.status) from None
        return v["job"]

    def submit_file(self, path, array=None):
        """Submit a job file (``.rsl``, ``.uno``, ``.toml``, ``.json``), refused with the
        message ``coalloc submit`` prints (file, line and column)."""
        path = os.fspath(path)
        ext = os.path.splitext(path)[1].lower()
        if ext == ".bat":
            raise BadInput(f"{path}: a batch file holds several jobs; give one job file")
        if ext not in FORMATS:
            raise BadInput(f"{path}: unknown job file type (expected {EXTENSIONS})")
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise BadInput(f"{path}: cannot read: {e.strerror}") from None
        try:
            return self.submit(text, format=FORMATS[ext], array=array)
        except BadInput as e:
            msg = e.message
            if _POS.match(msg):
                msg = f"{path}:{msg}"
            elif not msg.startswith("job refused"):
                msg = f"{path}: {msg}"
            raise type(e)(msg, e.status) from None

    def status(self, job):
        """One job as ``GET /v1/jobs/{id}`` shows it (a dict)."""
        return self._json("get", f"/v1/jobs/{_job_id(job)}")

    def jobs(self, state=None, user=None, name=None, since=None, history=False):
        """Every job of a listing, page after page (``GET /v1/jobs``, or ``/v1/history``
        for ended jobs that left memory): a generator of dicts."""
        path = "/v1/history" if history else "/v1/jobs"
        after = None
        while True:
            page = self._json("get", path, query={"state": state, "user": user, "name": name,
                                                  "since": since, "after": after})
            yield from page.get("jobs", [])
            nxt = page.get("next")
            if nxt is None or nxt == after:
                return
            after = nxt

    def cancel(self, job):
        """Cancel a job: every started component is killed."""
        return self._json("delete", f"/v1/jobs/{_job_id(job)}")

    def wait(self, job, states=ENDED, timeout=300.0, poll=0.2):
        """Poll a job until its state is one of ``states``; its view then."""
        deadline = time.monotonic() + timeout
        while True:
            v = self.status(job)
            if v["state"] in states:
                return v
            if time.monotonic() > deadline:
                raise CoallocError(f"job {job} is still {v['state']} after {timeout} s")
            time.sleep(poll)

    def events(self, job=None, timeout=None):
        """The event stream (``GET /v1/events``): a generator of event dicts as they
        happen, those of job ``job`` only when given. ``timeout`` bounds each read."""
        # Connected now, so that no event after this call is missed; read as iterated.
        r = self._request("get", "/v1/events", timeout=timeout or 3600)

        def stream():
            with r:
                for raw in r:
                    line = raw.decode(errors="replace").rstrip("\r\n")
                    if not line.startswith("data:"):
                        continue
                    try:
                        ev = json.loads(line[5:].strip())
                    except ValueError:
                        continue
                    if job is None or ev.get("job") == job:
                        yield ev

        return stream()

    # -- output ------------------------------------------------------------------------------

    def launches(self, job):
        """The launches with output: ``[{"component", "launch", "stdout", "stderr"}]``."""
        return self._json("get", f"/v1/jobs/{_job_id(job)}/output")["launches"]

    def output(self, job, component=0, launch=None, stream="stdout", offset=0, length=None):
        """A launch's standard output or error (bytes; the component's latest launch
        unless ``launch`` is given), from byte ``offset``, at most ``length`` bytes."""
        _check_stream(stream)
        with self._request("get", f"/v1/jobs/{_job_id(job)}/output",
                           query={"component": component, "launch": launch, "stream": stream,
                                  "offset": offset, "length": length}) as r:
            return r.read()

    def follow(self, job, component=0, launch=None, stream="stdout", offset=0):
        """A launch's output as it is written, until the launch ends: a generator of bytes."""
        _check_stream(stream)
        with self._request("get", f"/v1/jobs/{_job_id(job)}/output",
                           query={"component": component, "launch": launch, "stream": stream,
                                  "offset": offset, "follow": True}, timeout=3600) as r:
            while True:
                chunk = r.read1(65536) if hasattr(r, "read1") else r.read(65536)
                if not chunk:
                    return
                yield chunk

    # -- files -------------------------------------------------------------------------------

    def files(self, name=None):
        """The replica catalog (``GET /v1/files``)."""
        return self._json("get", "/v1/files", query={"name": name})

    def register_file(self, site, name, path, size=None, blake3=None):
        """Register a replica of input file ``name`` at ``path`` on ``site``."""
        body = {"site": site, "name": name, "path": os.fspath(path)}
        if size is not None:
            body["size"] = size
        if blake3 is not None:
            body["blake3"] = blake3
        return self._json("post", "/v1/files", body=json.dumps(body),
                          content_type="application/json")

    def remove_file(self, name, site=None):
        """Forget the replicas of ``name`` (the files stay)."""
        return self._json("delete", f"/v1/files/{urllib.parse.quote(name, safe='')}",
                          query={"site": site})

    # -- the rendezvous store (the admin, or a component with its job's secret) -------------

    def kv_put(self, job, key, value, secret=None):
        """Put a value in job ``job``'s rendezvous store."""
        _check_key(key)
        self._request("put", f"/v1/jobs/{_job_id(job)}/kv/{urllib.parse.quote(key, safe='')}",
                      body=str(value), content_type="text/plain", token=secret).close()

    def kv_get(self, job, key, wait=0.0, secret=None):
        """A value of the store (str), waiting up to ``wait`` seconds for it; ``None`` when
        it is still missing then."""
        _check_key(key)
        deadline = time.monotonic() + wait
        while True:
            left = max(0.0, deadline - time.monotonic())
            ms = int(min(left, 25.0) * 1000)
            try:
                with self._request(
                        "get", f"/v1/jobs/{_job_id(job)}/kv/{urllib.parse.quote(key, safe='')}",
                        query={"wait_ms": ms}, token=secret, timeout=self.timeout + 30) as r:
                    return r.read().decode()
            except CoallocError as e:
                if e.status != 404:
                    raise
            if time.monotonic() >= deadline:
                return None


def _job_message(msg):
    """The server's `job: ...` refusal of a body as the CLI says a file's (without `job:`)."""
    return msg[len("job: "):] if msg.startswith("job: ") else msg


def _check_stream(stream):
    if stream not in ("stdout", "stderr"):
        raise BadInput(f"unknown stream `{stream}` (stdout, stderr)")


def _check_key(key):
    if not isinstance(key, str) or not 1 <= len(key.encode()) <= 1024:
        raise BadInput("a rendezvous key is 1 to 1024 bytes")


__all__ = ["Client", "ROUTES", "ENDED", "CoallocError", "ServerError"]
