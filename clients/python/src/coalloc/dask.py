"""A Dask cluster across sites, in the shape of dask-jobqueue's clusters:

    from coalloc.dask import CoallocCluster
    with CoallocCluster(sites=["alpha", "beta", "gamma"], cores=1) as cluster:
        client = cluster.get_client()           # a distributed.Client
        print(client.submit(sum, [1, 2, 3]).result())
        cluster.scale_up(sites=["beta"])        # one more job: a worker on beta

The scheduler and the first workers are the components of **one co-allocated job**: an
ordered job whose component 0 is the Dask scheduler (on the first site) and whose other
components are workers, one per site in ``sites`` (``workers_per_site`` each). coalloc
starts them together and holds them at the start barrier, so either all of them come up or
none does (an abort re-places the job, as for any job). Once released, the scheduler
publishes its address in the job's rendezvous store and on its output; the workers read it
from the store; this object reads it from the scheduler's output (the owner's right, so any
user with a token can run a cluster). ``scale_up`` submits another job of workers, given
the address in their environment. ``close`` cancels every job and waits until none runs.

Components run ``python -m coalloc.dask_component`` with ``python`` (default: this
interpreter), which must have this package and ``distributed`` on every site (a shared
file system or the same environment); ``host`` is the address the scheduler and workers
listen on (``127.0.0.1`` on one host; an address the sites reach otherwise).
"""

import os
import sys
import time

from .client import ENDED, Client
from .dask_component import ADDRESS_LINE
from .errors import BadInput, CoallocError


class CoallocCluster:
    """A Dask scheduler and workers as the components of co-allocated coalloc jobs."""

    def __init__(self, sites, workers_per_site=1, cores=1, memory="auto", scheduler_site=None,
                 python=None, host="127.0.0.1", walltime="1h", name="dask", environment=None,
                 client=None, start_timeout=120.0, **client_args):
        if isinstance(sites, str) or not sites:
            raise BadInput("sites: a list of one or more site names")
        if not isinstance(workers_per_site, int) or workers_per_site < 1:
            raise BadInput(f"workers_per_site: at least 1, not {workers_per_site!r}")
        if not isinstance(cores, int) or cores < 1:
            raise BadInput(f"cores: at least 1, not {cores!r}")
        self.sites = list(sites)
        self.workers_per_site = workers_per_site
        self.cores = cores
        self.memory = memory
        self.python = python or sys.executable
        self.host = host
        self.walltime = walltime
        self.name = name
        self.environment = dict(environment or {})
        self.coalloc = client or Client(**client_args)
        self.jobs = []
        self.scheduler_address = None
        self._dask_client = None
        self._closed = False
        first = scheduler_site or self.sites[0]
        components = [self._component(first, "scheduler", 1)]
        for site in self.sites:
            components += [self._component(site, "worker", cores,
                                           label=f"dask-worker-{site}-{i}")
                           for i in range(workers_per_site)]
        job = {"name": name, "kind": "ordered", "max_wall_time": walltime,
               "component": components}
        self.job = self.coalloc.submit(job)
        self.jobs.append(self.job)
        try:
            self.scheduler_address = self._wait_address(start_timeout)
        except BaseException:
            self.close()
            raise

    def _component(self, site, role, count, extra=None, label=None):
        env = {"COALLOC_DASK_HOST": self.host, "COALLOC_DASK_THREADS": str(self.cores),
               "COALLOC_DASK_MEMORY": str(self.memory), "PYTHONUNBUFFERED": "1"}
        path = os.environ.get("PYTHONPATH")
        if path:
            env["PYTHONPATH"] = path
        env.update(self.environment)
        env.update(extra or {})
        return {"site": site, "count": count, "job_type": "single", "label": label or f"dask-{role}",
                "executable": self.python,
                "arguments": ["-m", "coalloc.dask_component", role], "environment": env}

    def _wait_address(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            view = self.coalloc.status(self.job)
            if view["state"] in ENDED:
                raise CoallocError(
                    f"the Dask job {self.job} ended ({view['state']}) before its scheduler "
                    f"was up: {view.get('last_abort') or 'see `coalloc logs` of it'}")
            try:
                out = self.coalloc.output(self.job, component=0).decode(errors="replace")
            except CoallocError as e:
                if e.status != 404:
                    raise
                out = ""
            for line in out.splitlines():
                if line.startswith(ADDRESS_LINE):
                    return line[len(ADDRESS_LINE):].strip()
            time.sleep(0.2)
        raise CoallocError(f"no Dask scheduler address from job {self.job} in {timeout} s")

    # -- dask-jobqueue's interface ----------------------------------------------------------

    def get_client(self, timeout=60):
        """A ``distributed.Client`` of this cluster's scheduler."""
        from distributed import Client as DaskClient

        if self._dask_client is None:
            self._dask_client = DaskClient(self.scheduler_address, timeout=timeout)
        return self._dask_client

    def wait_for_workers(self, n, timeout=120):
        """Wait until ``n`` workers are connected to the scheduler."""
        self.get_client().wait_for_workers(n, timeout=timeout)

    def scale_up(self, sites=None, workers_per_site=1):
        """Add a job of workers (one per site of ``sites``, default this cluster's sites,
        ``workers_per_site`` each), joined to the running scheduler. Its job number."""
        sites = list(sites or self.sites)
        comps = [self._component(site, "worker", self.cores,
                                 {"COALLOC_DASK_SCHEDULER": self.scheduler_address},
                                 label=f"dask-worker-{site}-{i}")
                 for site in sites for i in range(workers_per_site)]
        job = self.coalloc.submit({"name": f"{self.name}-workers", "kind": "ordered",
                                   "max_wall_time": self.walltime, "component": comps})
        self.jobs.append(job)
        return job

    def scale(self, jobs=None, n=None):
        """dask-jobqueue's ``scale``: up only, by ``jobs`` more jobs of workers on every
        site, or by enough of them for ``n`` more workers."""
        if n is not None:
            per_job = len(self.sites)
            jobs = -(-n // per_job)
        for _ in range(jobs or 0):
            self.scale_up()

    def close(self, timeout=60.0):
        """Close the Dask client and cancel every job of the cluster; wait until they ended."""
        if self._closed:
            return
        self._closed = True
        if self._dask_client is not None:
            try:
                self._dask_client.close()
            except Exception:
                pass
        for job in self.jobs:
            try:
                self.coalloc.cancel(job)
            except CoallocError:
                pass
        for job in self.jobs:
            try:
                self.coalloc.wait(job, timeout=timeout)
            except CoallocError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"CoallocCluster(jobs={self.jobs}, scheduler={self.scheduler_address!r}, "
                f"sites={self.sites})")
