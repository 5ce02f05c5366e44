//! The rendezvous of a job's components (seed 002 §3.2–3.3; DESIGN.md, "The server as a
//! machine"): every job's secret, the barrier's check-ins and the job-scoped key-value
//! store, and the calls that wait on them.
//!
//! A component is at the barrier when every one of its processes checked in. A check-in
//! that finds the barrier closed is held here, not asked again: it is answered when its job
//! commits (`released`), aborts this start (`aborted`), or leaves memory; the API answers
//! `waiting` itself when the hold runs out (the caller then checks in again). Likewise a
//! read of a key not yet put waits here and is answered by the put. So a state change
//! wakes only the calls it answers, where every waiting call used to ask again after every
//! turn that changed anything (about k²/2 asks for k components).
//!
//! Secrets and values are journaled (they come back with a restart); check-ins and held
//! calls are not: after a restart the components' processes check in again.

use super::secrets::Secrets;
use super::Driver;
use crate::entry::Entry;
use crate::msg::{ApiError, BarrierAnswer, Reply};
use coalloc_core::scheduler::jobs::{CompPhase, Phase};
use coalloc_core::scheduler::{Fault, LaunchId};
use std::collections::{BTreeMap, BTreeSet};

type BarrierReply = Reply<Result<BarrierAnswer, ApiError>>;
type ReadReply = Reply<Result<Option<String>, ApiError>>;

/// What the rendezvous keeps.
#[derive(Default)]
pub(crate) struct Rendezvous {
    pub(crate) secrets: Secrets,
    /// The rendezvous store, by job and key.
    pub(crate) kv: BTreeMap<(u64, String), String>,
    /// Local ranks that checked in with ok, by launch.
    checkins: BTreeMap<u64, BTreeSet<u32>>,
    /// Check-ins waiting for their job to commit or abort, by (job, launch, local rank).
    held: BTreeMap<(u64, u64, u32), BarrierReply>,
    /// Reads waiting for their key, by (job, key).
    reads: BTreeMap<(u64, String), Vec<ReadReply>>,
    /// Jobs whose start may have changed in this turn: their held check-ins look again.
    touched: BTreeSet<u64>,
    /// Check-ins that did not ask to be held, answered at the end of the turn: (job, launch).
    answers: Vec<(u64, u64, BarrierReply)>,
}

impl Rendezvous {
    /// How many processes of a launch checked in.
    pub(crate) fn checked_in(&self, launch: u64) -> usize {
        self.checkins.get(&launch).map_or(0, BTreeSet::len)
    }

    /// The job's start may have changed: its held check-ins look again after the turn.
    pub(crate) fn touch(&mut self, job: u64) {
        if self
            .held
            .range((job, 0, 0)..=(job, u64::MAX, u32::MAX))
            .next()
            .is_some()
        {
            self.touched.insert(job);
        }
    }

    /// These jobs left memory: what is kept of them goes, and their held calls hear so.
    pub(crate) fn forget(&mut self, jobs: &BTreeSet<u64>, launches: &[u64]) {
        for &j in jobs {
            self.secrets.remove(j);
        }
        for l in launches {
            self.checkins.remove(l);
        }
        self.kv.retain(|(j, _), _| !jobs.contains(j));
        let gone = |j: &u64| jobs.contains(j);
        let held: Vec<_> = self.held.keys().filter(|k| gone(&k.0)).copied().collect();
        for k in held {
            if let Some(r) = self.held.remove(&k) {
                let _ = r.send(Ok(BarrierAnswer::Aborted {
                    reason: "the job has ended".into(),
                }));
            }
        }
        let reads: Vec<_> = self.reads.keys().filter(|k| gone(&k.0)).cloned().collect();
        for k in reads {
            for r in self.reads.remove(&k).unwrap_or_default() {
                let _ = r.send(Err(ApiError::not_found(format!("no job {}", k.0))));
            }
        }
    }
}

impl Driver {
    /// Whether `secret` is job `job`'s (a component's call presents it).
    pub(crate) fn check_secret(&self, job: u64, secret: &str) -> Result<(), ApiError> {
        match self.rv.secrets.get(job) {
            None => Err(ApiError::not_found(format!("no job {job}"))),
            Some(s) if crate::link::proto::constant_time_eq(secret, &s) => Ok(()),
            Some(_) => Err(ApiError::new(
                403,
                format!("that secret is not job {job}'s"),
            )),
        }
    }

    /// A process checks in at the barrier (`ok`), or reports a failed start (`!ok`). The
    /// answer waits for the end of the turn; with `hold`, a closed barrier's answer waits
    /// for the job to commit or abort.
    pub(crate) fn barrier(
        &mut self,
        job: u64,
        launch: u64,
        local_rank: u32,
        (ok, reason): (bool, Option<String>),
        hold: bool,
        reply: BarrierReply,
    ) {
        // A check-in is answered from the state the turn leaves, not the one it found: the
        // check-in that releases the barrier may be followed in the same turn by a failure
        // that aborts the start, and its process must then hear `aborted`, not `released`
        // (the simulation harness, seeds 183660 and 195223).
        match self.check_in(job, launch, local_rank, ok, reason) {
            Ok(_) if hold => {
                // A second check-in of the same process replaces the first (its caller gave
                // up on it).
                self.rv.held.insert((job, launch, local_rank), reply);
                self.rv.touched.insert(job);
            }
            Ok(_) => self.rv.answers.push((job, launch, reply)),
            Err(e) => self.reply_later(reply, Err(e)),
        }
    }

    fn check_in(
        &mut self,
        job: u64,
        launch: u64,
        local_rank: u32,
        ok: bool,
        reason: Option<String>,
    ) -> Result<BarrierAnswer, ApiError> {
        let Some(l) = self.launches.get(&launch) else {
            return Err(ApiError::not_found(format!("no launch {launch}")));
        };
        if l.job != job {
            return Err(ApiError::new(
                403,
                format!("launch {launch} is not job {job}'s"),
            ));
        }
        if local_rank >= l.processes {
            return Err(ApiError::bad(format!(
                "local rank {local_rank} is out of range: launch {launch} has {} processes",
                l.processes
            )));
        }
        let processes = l.processes;
        let answer = self.barrier_state(job, launch);
        if answer != BarrierAnswer::Waiting {
            return Ok(answer);
        }
        if !ok {
            let reason = reason.unwrap_or_else(|| "the component reported a failed start".into());
            self.fail_launch(launch, reason.clone(), Fault::Job);
            return Ok(BarrierAnswer::Aborted { reason });
        }
        let ranks = self.rv.checkins.entry(launch).or_default();
        ranks.insert(local_rank);
        if ranks.len() as u32 >= processes {
            if self.phase_of(launch) == Some(CompPhase::Submitted) {
                let _ = self.apply(Entry::Started { launch });
                self.emit_launch("component_started", launch);
            }
            if self.phase_of(launch) == Some(CompPhase::Started) {
                let _ = self.apply(Entry::Ready { launch });
                self.emit_launch("component_checked_in", launch);
            }
        }
        Ok(self.barrier_state(job, launch))
    }

    /// What a process of this launch hears at the barrier now.
    pub(crate) fn barrier_state(&self, job: u64, launch: u64) -> BarrierAnswer {
        let aborted = |why: &str| BarrierAnswer::Aborted {
            reason: self
                .abort_reasons
                .get(&job)
                .cloned()
                .unwrap_or_else(|| why.to_string()),
        };
        let Some(state) = self.core.job(job) else {
            return aborted("no such job");
        };
        let Some(l) = self.launches.get(&launch) else {
            return aborted("this start of the component was aborted");
        };
        let current = state.comps.get(l.component).and_then(|c| c.launch) == Some(LaunchId(launch));
        if l.ended && !current {
            return aborted("this start of the component was aborted");
        }
        // A component that comes to the barrier after its job committed (an optional one,
        // or one started since) passes only once its input file is there: the commit did
        // not wait for it (the simulation harness, `--files` seed 708).
        let file_there = state
            .comps
            .get(l.component)
            .is_none_or(|c| !c.transferring());
        match state.phase {
            Phase::Running if current && file_there => BarrierAnswer::Released,
            Phase::Running if current => BarrierAnswer::Waiting,
            Phase::Ended => aborted("the job has ended"),
            _ if !current => aborted("this start of the component was aborted"),
            _ => BarrierAnswer::Waiting,
        }
    }

    /// A read of the job's store: the value, or (`wait`) the put that brings it.
    pub(crate) fn kv_get(&mut self, job: u64, key: String, wait: bool, reply: ReadReply) {
        if self.core.job(job).is_none() {
            let _ = reply.send(Err(ApiError::not_found(format!("no job {job}"))));
            return;
        }
        match self.rv.kv.get(&(job, key.clone())).cloned() {
            Some(v) => {
                let _ = reply.send(Ok(Some(v)));
            }
            None if wait => {
                let waiting = self.rv.reads.entry((job, key)).or_default();
                waiting.retain(|r| !r.is_closed());
                waiting.push(reply);
            }
            None => {
                let _ = reply.send(Ok(None));
            }
        }
    }

    /// A put to the job's store, journaled; the reads waiting for it hear the value after
    /// the commit.
    pub(crate) fn kv_put(
        &mut self,
        job: u64,
        key: String,
        value: String,
        reply: Reply<Result<(), ApiError>>,
    ) {
        if self.core.job(job).is_none() {
            self.reply_later(reply, Err(ApiError::not_found(format!("no job {job}"))));
            return;
        }
        let waiting = self
            .rv
            .reads
            .remove(&(job, key.clone()))
            .unwrap_or_default();
        for r in waiting {
            self.reply_later(r, Ok(Some(value.clone())));
        }
        let _ = self.apply(Entry::KvPut { job, key, value });
        self.reply_later(reply, Ok(()));
    }

    /// After the turn's commit: answer the check-ins of the turn, and the held ones of the
    /// jobs it touched whose barrier is no longer closed to them.
    pub(crate) fn answer_held(&mut self) {
        let mut out: Vec<(BarrierReply, BarrierAnswer)> = Vec::new();
        for (job, launch, r) in std::mem::take(&mut self.rv.answers) {
            out.push((r, self.barrier_state(job, launch)));
        }
        for job in std::mem::take(&mut self.rv.touched) {
            let keys: Vec<(u64, u64, u32)> = self
                .rv
                .held
                .range((job, 0, 0)..=(job, u64::MAX, u32::MAX))
                .map(|(k, _)| *k)
                .collect();
            for k in keys {
                let answer = self.barrier_state(k.0, k.1);
                if answer != BarrierAnswer::Waiting {
                    if let Some(r) = self.rv.held.remove(&k) {
                        out.push((r, answer));
                    }
                }
            }
        }
        // What a process hears (the job committed, or aborted) is on disk first. When the
        // journal failed, the calls are dropped unanswered (the server stops).
        if out.is_empty() || !self.durable() {
            return;
        }
        for (r, answer) in out {
            let _ = r.send(Ok(answer));
        }
    }
}
