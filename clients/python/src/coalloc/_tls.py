"""HTTPS to a coalloc server (issue 32 item 4), as the ``coalloc`` CLI speaks it: trusting
exactly the certificate whose SHA-256 fingerprint is pinned (what ``coalloc login`` stores,
``COALLOC_FINGERPRINT``, a server's own ``server.json``, a component's
``COALLOC_SERVER_FINGERPRINT``), else the certificates of a CA file, else the system's CAs;
and never a bearer token over plain HTTP beyond this machine's loopback."""

import hashlib
import hmac
import http.client
import ipaddress
import ssl
import urllib.parse
import urllib.request

from .errors import BadInput

#: What a refused certificate's error says (the CLI's and the runtime's words too).
MISMATCH = "certificate fingerprint mismatch"


def is_loopback(url):
    """Whether a URL's host is this machine's loopback (127.0.0.0/8, ::1, ``localhost``),
    where a token may go in clear."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalize(given):
    """``sha256:`` and lower-case hex, from a fingerprint as people write it (with or without
    the prefix, colons, any case)."""
    text = given.strip()
    if text.startswith("sha256:"):
        text = text[len("sha256:"):]
    hexed = text.replace(":", "").lower()
    if len(hexed) != 64 or any(c not in "0123456789abcdef" for c in hexed):
        raise BadInput(f"`{given}` is not a SHA-256 fingerprint "
                       "(64 hex digits, optionally after sha256:)")
    return "sha256:" + hexed


def fingerprint(der):
    """``sha256:`` and the hex digest of a certificate's DER bytes."""
    return "sha256:" + hashlib.sha256(der).hexdigest()


class _PinnedConnection(http.client.HTTPSConnection):
    """A TLS connection that is dropped, before a byte of the request is sent, unless the
    server's certificate has the pinned fingerprint."""

    pin = ""

    def connect(self):
        super().connect()
        got = fingerprint(self.sock.getpeercert(binary_form=True) or b"")
        if not hmac.compare_digest(got, self.pin):
            self.sock.close()
            self.sock = None
            raise ssl.SSLError(f"{MISMATCH}: the server presented {got}, the pin is {self.pin}")


class _PinnedHandler(urllib.request.HTTPSHandler):
    def __init__(self, pin):
        # The certificate is checked by its fingerprint, not by a CA or a name.
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        super().__init__(context=ctx)
        self._pin = pin

    def https_open(self, req):
        pin = self._pin

        def connection(host, **kw):
            c = _PinnedConnection(host, **kw)
            c.pin = pin
            return c

        return self.do_open(connection, req, context=self._context)


def opener(url, pin=None, ca_file=None, plain_ok=False):
    """The urllib opener of requests to the server at ``url`` carrying a bearer token:
    pinned TLS (``pin``), TLS trusting ``ca_file`` or the system's CAs, or plain HTTP to
    this machine's loopback (anywhere with ``plain_ok``: a component's agent relay, inside
    its site). Refuses plain HTTP elsewhere with :class:`BadInput`."""
    if url.startswith("https://"):
        if pin:
            return urllib.request.build_opener(_PinnedHandler(normalize(pin)))
        ctx = ssl.create_default_context(cafile=ca_file)
        return urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx))
    if not (plain_ok or is_loopback(url)):
        raise BadInput(
            f"refusing to send a bearer token over plain HTTP to {url}, beyond this machine's "
            "loopback: use the server's https:// URL (a server bound beyond loopback serves "
            "HTTPS) with its pinned fingerprint or a CA file")
    return urllib.request.build_opener()


def explain(url, reason):
    """What a failed connection says, with what to do when the pin refused the server."""
    text = str(reason)
    if MISMATCH in text:
        return (f"refusing the server at {url}: its TLS certificate is not the pinned one "
                f"({text}); if its operator replaced the certificate, check the new "
                f"fingerprint with them and pin it again (`coalloc login {url}`)")
    return f"cannot reach the server at {url}: {text}"
