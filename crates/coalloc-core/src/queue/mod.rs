//! Queue policies: which queued job the scheduler tries to start next, and when it stops
//! trying. Each policy is a module named after it:
//!
//! - [`fcfs`]: First Come First Served and Fit Processor First Served (seed 003 §3.2.2,
//!   §4.3.4).
//!
//! A policy owns the order of the queued jobs; the scheduler owns everything else and offers
//! it through [`PassCtx`] during a scheduling pass.

pub mod fcfs;

use crate::model::{Job, Millis, Time};
use crate::scheduler::api::JobId;

/// What a policy may ask of the scheduler during a pass.
pub trait PassCtx {
    /// The time of the pass.
    fn now(&self) -> Time;
    /// A queued job.
    fn job(&self, id: JobId) -> &Job;
    /// Place the job with the configured fit (on the allowed sites only, if given) and, if
    /// it fits, start it. Returns whether it started.
    fn try_start(&mut self, id: JobId, allowed: Option<&[bool]>) -> bool;
    /// Whether the job could be placed now, without starting it.
    fn fits(&self, id: JobId, allowed: Option<&[bool]>) -> bool;
}

/// A queue policy. The scheduler calls `push` when a job enters the queue (at submission or
/// when it returns after an abort), `remove` when it leaves it for any reason but a start
/// from `pass`, and `pass` whenever something changed that could let a job start.
pub trait QueuePolicy: std::fmt::Debug + Send {
    /// The policy's configuration name.
    fn name(&self) -> &'static str;
    /// A job enters the queue.
    fn push(&mut self, id: JobId, job: &Job, now: Time);
    /// A job leaves the queue without being started by `pass` (cancelled, failed).
    fn remove(&mut self, id: JobId);
    /// Jobs in the queue.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// One scheduling pass: try to start jobs, in the policy's order.
    fn pass(&mut self, ctx: &mut dyn PassCtx);
    /// When the policy wants a pass even if nothing else happens (periodic scans).
    fn next_wakeup(&self) -> Option<Time> {
        None
    }
    /// A job ran for this long and finished (for runtime predictors).
    fn finished(&mut self, _id: JobId, _job: &Job, _runtime: Millis) {}
}
