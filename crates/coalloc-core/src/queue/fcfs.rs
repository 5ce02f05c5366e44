//! First Come First Served and Fit Processor First Served (seed 003 §3.2.2, §4.3.4).
//!
//! FCFS tries the queue's head only: while the head starts, the next becomes the head; when
//! the head does not fit, the pass ends. FPFS tries every job in arrival order and starts
//! each one that fits, so a job that fits may pass one that does not.
//!
//! Jobs return to the tail when they come back after an abort (seed 003 §4.3.4: "moved ...
//! to the tail of the wait-queue").
//!
//! Passes are incremental: a job that was tried and did not fit cannot fit before a site
//! gains processors or becomes usable ([`PassCtx::epoch`]), so until then a pass tries only
//! the jobs that arrived since the last one. Without this, every submission to a long queue
//! would re-try the whole queue.

use super::{Arrivals, PassCtx, QueuePolicy};
use crate::model::{Job, Time};
use crate::scheduler::api::JobId;

/// The arrival-ordered queue behind FCFS (`skip = false`) and FPFS (`skip = true`).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ArrivalOrder {
    skip: bool,
    queue: Arrivals,
    /// The epoch of the last pass, and the sequence numbers it had tried (all below).
    tried: Option<(u64, u64)>,
}

impl ArrivalOrder {
    pub fn fcfs() -> ArrivalOrder {
        ArrivalOrder::default()
    }

    pub fn fpfs() -> ArrivalOrder {
        ArrivalOrder {
            skip: true,
            ..ArrivalOrder::default()
        }
    }
}

impl QueuePolicy for ArrivalOrder {
    fn saved(&self) -> Option<crate::queue::saved::SavedRef<'_>> {
        Some(crate::queue::saved::SavedRef::Arrival(self))
    }

    fn name(&self) -> &'static str {
        if self.skip {
            "fpfs"
        } else {
            "fcfs"
        }
    }

    fn push(&mut self, id: JobId, _job: &Job, _now: Time) {
        self.queue.push(id);
    }

    fn remove(&mut self, id: JobId) {
        self.queue.remove(id);
    }

    fn len(&self) -> usize {
        self.queue.len()
    }

    fn pass(&mut self, ctx: &mut dyn PassCtx) {
        let epoch = ctx.epoch();
        // Jobs below `cursor` were tried at this epoch and did not fit.
        let mut cursor = match self.tried {
            Some((e, below)) if e == epoch => below,
            _ => 0,
        };
        self.tried = Some((epoch, self.queue.next_seq()));
        if !self.skip && self.queue.head_seq().is_some_and(|head| head < cursor) {
            return; // the head still does not fit, and FCFS does not look past it
        }
        loop {
            let Some((seq, id)) = self.queue.first_from(cursor) else {
                return;
            };
            if ctx.try_start(id, None) {
                self.queue.remove(id);
            } else if !self.skip {
                return;
            }
            cursor = seq + 1;
        }
    }
}
