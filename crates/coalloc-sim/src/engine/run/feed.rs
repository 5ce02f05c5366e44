//! Trace jobs that arrive during a run from a reader on another thread ([`super::simulate_fed`]):
//! each chunk becomes workload jobs, ends and arrivals as the loop needs the next arrival
//! (no outcomes: a fed run makes none), and the last one sets the run's last arrival and
//! window.

use super::{Ended, Sim};
use crate::replay::TraceJob;
use coalloc_core::model::SECOND;
use std::sync::mpsc::{Receiver, SyncSender};

/// A fed run's end of its reader's channels ([`super::simulate_fed`]).
pub struct FedJobs {
    /// Chunks of jobs in file order, until the reader drops its end.
    pub chunks: Receiver<Vec<TraceJob>>,
    /// The chunks given back, emptied, for the reader to fill again (no fresh memory per
    /// chunk, none freed on another thread than its own).
    pub spent: SyncSender<Vec<TraceJob>>,
    /// About how many jobs will come: room for them is made at once.
    pub capacity: usize,
}

/// The reader's end of a fed run.
pub(super) struct Feed {
    /// Chunks of jobs in file order; closed when the reader is done.
    rx: Option<Receiver<Vec<TraceJob>>>,
    spent: SyncSender<Vec<TraceJob>>,
    /// The latest submit time passed on so far (trace seconds; jobs come in submit order,
    /// so at the end it is the last arrival).
    latest: i64,
    /// A job came before one already passed on: the run stops.
    pub(super) unsorted: bool,
}

impl Feed {
    pub(super) fn new(fed: FedJobs) -> Feed {
        Feed {
            rx: Some(fed.chunks),
            spent: fed.spent,
            latest: i64::MIN,
            unsorted: false,
        }
    }

    /// Whether more jobs may still come (an unsorted trace closes the feed too).
    pub(super) fn open(&self) -> bool {
        self.rx.is_some()
    }
}

impl Sim<'_> {
    /// Wait for the reader's next chunk and add its jobs (none when it is done: the last
    /// arrival and the window are known then).
    #[cold]
    #[inline(never)]
    pub(super) fn take_fed(&mut self) {
        let Some(feed) = self.feed.as_mut().filter(|f| f.open()) else {
            return;
        };
        // An empty chunk (none is sent) would look like the end of the trace.
        let chunk = feed
            .rx
            .as_ref()
            .and_then(|rx| rx.iter().find(|c| !c.is_empty()));
        let Some(mut chunk) = chunk else {
            feed.rx = None;
            // The last arrival is the last job's (the empty workload's when none came).
            if feed.latest != i64::MIN {
                self.last_arrival = feed.latest * SECOND;
            }
            if self.params.window_end.is_none() {
                self.window_end = self.last_arrival;
                self.sites.set_window_end(self.window_end);
            }
            return;
        };
        if chunk.windows(2).any(|w| w[1].submit < w[0].submit)
            || chunk.first().is_some_and(|j| j.submit < feed.latest)
        {
            feed.unsorted = true;
            feed.rx = None;
            return;
        }
        feed.latest = chunk.last().map_or(feed.latest, |j| j.submit);
        let from = self.work.len();
        self.work.feed(&chunk);
        for i in from..self.work.len() {
            self.ends.push(Ended::NOT);
            self.arrivals.push((chunk[i - from].submit * SECOND, i));
        }
        chunk.clear();
        if let Some(feed) = &self.feed {
            // A reader that is done (or has chunks enough) does without it.
            let _ = feed.spent.try_send(chunk);
        }
    }
}
