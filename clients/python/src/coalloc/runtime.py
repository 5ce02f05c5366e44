"""Inside a component: the job's start barrier and rendezvous store, from the ``COALLOC_*``
environment coalloc gives every component process (the wire protocol of the
``coalloc-runtime`` crate: ``POST COALLOC_BARRIER_URL``, ``PUT/GET
COALLOC_URL/v1/jobs/JOB/kv/KEY``, each with ``Authorization: Bearer COALLOC_SECRET``).

    from coalloc.runtime import Component
    me = Component.from_env()
    if not me.barrier():          # wait until every required component is there
        raise SystemExit(1)       # the job was aborted
    me.kv_put(f"addr/{me.component}", "10.0.0.5:4040")
    peer = me.kv_get("addr/0", wait=60)
"""

import json
import os
import time
import urllib.error
import urllib.request

from .client import Client
from .errors import BadInput, CoallocError

_VARS = ("COALLOC_URL", "COALLOC_BARRIER_URL", "COALLOC_SECRET", "COALLOC_JOB_ID",
         "COALLOC_LAUNCH", "COALLOC_COMPONENT")


class Component:
    """This component's configuration and its calls to the server."""

    def __init__(self, env):
        missing = [k for k in _VARS if not env.get(k)]
        if missing:
            raise BadInput(
                f"not inside a coalloc component: {', '.join(missing)} not set "
                "(coalloc sets them for every component process)")
        try:
            self.job = int(env["COALLOC_JOB_ID"])
            self.launch = int(env["COALLOC_LAUNCH"])
            self.component = int(env["COALLOC_COMPONENT"])
            self.components = int(env.get("COALLOC_COMPONENTS", "1"))
            self.local_rank = int(env.get("COALLOC_LOCAL_RANK", "0"))
            self.rank = int(env.get("COALLOC_RANK", "0"))
            self.total = int(env.get("COALLOC_TOTAL", "1"))
        except ValueError as e:
            raise BadInput(f"a COALLOC_* variable is not a number: {e}") from None
        self.site = env.get("COALLOC_SITE", "")
        # Every server's address (a leader and its standbys, comma-separated): calls go to
        # the one that answered last and move on to the next when one cannot be reached or
        # answers 503 (a standby), as the coalloc-runtime crate's do.
        self.urls = [u.strip().rstrip("/") for u in env["COALLOC_URL"].split(",") if u.strip()]
        self.url = self.urls[0]
        self.barrier_url = env["COALLOC_BARRIER_URL"]
        self.secret = env["COALLOC_SECRET"]
        timeout = env.get("COALLOC_BARRIER_TIMEOUT_MS")
        self.barrier_timeout = int(timeout) / 1000 if timeout and timeout.isdigit() else None
        self._fingerprint = env.get("COALLOC_SERVER_FINGERPRINT") or None
        self._at = 0
        self._clients = {}

    @property
    def _client(self):
        """The client of the server that answered last: HTTPS to a server bound beyond
        loopback, pinning the certificate it named; plain HTTP to an agent's relay."""
        url = self.urls[self._at % len(self.urls)]
        if url not in self._clients:
            self._clients[url] = Client(url=url, token=self.secret, fingerprint=self._fingerprint,
                                        allow_plain_http=True)
        return self._clients[url]

    def _at_leader(self, url):
        """``url`` (at the first server) at the server that answered last."""
        first, here = self.urls[0], self.urls[self._at % len(self.urls)]
        return here + url[len(first):] if url.startswith(first + "/") else url

    def _next(self, delay):
        """Move on to the next server, and once a whole round has been tried, wait ``delay``
        seconds first: the delay for the next time (doubled after a round, at most 5 s)."""
        self._at += 1
        if self._at % len(self.urls):
            return delay
        time.sleep(delay)
        return min(delay * 2, 5.0)

    @classmethod
    def from_env(cls, env=None):
        """The component this process is part of."""
        return cls(os.environ if env is None else env)

    def barrier(self, ok=True, reason=None, patience=300.0):
        """Check in at the start barrier (``ok=False``: the start-up failed, with a reason)
        and wait: ``True`` when the job commits, ``False`` when it is aborted."""
        body = {"launch": self.launch, "local_rank": self.local_rank, "ok": ok}
        if reason is not None:
            body["reason"] = reason
        data = json.dumps(body).encode()
        limit = self.barrier_timeout or patience
        deadline = time.monotonic() + limit
        delay = 0.1
        while True:
            req = urllib.request.Request(self._at_leader(self.barrier_url), data=data,
                                         method="POST")
            req.add_header("Authorization", f"Bearer {self.secret}")
            req.add_header("Content-Type", "application/json")
            try:
                with self._client._open(req, 60) as r:
                    state = json.loads(r.read().decode()).get("state")
                delay = 0.1
                if state == "released":
                    return True
                if state == "aborted":
                    return False
            except urllib.error.HTTPError as e:
                text = e.read().decode(errors="replace")
                if e.code != 503:
                    raise CoallocError(f"barrier: {e.code} {text.strip()}", e.code) from None
                # A standby: the next server, with a back-off once all were tried.
                delay = self._next(delay)
            except (urllib.error.URLError, OSError) as e:
                if "certificate fingerprint mismatch" in str(getattr(e, "reason", e)):
                    raise CoallocError(f"barrier: {e}") from None
                # The server may be restarting, or another leads: try again with a back-off.
                delay = self._next(delay)
            if time.monotonic() > deadline:
                return False

    def kv_put(self, key, value):
        """Put a value in the job's rendezvous store."""
        self._following(lambda c: c.kv_put(self.job, key, value))

    def kv_get(self, key, wait=0.0):
        """A value of the job's rendezvous store, waiting up to ``wait`` seconds; ``None``
        when it is still missing then."""
        return self._following(lambda c: c.kv_get(self.job, key, wait=wait))

    def _following(self, call, patience=300.0):
        """``call`` at the server that answered last; with several servers, again at the
        next while one answers 503 or cannot be reached, for up to ``patience`` seconds."""
        deadline = time.monotonic() + patience
        delay = 0.1
        while True:
            try:
                return call(self._client)
            except CoallocError as e:
                unreachable = e.status == 503 or str(e).startswith("cannot reach the server")
                if len(self.urls) < 2 or not unreachable or time.monotonic() > deadline:
                    raise
            delay = self._next(delay)
