"""A Dask cluster over three sites of a coalloc server, notebook-style (run it cell by cell,
or as a script): `python examples/dask/three_sites.py`.

Needs `pip install './clients/python[dask]'` and a running server whose sites include
alpha, beta and gamma (`coalloc serve`, the embedded default); the client finds it as the
CLI does (COALLOC_URL + COALLOC_TOKEN, else ~/.coalloc).
"""

# %% One co-allocated job: a Dask scheduler on alpha and a worker on every site, all
# started behind coalloc's start barrier.
import collections
import os

from coalloc.dask import CoallocCluster

cluster = CoallocCluster(sites=["alpha", "beta", "gamma"], cores=1,
                         environment={"PYTHONPATH": os.environ.get("PYTHONPATH", "")})
print(cluster)
client = cluster.get_client()
client.wait_for_workers(3)


# %% A computation spread over the workers of the three sites.
def where(i):
    import os
    import time

    time.sleep(0.05)
    return os.environ["COALLOC_SITE"], i * i


results = client.gather(client.map(where, range(60), pure=False))
print("sum of squares:", sum(r[1] for r in results))
print("tasks per site:", dict(collections.Counter(site for site, _ in results)))

# %% More workers: a second job, of one worker on beta, joins the same scheduler.
cluster.scale_up(sites=["beta"])
client.wait_for_workers(4)
print("workers:", sorted(w["name"] for w in client.scheduler_info()["workers"].values()))

# %% Done: every job of the cluster is cancelled; nothing keeps running.
cluster.close()
