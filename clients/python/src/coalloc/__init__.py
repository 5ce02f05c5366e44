"""coalloc's Python client: jobs, events, output, files and sites over the server's HTTP API
(:class:`Client`), the component runtime (:mod:`coalloc.runtime`), and a Dask cluster
across sites (:mod:`coalloc.dask`, with the ``dask`` extra)."""

from .client import ENDED, ROUTES, Client
from .errors import (BadInput, CoallocError, Forbidden, NotFound, ServerError,
                     Unauthorized)
from .runtime import Component

__version__ = "0.1.0"
__all__ = ["Client", "Component", "ROUTES", "ENDED", "CoallocError", "BadInput",
           "Unauthorized", "Forbidden", "NotFound", "ServerError"]
