//! The admission backlog: seed 000 §4.2 caps the placement queue ("at most 100 jobs"); a
//! server does not refuse a submission beyond the cap but holds it back (issue 20). A job
//! submitted while the queue is full gets its number at once and waits in the backlog, out
//! of the queue; backlog jobs enter the queue in submission order as room frees. The
//! backlog needs no journal of its own: it is rebuilt by replaying the submissions.

use super::api::JobId;
use super::Core;
use std::collections::VecDeque;

/// Jobs waiting for admission, oldest first.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Backlog {
    jobs: VecDeque<JobId>,
}

impl Backlog {
    pub(super) fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Take a cancelled job out.
    pub(super) fn remove(&mut self, id: JobId) {
        self.jobs.retain(|&j| j != id);
    }
}

impl Core {
    /// Whether a submission now must wait for admission: the queue (with what this event
    /// puts into it) is at the cap, or older jobs already wait.
    pub(super) fn must_wait(&self, queued: usize) -> bool {
        let full = self
            .config
            .max_queued
            .is_some_and(|max| queued + self.requeued.len() >= max);
        full || self.backlog.len() > 0
    }

    /// Job `id`, just submitted, waits in the backlog instead of entering the queue.
    pub(super) fn hold_for_admission(&mut self, id: JobId) {
        self.requeued.retain(|&j| j != id);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.awaiting_admission = true;
        }
        self.backlog.jobs.push_back(id);
    }

    /// Move backlog jobs into the queue, oldest first, while it has room (`queued` jobs in
    /// it now). Returns how many.
    pub(super) fn admit(&mut self, queued: usize) -> usize {
        let room = self.config.max_queued.map_or(usize::MAX, |max| {
            max.saturating_sub(queued + self.requeued.len())
        });
        let mut n = 0;
        while n < room {
            let Some(id) = self.backlog.jobs.pop_front() else {
                break;
            };
            if let Some(j) = self.jobs.get_mut(&id) {
                j.awaiting_admission = false;
                self.requeued.push(id);
                self.dirty = true;
                n += 1;
            }
        }
        n
    }
}
