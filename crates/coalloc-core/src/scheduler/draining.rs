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
//! The cancel is asked for again every `recancel_interval` (a [`super::SchedulerConfig`]
//! field; 30 s in a server, none in the simulator) while the launch drains. Asked once, it
//! could be lost for good with the launch still running, and the job's next run then
//! waited at its barrier until the barrier timeout, the agent's reconnecting or a cancel of
//! the job: an agent site's link gives a failed cancel up after five tries while the link
//! stays up; a direct site's resource manager may be down, or refuse the cancel, when it is
//! sent; a site an operator takes down keeps what runs there. The core reads no clock: a
//! draining launch's cancel sets one of the core's timers (`Timer::Recancel`) for the `now`
//! of the event that sent it plus the interval. Like every timer it fires at the first event
//! or tick at or after its time ([`super::Scheduler::next_wakeup`] has it, so a driver wakes
//! for it), and sends the same [`Command::CancelComponent`] as the first (a driver carries it
//! out the same way; a cancel of a launch already gone changes nothing at its site) and sets
//! the next one. It is the last of the timers' variants, so at one time it fires after the
//! others (a launch that a timer gives up on then, its site lost, is not asked again), and
//! several at one time fire in launch order. None is sent while the site's link is down (the
//! call could not reach the agent; the driver cancels what the agent still holds when it is
//! back, and a lost link gives the launch up); the next one is set all the same. One that
//! fires for a launch that no longer drains (taken, given up on, its job ended) does
//! nothing and sets none, as the core's other timers of what has moved on.
//!
//! The timers are in the snapshot (form 8), so a restored core asks again when the core it
//! was taken of would have. A form-7 snapshot has none (form 7's core kept their times
//! apart, out of the snapshot; the forms before kept no draining launches), nor has one
//! taken without an interval: [`Scheduler::restore`](super::Scheduler::restore) gives each
//! draining launch without a timer one, an interval after the snapshot's time, and drops
//! them all under a configuration without an interval (the server's restart also cancels
//! every draining launch once more, its driver's `cancel_superseded_again`). The
//! simulator's cancels take effect at once, but it hears them taken at its next instant: a
//! wake-up for a repeated cancel could bring that instant forward and change its
//! schedules, so it runs without one.
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

use super::api::{Command, JobId, LaunchId, SiteId};
use super::{Core, Scheduler, Timer};
use crate::model::Time;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

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
    /// draining when its run had committed, its cancel to go again an interval from now.
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
            self.draining.launches.insert(launch, drain);
            self.recancel_later(launch);
        }
    }

    /// Set the timer of draining launch `launch`'s next cancel `recancel_interval` after
    /// now (none without an interval).
    fn recancel_later(&mut self, launch: LaunchId) {
        if let Some(every) = self.config.recancel_interval {
            let at = self.now.saturating_add(every.max(1));
            self.timers.insert((at, Timer::Recancel { launch }));
        }
    }

    /// `Timer::Recancel`: send the cancel of `launch` again if it still drains, and set its
    /// next one: a cancel asked once may be lost while the launch runs on (the module's doc;
    /// the barrier of the job's next run waits for it, seed 002 §3.2). Not while the site's
    /// link is down (the call could not reach its agent); the next one is set all the same.
    pub(super) fn recancel(&mut self, launch: LaunchId) {
        let Some(d) = self.draining.get(launch) else {
            return;
        };
        if self.config.recancel_interval.is_none() {
            return;
        }
        let linked = self.sites.state.get(d.site).is_some_and(|s| s.link.is_up());
        if linked {
            self.commands.push_back(Command::CancelComponent {
                launch,
                job: d.job,
                component: d.component,
                site: d.site,
            });
        }
        self.recancel_later(launch);
    }

    /// After a restore: the repeated cancels follow the configuration's interval. Without
    /// one, no timer of theirs is kept; with one, each draining launch that has none (a
    /// form-7 snapshot kept none, nor did one taken without an interval) is asked again one
    /// interval after the snapshot's time (the module's doc).
    pub(super) fn recancel_after_restore(&mut self) {
        if self.config.recancel_interval.is_none() {
            self.timers
                .retain(|(_, t)| !matches!(t, Timer::Recancel { .. }));
            return;
        }
        if self.draining.is_empty() {
            return;
        }
        let timed: BTreeSet<LaunchId> = (self.timers.iter())
            .filter_map(|(_, t)| match t {
                Timer::Recancel { launch } => Some(*launch),
                _ => None,
            })
            .collect();
        let untimed: Vec<LaunchId> = (self.draining.launches.keys())
            .filter(|l| !timed.contains(l))
            .copied()
            .collect();
        for launch in untimed {
            self.recancel_later(launch);
        }
    }

    /// [`Event::CancelTaken`](super::Event::CancelTaken): the launch is gone from its site;
    /// its job's run may commit once nothing else of it drains.
    pub(super) fn cancel_taken(&mut self, launch: LaunchId) {
        if let Some(d) = self.draining.launches.remove(&launch) {
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

impl Scheduler {
    /// When the cancel of draining launch `launch` goes again (its `Timer::Recancel`), if
    /// it drains and has one. A look through every timer: for tests and diagnostics.
    pub fn recancel_at(&self, launch: LaunchId) -> Option<Time> {
        let core = &self.core;
        core.draining.get(launch)?;
        let timer = Timer::Recancel { launch };
        (core.timers.iter())
            .find(|(_, x)| *x == timer)
            .map(|(t, _)| *t)
    }
}
