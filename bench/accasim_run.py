#!/usr/bin/env python3
"""Replay an SWF trace on AccaSim 1.1.3 and write its schedule as `job_id,submit,start,end`
(the format of `coalloc replay --schedule`). Used by bench/accasim.sh; run it with the Python
of a venv where `pip install accasim==1.1.3` was done:

    python bench/accasim_run.py TRACE.swf.gz --processors 100 --policy fcfs \
        --schedule /tmp/kth_fcfs_accasim.csv [--first N] [--same-instant] [--json]

Policies:
  fcfs            AccaSim's FirstInFirstOut dispatcher with its FirstFit allocator.
  easy            AccaSim's EASYBackfilling dispatcher with its FirstFit allocator.
  easy-textbook   textbook EASY written here as an AccaSim dispatcher (a control: one
                  reservation for the first job that does not fit, at its shadow time; a later
                  job starts now only if it ends by the shadow time or fits in the extra
                  processors; the head is retried and the shadow recomputed at every step).

The jobs are exactly those `coalloc replay` runs: the trace is read here with coalloc's rules
(a job is skipped when its submit time, its runtime (field 4) or both processor counts
(fields 5 and 8) are unknown) and written to a plain SWF file that AccaSim's own reader then
reads, with
  - fields 5 and 8 both set to coalloc's processor count (field 5, else field 8: AccaSim's
    parser prefers field 8, coalloc field 5);
  - field 9 set to coalloc's estimate (field 9, else the runtime; at least 1 s);
  - the memory fields 7 and 10 set to -1 (neither simulator models memory).
The machine is one AccaSim node of `--processors` cores (one "core" per SWF processor, AccaSim's
default equivalence), the same pool of processors as coalloc's single site.

--same-instant gives AccaSim one more dispatching step at the same instant when a job of
runtime 0 has just started and ended (it frees its processors at once, as in coalloc and in
bench/fcfs_check.py; AccaSim otherwise leaves them unused until its next time point). It does
so through AccaSim's AdditionalData extension, by adding the current instant to the event
manager's time points.

Timing: `accasim_seconds` is AccaSim's own measure of its simulation loop
(`Simulator.start_simulation_time` to `end_simulation_time`, perf_counter); it includes
AccaSim reading and parsing the SWF file line by line (its reader is incremental and runs
inside the loop) and excludes the import, building the Simulator and the writing of our CSV.
`wall_seconds` is the whole `start_simulation()` call (also starting and stopping AccaSim's
logger thread), `cpu_seconds` the process CPU time of that call (the machine may be shared). AccaSim's own schedule, statistics and benchmark outputs are off; the
start and end of each job are collected by a small AdditionalData hook at job completion.
"""
import argparse
import collections
import collections.abc
import gzip
import json
import os
import sys
import tempfile
import time

# AccaSim 1.1.3 imports collections.Mapping, which Python 3.10 removed.
collections.Mapping = collections.abc.Mapping

from accasim.base.additional_data import AdditionalData  # noqa: E402
from accasim.base.allocator_class import FirstFit  # noqa: E402
from accasim.base.scheduler_class import (  # noqa: E402
    EASYBackfilling,
    FirstInFirstOut,
    SchedulerBase,
)
from accasim.base.simulator_class import Simulator  # noqa: E402


def coalloc_jobs(trace, first=None):
    """The jobs coalloc replays, in file order: (fields as strings, processors, estimate).
    `first`: only the first N job lines, as `coalloc replay --first`."""
    opener = gzip.open if trace.endswith(".gz") else open
    jobs, records = [], 0
    with opener(trace, "rt", encoding="latin-1") as f:
        for line in f:
            if line.lstrip().startswith(";") or not line.strip():
                continue
            if first is not None and records >= first:
                break  # coalloc's --first counts job lines, kept or skipped
            records += 1
            x = line.split()
            submit, run = int(x[1]), int(x[3])
            alloc, req = int(x[4]), int(x[7])
            procs = alloc if alloc >= 0 else req
            if submit < 0 or run < 0 or procs < 0:
                continue
            requested = int(x[8])
            estimate = max(requested if requested >= 0 else run, 1)
            jobs.append((x, procs, estimate))
    return jobs


def write_swf(jobs, path):
    with open(path, "w") as f:
        for x, procs, estimate in jobs:
            y = list(x)
            y[4] = y[7] = str(procs)
            y[8] = str(estimate)
            y[6] = y[9] = "-1"
            f.write(" ".join(y) + "\n")


class Recorder(AdditionalData):
    """Collects (start, end) of every job at its completion; optionally adds a dispatching
    step at the same instant after a zero-runtime job ended."""

    same_instant = False  # set before the Simulator builds it

    def __init__(self, event_manager=None):
        AdditionalData.__init__(self, event_manager)
        self.done = {}

    def exec_after_completion(self, removed_jobs):
        zero = False
        for e in removed_jobs:
            self.done[e.id] = (e.start_time, e.end_time)
            zero = zero or e.end_time == e.start_time
        em = self.event_mapper
        if self.same_instant and zero and (em.queued or em.loaded.get(em.current_time)):
            # add_timepoint() refuses the current instant; the time points are a SortedSet.
            em.time_points.add(em.current_time)

    def exec_before_dispatching(self, job_dict, queued_jobs):
        pass

    def exec_after_dispatching(self, job_dict, to_dispatch_jobs, rejected_jobs):
        pass

    def exec_before_submission(self, *args, **kwargs):
        pass

    def exec_after_submission(self, *args, **kwargs):
        pass

    def exec_before_completion(self, *args, **kwargs):
        pass

    def stop(self):
        pass


class TextbookEasy(SchedulerBase):
    """Textbook EASY on one node of cores (see the module docstring). Every queued job is
    answered: (cur_time, id, nodes) to start it now, (None, id, []) to keep it queued."""

    name = "EASY-textbook"

    def __init__(self):
        SchedulerBase.__init__(self, 0, allocator=None)

    def get_id(self):
        return self.name

    def scheduling_method(self, cur_time, queued_jobs, es_dict):
        rm = self.resource_manager
        (node, avail), = rm.current_availability.items()
        idle = avail["core"]
        out = []
        i, n = 0, len(queued_jobs)
        # 1. FCFS until the first job that does not fit (the head).
        while i < n and queued_jobs[i].requested_nodes <= idle:
            e = queued_jobs[i]
            idle -= e.requested_nodes
            out.append((cur_time, e.id, [node] * e.requested_nodes))
            i += 1
        if i == n:
            return out, []
        head = queued_jobs[i]
        out.append((None, head.id, []))
        i += 1
        if idle == 0:
            return out + [(None, e.id, []) for e in queued_jobs[i:]], []
        # 2. The head's shadow time: running jobs (and those just started) give their cores
        # back at their estimated end (a job past its estimate: now).
        ends = []
        for jid in rm.current_allocations:
            j = es_dict[jid]
            ends.append((max(j.start_time + j.expected_duration, cur_time), j.requested_nodes))
        for t, jid, _ in out[:-1]:
            j = es_dict[jid]
            ends.append((cur_time + j.expected_duration, j.requested_nodes))
        ends.sort()
        free, shadow, k = idle, None, 0
        while k < len(ends):
            t = ends[k][0]
            while k < len(ends) and ends[k][0] == t:
                free += ends[k][1]
                k += 1
            if free >= head.requested_nodes:
                shadow = t
                break
        extra = free - head.requested_nodes
        # 3. Backfill.
        for e in queued_jobs[i:]:
            p = e.requested_nodes
            if p <= idle and cur_time + e.expected_duration <= shadow:
                idle -= p
                out.append((cur_time, e.id, [node] * p))
            elif p <= idle and p <= extra:
                idle -= p
                extra -= p
                out.append((cur_time, e.id, [node] * p))
            else:
                out.append((None, e.id, []))
        return out, []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--processors", type=int, required=True)
    ap.add_argument("--policy", choices=["fcfs", "easy", "easy-textbook"], required=True)
    ap.add_argument("--schedule", required=True, help="output CSV: job_id,submit,start,end")
    ap.add_argument("--first", type=int, help="only the first N jobs of the trace")
    ap.add_argument("--same-instant", action="store_true")
    ap.add_argument("--workdir", help="where the SWF and system files go (default: a temp dir)")
    ap.add_argument("--reservations", metavar="FILE.csv", help="policy easy: write"
                    " job_id,blocked_at,reserved_time for every reservation AccaSim's EASY makes")
    ap.add_argument("--timeout", type=int, help="stop AccaSim after this many seconds (its own"
                    " `timeout`); the schedule then holds the jobs completed by then")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    workdir = a.workdir or tempfile.mkdtemp(prefix="accasim-run-")
    os.makedirs(workdir, exist_ok=True)
    jobs = coalloc_jobs(a.trace, a.first)
    swf = os.path.join(workdir, "workload.swf")
    write_swf(jobs, swf)
    sys_config = os.path.join(workdir, "system.json")
    with open(sys_config, "w") as f:
        json.dump(
            {
                "groups": {"pool": {"core": a.processors}},
                "resources": {"pool": 1},
                "equivalence": {"processor": {"core": 1}},
                "start_time": 0,
            },
            f,
        )

    if a.policy == "fcfs":
        dispatcher = FirstInFirstOut(FirstFit())
    elif a.policy == "easy":
        dispatcher = EASYBackfilling(FirstFit())
        reservations = []
        if a.reservations:
            calculate = dispatcher._calculate_slot

            def recording(cur_time, avl, decided, prev, blocked_job, es_dict):
                slot = calculate(cur_time, avl, decided, prev, blocked_job, es_dict)
                reservations.append((blocked_job.id, cur_time, slot[0]))
                return slot

            dispatcher._calculate_slot = recording
    else:
        dispatcher = TextbookEasy()
    Recorder.same_instant = a.same_instant
    sim = Simulator(
        swf,
        sys_config,
        dispatcher,
        additional_data=[Recorder],  # a class: AccaSim builds it and hands it its event manager
        scheduling_output=False,
        statistics_output=False,
        show_statistics=False,
        RESULTS_FOLDER_PATH=os.path.join(workdir, "results"),
        LOG_LEVEL="WARNING",
        **({"timeout": a.timeout} if a.timeout else {}),
    )
    (recorder,) = sim.mapper.additional_data
    t0, c0 = time.perf_counter(), time.process_time()
    sim.start_simulation()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    inner = sim.end_simulation_time - sim.start_simulation_time

    with open(a.schedule, "w") as f:
        f.write("job_id,submit,start,end\n")
        for x, _, _ in jobs:
            start, end = recorder.done.get(x[0], ("", ""))
            f.write(f"{x[0]},{x[1]},{start},{end}\n")
    if a.policy == "easy" and a.reservations:
        with open(a.reservations, "w") as f:
            f.write("job_id,blocked_at,reserved_time\n")
            for r in reservations:
                f.write("%s,%d,%d\n" % r)
    completed = len(recorder.done)
    summary = {
        "simulator": "accasim-1.1.3",
        "policy": a.policy,
        "same_instant": a.same_instant,
        "trace": a.trace,
        "jobs": len(jobs),
        "completed": completed,
        "rejected": sim.rejected_jobs,
        "accasim_seconds": inner,
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "timeout": a.timeout,
        "jobs_per_second": len(jobs) / inner if inner > 0 else None,
    }
    if a.json:
        print(json.dumps(summary, indent=2))
    else:
        for k, v in summary.items():
            print(f"{k}: {v}")
    return 0 if completed == len(jobs) else 1


if __name__ == "__main__":
    sys.exit(main())
