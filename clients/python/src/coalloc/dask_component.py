"""What the components of a :class:`coalloc.dask.CoallocCluster` run:
``python -m coalloc.dask_component scheduler|worker``.

- ``scheduler``: starts a Dask scheduler (listening first, so a failure to listen is a
  failed start), checks in at the job's start barrier, and once the job commits publishes
  its address in the job's rendezvous store (key ``dask/scheduler``) and on its standard
  output (``dask-scheduler-address: ADDRESS``), then serves until it is cancelled.
- ``worker``: checks in at the barrier, reads the scheduler's address from the store (or
  from ``COALLOC_DASK_SCHEDULER``, for the workers of a later scale-up job), and runs a Dask
  worker named ``SITE-COMPONENT-RANK`` until the scheduler goes or it is cancelled. Its
  tasks see ``COALLOC_SITE``.

Settings come in the environment: ``COALLOC_DASK_HOST`` (the address to listen on),
``COALLOC_DASK_THREADS`` (a worker's threads), ``COALLOC_DASK_MEMORY`` (its memory limit).
"""

import asyncio
import os
import signal
import sys

from .runtime import Component

KEY = "dask/scheduler"
ADDRESS_LINE = "dask-scheduler-address: "


async def _scheduler(me):
    from distributed import Scheduler

    host = os.environ.get("COALLOC_DASK_HOST", "127.0.0.1")
    try:
        s = Scheduler(host=host, port=0, dashboard_address=":0")
        await s
    except Exception as e:  # the start-up failed: say so at the barrier
        await asyncio.to_thread(me.barrier, False, f"dask scheduler: {e}")
        return 1
    if not await asyncio.to_thread(me.barrier):
        await s.close()
        return 1
    await asyncio.to_thread(me.kv_put, KEY, s.address)
    print(ADDRESS_LINE + s.address, flush=True)
    await s.finished()
    return 0


async def _worker(me):
    from distributed import Worker

    if not await asyncio.to_thread(me.barrier):
        return 1
    address = os.environ.get("COALLOC_DASK_SCHEDULER") or await asyncio.to_thread(
        me.kv_get, KEY, 300)
    if not address:
        print("no scheduler address in the rendezvous store", file=sys.stderr, flush=True)
        return 1
    threads = int(os.environ.get("COALLOC_DASK_THREADS", "1"))
    name = f"{me.site}-{me.job}.{me.component}-{me.local_rank}"
    w = Worker(address, nthreads=threads, name=name,
               host=os.environ.get("COALLOC_DASK_HOST", "127.0.0.1"),
               memory_limit=os.environ.get("COALLOC_DASK_MEMORY", "auto"),
               dashboard=False)
    await w
    print(f"dask worker {name} at {w.address}, scheduler {address}", flush=True)
    await w.finished()
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv not in (["scheduler"], ["worker"]):
        print("usage: python -m coalloc.dask_component scheduler|worker", file=sys.stderr)
        return 2
    me = Component.from_env()
    run = _scheduler if argv[0] == "scheduler" else _worker

    async def go():
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        try:
            return await run(me)
        except asyncio.CancelledError:
            return 0

    return asyncio.run(go())


if __name__ == "__main__":
    sys.exit(main())
