//! Adoption: what a new `LocalCluster` finds in its work directory's log from an earlier
//! server. A launch whose end is recorded keeps its state; one with a process group that still
//! has a live process runs on and is watched again; one whose processes are all gone ended
//! while nobody watched, and the `exits` file tells how; one whose start was not written
//! down is queued again, in launch order, unless `exits` holds all its codes (it ran and
//! ended): the launcher does not start a launch twice (see [`super::launcher`]). Under the
//! `/bin/sh` wrapper (no launcher) a launch still running then is started a second time.
//! The advance reservations the log holds are held again.

use super::calendar::Resv;
use super::process::{self, Log, Record};
use super::{Inner, Launch, Phase};
use crate::{RemoteState, SubmitRequest};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Default)]
struct Found {
    request: Option<SubmitRequest>,
    started: Option<(i32, i64)>,
    killed: Option<String>,
    ended: Option<RemoteState>,
}

pub(super) fn adopt(work_dir: &Path, log: &Log, inner: &mut Inner) {
    let mut found: BTreeMap<u64, Found> = BTreeMap::new();
    for record in process::read_log(work_dir) {
        match record {
            Record::Request(r) => {
                let launch = r.launch;
                found.entry(launch).or_default().request = Some(r)
            }
            Record::Started {
                launch,
                pgid,
                started_ms,
            } => found.entry(launch).or_default().started = Some((pgid, started_ms)),
            Record::Killing { launch, reason } => {
                found.entry(launch).or_default().killed = Some(reason)
            }
            Record::Ended { launch, outcome } => {
                found.entry(launch).or_default().ended = Some(outcome.state())
            }
            Record::Reserved {
                name,
                count,
                start_ms,
                duration_ms,
            } => {
                let r = Resv {
                    count,
                    start_ms,
                    end_ms: start_ms + duration_ms,
                };
                inner.reservations.insert(name, r);
            }
            Record::Unreserved { name } => {
                inner.reservations.remove(&name);
            }
        }
    }
    inner.exits.refresh(&log.exits);
    for (launch, f) in found {
        let Some(request) = f.request else {
            continue;
        };
        let id = super::remote_id(launch);
        let phase = if let Some(state) = f.ended {
            Phase::Done(state)
        } else if let Some((pgid, started)) = f.started {
            if process::group_alive(pgid) {
                inner.busy += request.count;
                Phase::Running(process::adopted(
                    pgid,
                    started,
                    request.wall_time_ms,
                    f.killed,
                ))
            } else {
                // Gone now: its codes were all written before its group went, but perhaps
                // after the read above (seen in a soak: a rank that exited 0 counted as
                // killed, and its committed job run again).
                inner.exits.refresh(&log.exits);
                let state = inner
                    .exits
                    .outcome(launch, request.processes, f.killed.as_deref());
                log.ended(launch, &state);
                Phase::Done(state)
            }
        } else if inner.exits.has_all(launch, request.processes) {
            // Started, but the server stopped before it wrote the start down, and ended
            // since (a launcher starts a launch once; one that left has no record of it):
            // it ran, and is not started again.
            let state = inner
                .exits
                .outcome(launch, request.processes, f.killed.as_deref());
            log.ended(launch, &state);
            Phase::Done(state)
        } else {
            // Never started, or started and still running: the launcher answers a request
            // for a launch it started with that launch's group.
            inner.queue.push_back(id.clone());
            Phase::Queued
        };
        inner.launches.insert(id, Launch { request, phase });
    }
}
