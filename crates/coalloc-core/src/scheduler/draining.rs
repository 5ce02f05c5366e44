//! Draining launches: the launches of a *committed* run that the core stopped (killed at
//! its runtime limit, a failure after commit, a preemption) and that may still run at their
//! sites, until the driver reports that they are gone
//! ([`Event::CancelTaken`](super::Event::CancelTaken)) or their
//! site is given up on (its link lost past its grace, [`super::link`]).
//!
//! The transaction's promise (seed 002 §3.2) is that a run's components pass the barrier
//! together and only once: a component of the job must not run past the barrier of its
//! next run while a launch of the stopped one still runs past its own. A cancel is only
//! asked for; the launch it names may run on until the site's resource manager (or the
//! site's agent, over a link that may be silent) carries it out. The core forgot a
//! cancelled launch at once, and the job's next run, placed at the next period on another
//! site, released its barrier while the first launch still ran at a site whose link was
//! silent but not yet past its grace (the simulation harness, seed 1391 of `--policies`:
//! a TAGS chain's limit kill). So a stopped committed run's live launches (submitted ones
//! too: after a commit, a component that reaches the barrier passes it at once) are kept
//! here, and the barrier (`Core::check_commit`) commits no run of the job while any is: the next run
//! may be placed and started, only its barrier waits.
//!
//! Their processors are given back at once, as before, not when the launch is gone. The
//! simulator confirms every cancel at the same instant (its cancels take effect at once),
//! but only after the event that stopped the run has run its scheduling pass: processors
//! held until the confirmation would be missing from that pass, and the schedules of every
//! policy that kills at a runtime limit (TAGS, seed 004 §IV) would change. In the server,
//! a site's next reading puts its idle count right ([`super::sites::SiteTable::report`]
//! takes the manager's free processors over what coalloc's own launches leave), so at most
//! one monitor interval's placements may count a draining launch's processors idle; the
//! component so placed waits in the manager's queue until the cancel takes effect. For
//! the same reason the next run is not kept off the draining launches' sites.
//!
//! A draining launch of a job that ends (cancelled, or failed past its limits) is
//! forgotten with it: nothing waits for it any more.

use super::api::{JobId, LaunchId, SiteId};
use super::Core;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a draining launch is: its job, component and site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drain {
    pub job: JobId,
    pub component: usize,
    pub site: SiteId,
}

/// The draining launches, by launch number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Draining {
    launches: BTreeMap<LaunchId, Drain>,
}

impl Draining {
    /// Every draining launch, by number.
    pub fn iter(&self) -> impl Iterator<Item = (LaunchId, Drain)> + '_ {
        self.launches.iter().map(|(l, d)| (*l, *d))
    }

    pub fn get(&self, launch: LaunchId) -> Option<Drain> {
        self.launches.get(&launch).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.launches.is_empty()
    }

    /// Whether job `job` has a draining launch.
    pub fn holds(&self, job: JobId) -> bool {
        self.launches.values().any(|d| d.job == job)
    }

    fn insert(&mut self, launch: LaunchId, drain: Drain) {
        self.launches.insert(launch, drain);
    }

    fn remove(&mut self, launch: LaunchId) -> Option<Drain> {
        self.launches.remove(&launch)
    }

    /// Take out the draining launches that `which` picks; their jobs, in order, once each.
    fn take(&mut self, which: impl Fn(&Drain) -> bool) -> Vec<JobId> {
        let mut jobs: Vec<JobId> = Vec::new();
        self.launches.retain(|_, d| {
            if which(d) {
                jobs.push(d.job);
                false
            } else {
                true
            }
        });
        jobs.sort_unstable();
        jobs.dedup();
        jobs
    }
}

/// The draining launches as a snapshot keeps them: none when the head being read is of a
/// form before them (6 or older; it then reads nothing).
pub(super) fn read<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Draining, D::Error> {
    if super::snapshot::reading_drainless() {
        return Ok(Draining::default());
    }
    Draining::deserialize(d)
}

impl Core {
    /// Launch `launch` of component `i` of job `id`, on `site`, is being cancelled: keep it
    /// draining when its run had committed.
    pub(super) fn drain_if_committed(
        &mut self,
        id: JobId,
        i: usize,
        launch: LaunchId,
        site: SiteId,
    ) {
        let committed = self
            .jobs
            .get(&id)
            .is_some_and(|j| j.phase == super::jobs::Phase::Running);
        if committed {
            let drain = Drain {
                job: id,
                component: i,
                site,
            };
            self.draining.insert(launch, drain);
        }
    }

    /// [`Event::CancelTaken`](super::Event::CancelTaken): the launch is gone from its site;
    /// its job's run may commit once nothing else of it drains.
    pub(super) fn cancel_taken(&mut self, launch: LaunchId) {
        if let Some(d) = self.draining.remove(launch) {
            if !self.draining.holds(d.job) {
                self.check_commit(d.job);
            }
        }
    }

    /// Site `site` is given up on (its link lost past its grace): what drains there is no
    /// longer waited for (a lost site's launches fail as its fault, `link.rs`; what the
    /// agent still holds when it is back is cancelled by the driver).
    pub(super) fn give_up_draining_at(&mut self, site: SiteId) {
        for job in self.draining.take(|d| d.site == site) {
            if !self.draining.holds(job) {
                self.check_commit(job);
            }
        }
    }

    /// Job `id` ended: nothing waits for its draining launches any more.
    pub(super) fn forget_draining(&mut self, id: JobId) {
        if !self.draining.is_empty() {
            self.draining.take(|d| d.job == id);
        }
    }

    /// Whether job `id` has a draining launch (its run may not commit).
    pub(super) fn drains(&self, id: JobId) -> bool {
        !self.draining.is_empty() && self.draining.holds(id)
    }
}
