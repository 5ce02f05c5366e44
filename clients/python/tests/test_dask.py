"""coalloc.dask.CoallocCluster against a real server: a Dask scheduler and workers on the
three local sites as one co-allocated job, a computation every site's workers take part
in, a scale-up job of workers, and nothing left running once the cluster is closed."""

import os
import subprocess
import time

import pytest

distributed = pytest.importorskip("distributed")

from coalloc.dask import CoallocCluster  # noqa: E402


def where(i):
    """A task that takes a moment and says on which site it ran."""
    import os as _os
    import time as _time

    _time.sleep(0.1)
    return _os.environ.get("COALLOC_SITE"), i * i


def dask_processes():
    """The processes running a Dask component (looked for, never signalled)."""
    r = subprocess.run(["pgrep", "-f", "coalloc.dask_component"], capture_output=True,
                       text=True)
    return [p for p in r.stdout.split() if p and int(p) != os.getpid()]


def test_a_dask_cluster_over_three_sites(admin):
    sites = ["alpha", "beta", "gamma"]
    env = {"PYTHONPATH": os.pathsep.join(p for p in __import__("sys").path if p)}
    cluster = CoallocCluster(sites=sites, cores=1, client=admin, environment=env,
                             walltime="10m")
    try:
        view = admin.status(cluster.job)
        assert view["state"] == "running", view
        # One co-allocated job: the scheduler on alpha and a worker on every site.
        placed = [(c["site"], c["state"]) for c in view["components"]]
        assert [s for s, _ in placed] == ["alpha", "alpha", "beta", "gamma"], placed
        assert view.get("barrier_release") is not None, view
        # The scheduler's address went through the job's rendezvous store.
        assert admin.kv_get(cluster.job, "dask/scheduler") == cluster.scheduler_address
        client = cluster.get_client()
        client.wait_for_workers(3, timeout=60)
        workers = client.scheduler_info()["workers"].values()
        assert sorted(w["name"].split("-")[0] for w in workers) == sites
        results = client.gather(client.map(where, range(60), pure=False))
        assert sorted(r[1] for r in results) == sorted(i * i for i in range(60))
        done_on = {site for site, _ in results}
        assert done_on == set(sites), done_on

        # Scaling up: a second job of workers, on beta, joins the same scheduler.
        extra = cluster.scale_up(sites=["beta"])
        assert extra != cluster.job
        client.wait_for_workers(4, timeout=60)
        names = sorted(w["name"] for w in client.scheduler_info()["workers"].values())
        assert any(n.startswith(f"beta-{extra}.") for n in names), names
        assert sum(client.gather(client.map(lambda x: x + 1, range(20)))) == 210
    finally:
        cluster.close()

    for job in cluster.jobs:
        assert admin.status(job)["state"] in ("failed", "finished")
    deadline = time.monotonic() + 20
    while dask_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert dask_processes() == [], "Dask components left running"


def test_bad_cluster_arguments_are_refused(admin):
    from coalloc import BadInput

    with pytest.raises(BadInput, match="sites"):
        CoallocCluster(sites="alpha", client=admin)
    with pytest.raises(BadInput, match="cores"):
        CoallocCluster(sites=["alpha"], cores=0, client=admin)
