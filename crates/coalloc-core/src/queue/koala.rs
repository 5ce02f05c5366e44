//! KOALA's two placement queues (seed 000 §3.1, §4).
//!
//! A submitted job gets one placement try at once; if it does not fit it joins the tail of
//! the high- or low-priority placement queue. Every `scan_interval` one queue is scanned
//! from head to tail, trying to place each job: the high-priority queue `s` times in a row,
//! then the low-priority queue once. A job whose failed placement tries exceed
//! `max_tries` fails (no limit by default, as in the paper's experiments). The cap on the
//! total queue length is the scheduler's `max_queued`.

use super::{PassCtx, QueuePolicy};
use crate::model::{Job, Millis, Priority, Time, MINUTE};
use crate::scheduler::api::JobId;
use std::collections::BTreeMap;

/// KOALA's parameters; the defaults are the paper's experiment (S = 2, 4 minutes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KoalaParams {
    /// Scans of the high-priority queue per scan of the low-priority queue (S ≥ 1).
    pub s: u32,
    /// Time between scans.
    pub scan_interval: Millis,
    /// Failed placement tries after which a job fails; `None` = never.
    pub max_tries: Option<u32>,
}

impl Default for KoalaParams {
    fn default() -> Self {
        KoalaParams {
            s: 2,
            scan_interval: 4 * MINUTE,
            max_tries: None,
        }
    }
}

/// The two queues.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Koala {
    params: KoalaParams,
    /// Arrival sequence → job, one map per priority.
    high: BTreeMap<u64, JobId>,
    low: BTreeMap<u64, JobId>,
    /// Job → (its queue is the high one, sequence).
    where_is: BTreeMap<JobId, (bool, u64)>,
    /// Jobs that have not had their first try yet, in arrival order.
    fresh: Vec<JobId>,
    next_seq: u64,
    /// Scans done so far (for the S:1 pattern).
    scans: u64,
    next_scan: Option<Time>,
}

impl Koala {
    pub fn new(params: KoalaParams) -> Koala {
        Koala {
            params: KoalaParams {
                s: params.s.max(1),
                scan_interval: params.scan_interval.max(1),
                ..params
            },
            ..Koala::default()
        }
    }

    /// Which queue the next scan visits.
    pub fn next_scan_is_high(&self) -> bool {
        self.scans % (u64::from(self.params.s) + 1) < u64::from(self.params.s)
    }

    fn take(&mut self, id: JobId) {
        if let Some((high, seq)) = self.where_is.remove(&id) {
            if high {
                self.high.remove(&seq);
            } else {
                self.low.remove(&seq);
            }
        }
    }

    /// Try one queued job; drop it if it started or ran out of tries.
    fn try_one(&mut self, id: JobId, ctx: &mut dyn PassCtx) {
        if ctx.try_start(id, None) {
            self.take(id);
            return;
        }
        let failures = ctx.record(id).placement_failures;
        if let Some(max) = self.params.max_tries.filter(|&m| failures > m) {
            self.take(id);
            ctx.fail(
                id,
                format!("no placement after {failures} tries (limit of {max} reached)"),
            );
        }
    }
}

impl QueuePolicy for Koala {
    fn saved(&self) -> Option<crate::queue::saved::SavedRef<'_>> {
        Some(crate::queue::saved::SavedRef::Koala(self))
    }

    fn name(&self) -> &'static str {
        "koala"
    }

    fn push(&mut self, id: JobId, job: &Job, now: Time) {
        self.take(id);
        let high = job.priority == Priority::High;
        let seq = self.next_seq;
        self.next_seq += 1;
        if high {
            self.high.insert(seq, id);
        } else {
            self.low.insert(seq, id);
        }
        self.where_is.insert(id, (high, seq));
        self.fresh.push(id);
        self.next_scan
            .get_or_insert(now + self.params.scan_interval);
    }

    fn remove(&mut self, id: JobId) {
        self.take(id);
        self.fresh.retain(|&f| f != id);
    }

    fn len(&self) -> usize {
        self.where_is.len()
    }

    fn pass(&mut self, ctx: &mut dyn PassCtx) {
        for id in std::mem::take(&mut self.fresh) {
            if self.where_is.contains_key(&id) {
                self.try_one(id, ctx);
            }
        }
        let now = ctx.now();
        if self.next_scan.is_some_and(|t| t <= now) {
            let high = self.next_scan_is_high();
            self.scans += 1;
            let queue: Vec<JobId> = if high {
                self.high.values().copied().collect()
            } else {
                self.low.values().copied().collect()
            };
            for id in queue {
                self.try_one(id, ctx);
            }
            self.next_scan = Some(now + self.params.scan_interval);
        }
        if self.where_is.is_empty() {
            self.next_scan = None;
        }
    }

    fn next_wakeup(&self) -> Option<Time> {
        self.next_scan.filter(|_| !self.where_is.is_empty())
    }
}
