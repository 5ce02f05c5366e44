"""The client's errors: the server's refusals and bad input, with the CLI's messages."""


class CoallocError(Exception):
    """Something went wrong talking to coalloc. ``status`` is the HTTP status, if any."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        self.status = status

    def __str__(self):
        return self.message


class BadInput(CoallocError):
    """The input is wrong (the CLI's exit code 2): a bad job file, a bad argument, a 4xx."""


class Unauthorized(BadInput):
    """No token, or a bad one (401)."""


class Forbidden(BadInput):
    """Another user's job, or a route that needs the admin (403)."""


class NotFound(BadInput):
    """No such job, key, file or route (404)."""


class ServerError(CoallocError):
    """The server failed (5xx) or could not be reached (the CLI's exit code 1)."""


def from_status(status, message):
    """The error class of an HTTP status."""
    if status == 401:
        return Unauthorized(message, status)
    if status == 403:
        return Forbidden(message, status)
    if status == 404:
        return NotFound(message, status)
    if status >= 500:
        return ServerError("server: " + message, status)
    return BadInput(message, status)
