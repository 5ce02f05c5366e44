//! Ended jobs leave memory (like Slurm's MinJobAge): once a job has been over for
//! `min_job_age`, its last view goes to the history table and a `forget` entry to the
//! journal, in one transaction; the core and the driver then drop everything they kept of
//! it. A replay forgets at the same entry, so a restart holds no more than the server did.
//! A job whose launches a restart still watches (their cancel may have died with the server
//! that journaled the job's end: `Driver::unsettled`) stays until its sites have said they
//! no longer run them: gone from memory, such a launch would be known to nobody, neither
//! cancelled nor dropped from its site.

use super::Driver;
use crate::entry::Entry;
use crate::history::HistoryRow;
use std::collections::BTreeSet;

/// The most jobs one turn moves to the history: a backlog (a restart after a long stop)
/// is worked off over several turns, each a transaction of bounded size.
const AGE_BATCH: usize = 5_000;

/// How often the driver looks for jobs old enough, when the last look found no backlog.
const AGE_EVERY: i64 = 1_000;

impl Driver {
    /// A job ended now: it may leave memory `min_job_age` from now.
    pub(crate) fn note_ended(&mut self, job: u64) {
        self.ended_at.push_back((self.now, job));
    }

    /// Move the jobs that ended long enough ago to the history (in this turn's commit).
    pub(crate) fn age_out(&mut self) {
        if self.now < self.next_age {
            return;
        }
        let cutoff = self.now.saturating_sub(self.config.min_job_age);
        let watched: BTreeSet<u64> = (self.unsettled.keys())
            .filter_map(|k| self.launches.get(k).map(|l| l.job))
            .collect();
        let (mut gone, mut kept) = (Vec::new(), Vec::new());
        while let Some(&(end, job)) = self.ended_at.front() {
            if end > cutoff || gone.len() == AGE_BATCH {
                break;
            }
            self.ended_at.pop_front();
            if watched.contains(&job) {
                kept.push((end, job));
                continue;
            }
            if let Some(j) = self.core.job(job).filter(|j| j.ended()) {
                let view = self.job_view(j, true);
                self.history.push(HistoryRow::of(&view));
                gone.push(job);
            }
        }
        // Still the oldest: looked at again at the next look.
        for k in kept.into_iter().rev() {
            self.ended_at.push_front(k);
        }
        let backlog = gone.len() == AGE_BATCH;
        self.next_age = if backlog {
            self.now
        } else {
            self.now + AGE_EVERY
        };
        if !gone.is_empty() {
            tracing::debug!(jobs = gone.len(), "ended jobs moved to the history");
            let _ = self.apply(Entry::Forget { jobs: gone });
        }
    }

    /// Drop what the core and the driver keep of these ended jobs.
    pub(crate) fn drop_jobs(&mut self, jobs: &[u64]) {
        for &j in jobs {
            self.core.forget_ended(j);
            self.abort_reasons.remove(&j);
            self.failed.remove(&j);
            self.aborts.remove(&j);
            self.committed.remove(&j);
        }
        let gone: BTreeSet<u64> = jobs.iter().copied().collect();
        // Their launches' ends were journaled before the jobs could age out: their sites
        // may drop them (not on replay: they keep them), once the `forget` entry is
        // committed: a server whose commit fails (a deposed leader's, refused) has told no
        // site to drop what the journal still holds (the simulation harness's fail-overs).
        if !self.replaying {
            for l in self.launches.values().filter(|l| gone.contains(&l.job)) {
                if let Some(r) = &l.remote {
                    (self.after_commit).push((l.site, crate::msg::SiteCall::Discard(r.clone())));
                }
            }
        }
        let launches: Vec<u64> = self
            .launches
            .iter()
            .filter(|(_, l)| gone.contains(&l.job))
            .map(|(k, _)| *k)
            .collect();
        self.rv.forget(&gone, &launches);
        self.launches.retain(|_, l| !gone.contains(&l.job));
    }
}
