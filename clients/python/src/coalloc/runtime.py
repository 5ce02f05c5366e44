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
        self.url = env["COALLOC_URL"].rstrip("/")
        self.barrier_url = env["COALLOC_BARRIER_URL"]
        self.secret = env["COALLOC_SECRET"]
        timeout = env.get("COALLOC_BARRIER_TIMEOUT_MS")
        self.barrier_timeout = int(timeout) / 1000 if timeout and timeout.isdigit() else None
        # HTTPS to a server bound beyond loopback, pinning the certificate it named; plain
        # HTTP to an agent's relay inside the site.
        self._client = Client(url=self.url, token=self.secret,
                              fingerprint=env.get("COALLOC_SERVER_FINGERPRINT") or None,
                              allow_plain_http=True)

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
            req = urllib.request.Request(self.barrier_url, data=data, method="POST")
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
                raise CoallocError(f"barrier: {e.code} {text.strip()}", e.code) from None
            except (urllib.error.URLError, OSError) as e:
                if "certificate fingerprint mismatch" in str(getattr(e, "reason", e)):
                    raise CoallocError(f"barrier: {e}") from None
                # The server may be restarting: try again with a back-off.
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
            if time.monotonic() > deadline:
                return False

    def kv_put(self, key, value):
        """Put a value in the job's rendezvous store."""
        self._client.kv_put(self.job, key, value)

    def kv_get(self, key, wait=0.0):
        """A value of the job's rendezvous store, waiting up to ``wait`` seconds; ``None``
        when it is still missing then."""
        return self._client.kv_get(self.job, key, wait=wait)
