//! The invariants checked after every step of a run (issue 30, item 4):
//!
//! - no acknowledged submission is lost across any number of crashes (checked at each
//!   restart, in `World::start_server`);
//! - a restart from the journal reaches the state of the run that wrote it (likewise);
//! - the barrier is never released with a required component missing or not checked in
//!   (`released`, when a process hears `released`);
//! - no component has two launches running past the barrier at once, at any manager, but
//!   while the manager of the one given up on cannot be reached to cancel it, or its
//!   agent's link is down (and a grace for the worker's retries after: back, the server
//!   cancels what the agent still holds);
//! - a launch a direct site's worker was asked to cancel is gone from its manager within
//!   `CANCEL_GRACE` (and a second) of the later of the ask and the manager's taking
//!   cancels again (back up, and `Fault::SlowCancels` over): the
//!   worker tries until the manager takes it (not checked at agent sites, whose
//!   `AgentCalls` gives a cancel up after five tries);
//! - no site's processors are counted above its size, and none counted idle that its
//!   manager has not free: the core's idle count of a site is at most the manager's free
//!   processors plus those of launches the core has let go of (a release counted twice
//!   breaks it);
//! - once faults stop, every job ends and nothing is left running at any manager (the run
//!   must end within 40 virtual minutes of its last fault).
//! - then, with jobs that leave memory within the run (`min_job_age`), nothing grows for
//!   ever: every launch a manager took and ended is discarded from its launch log within
//!   `DISCARD_GRACE` of the last job's leaving (`World::discards_settled`), but for
//!   those whose id the server never heard or did not record (an answer lost, a commit
//!   cut: it cancels them by launch number, or as orphans an agent reports) and those
//!   whose discard a server crash took with it (an agent site's, not yet sent);
//! - reservations (issue 31): a launch submitted into a reservation is its own job's and
//!   component's (by the reservation's name) and does not run before the window it was
//!   submitted into begins; the barrier of a reserving run is never released before the
//!   run's promised start; once the run is over, no manager holds any reservation, within
//!   `RESERVE_GRACE` (nothing left behind, across any number of server crashes);
//! - fail-overs (issue 32): what a deposed leader does after the takeover reaches no site,
//!   and the journal's fencing numbers never go back (`super::failover`);
//! - no component's program is started twice unless a fault that may rightly start it
//!   again came first (`super::reruns`, which says which faults excuse which jobs, and
//!   for how long): server crashes and fail-overs alone start nothing twice (issue 32,
//!   failover_netns: a leader cut off between two submissions of a job).

use super::{Violation, World};
use coalloc_core::model::StartType;
use coalloc_core::scheduler::jobs::{CompPhase, Phase};
use coalloc_core::scheduler::LaunchId;
use std::collections::BTreeMap;

/// How long after its manager is back a launch given up on may still run (the site worker
/// tries a cancel again after 1, 2, 4, 8 s, then every 16 s: `cancel_retry_after`).
const CANCEL_GRACE: coalloc_core::model::Time = 16_000;

/// How often the server looks for jobs old enough to leave memory (`driver/aging.rs`).
const AGE_EVERY: coalloc_core::model::Time = 1_000;

/// How long past the last job's leaving memory its launches' discards may take: the aging
/// runs every second, an agent site's discards go with its next poll (200 ms) while its link
/// is up; a lossy network resets links now and then, and their reconnection backs off.
const DISCARD_GRACE: coalloc_core::model::Time = 60_000;

/// How long past the run's being over a reservation may still be at its manager: a
/// deletion is tried again every 16 s at most, and at an agent site fails while its link is
/// down, which on a lossy network (connections reset every few seconds) may be most of the
/// time (seed 469 took more than 60 s).
const RESERVE_GRACE: coalloc_core::model::Time = 300_000;

/// A process of launch `id` at `site` heard `released`: its job runs, and every required
/// component's current launch has had every process check in, as the server that answered
/// (of incarnation `inc`: the leader, or a deposed one) knew it.
pub(super) fn released(w: &World, site: usize, id: u64, inc: u64) -> Result<(), Violation> {
    let s = w.server_of(inc).expect("a server answered");
    let l = &w.rms[site].launches[&id];
    let Some(job) = s.driver.core().job(l.job) else {
        return Err(w.violation(format!(
            "launch {} released, its job {} unknown",
            l.launch, l.job
        )));
    };
    if job.phase != Phase::Running {
        return Err(w.violation(format!(
            "launch {} released while job {} is {:?}",
            l.launch, l.job, job.phase
        )));
    }
    let reserve = s.driver.core().reservations();
    if let Some(t) = reserve.runs.get(&l.job).and_then(|r| r.start) {
        if w.now < t {
            return Err(w.violation(format!(
                "launch {} of job {} released {} ms before its run's promised start",
                l.launch,
                l.job,
                t - w.now
            )));
        }
    }
    for (i, c) in job.comps.iter().enumerate() {
        // A flexible job's components are made at its placement: all required.
        let required = job
            .job
            .components
            .get(i)
            .is_none_or(|s| s.start_type == StartType::Required);
        if !required || c.phase == CompPhase::Deleted {
            continue;
        }
        let (Some(LaunchId(launch)), Some(at)) = (c.launch, c.site) else {
            return Err(w.violation(format!(
                "job {} released with required component {i} not started",
                l.job
            )));
        };
        // The last the manager took under that number (an agent that lost its record of
        // one, as one did stopping it at a heartbeat stop, makes one sent again a second
        // time).
        let there = (w.rms[at].launches.values().rev()).find(|x| x.launch == launch);
        let ok = there.is_some_and(|x| {
            x.checked.len() as u32 >= x.processes
                && !matches!(x.state, super::rm::St::Pending { .. })
        });
        if !ok {
            let seen = there.map(|x| (x.checked.len(), x.processes, x.state.clone()));
            return Err(w.violation(format!(
                "job {} released with required component {i} (launch {launch} at s{at}) without every process checked in (checked in, processes, state: {seen:?})",
                l.job
            )));
        }
    }
    Ok(())
}

impl World {
    /// The invariants that hold at every moment.
    pub(super) fn check(&mut self) -> Result<(), Violation> {
        self.check_reruns()?;
        if let Some(s) = &self.server {
            let core = s.driver.core();
            for i in 0..self.plan.sites.len() {
                let Some(st) = core.site_state(i) else {
                    continue;
                };
                // Its size: as configured (the monitor's `processors` is 0 until it answers).
                let size = self.plan.sites[i].processors;
                if [st.processors, st.ours, st.pending, st.idle]
                    .iter()
                    .any(|n| *n > size)
                {
                    return Err(self.violation(format!(
                        "site s{i} of {size} counted beyond its size: processors {}, ours {}, pending {}, idle {}",
                        st.processors, st.ours, st.pending, st.idle
                    )));
                }
                // The manager's truth: its free processors, and those of running launches
                // the core no longer counts as its own (cancels on their way). Not while the
                // manager does not answer: the count is then its last reading's, and nothing
                // is placed there.
                let rm = &self.rms[i];
                let live = |l: &&super::rm::Launch| {
                    core.job(l.job)
                        .and_then(|j| j.comps.get(l.component))
                        .is_some_and(|c| c.live() && c.launch == Some(LaunchId(l.launch)))
                };
                let held: u32 = rm
                    .launches
                    .values()
                    .filter(|l| l.running())
                    .filter(live)
                    .map(|l| l.count)
                    .sum();
                let free = size - rm.plan.other - held.min(size - rm.plan.other);
                if self.read[i] && st.healthy && st.idle > free {
                    return Err(self.violation(format!(
                        "site s{i} counted {} idle where its manager has {free} free for the core's live launches (a release counted twice?); ours {}, pending {}",
                        st.idle, st.ours, st.pending
                    )));
                }
            }
        }
        for (site, rm) in self.rms.iter().enumerate() {
            if self.net.is_agent(site) {
                continue;
            }
            for (id, l) in &rm.launches {
                let Some(asked) = l.cancel_asked.filter(|_| !l.ended()) else {
                    continue;
                };
                if self.now > asked.max(rm.cancels_back()) + CANCEL_GRACE + 1_000 {
                    return Err(self.violation(format!(
                        "R{id} at s{site} (job {} launch {}) still {:?}, asked to cancel at +{} ms (its manager back at +{} ms)",
                        l.job,
                        l.launch,
                        l.state,
                        asked - super::plan::T0,
                        rm.cancels_back().saturating_sub(super::plan::T0)
                    )));
                }
            }
        }
        self.check_reserved()?;
        let mut past_barrier: BTreeMap<(u64, usize), Vec<(usize, u64)>> = BTreeMap::new();
        for (site, rm) in self.rms.iter().enumerate() {
            for l in rm.launches.values().filter(|l| l.running() && l.released) {
                past_barrier
                    .entry((l.job, l.component))
                    .or_default()
                    .push((site, l.launch));
            }
        }
        let current = |job: u64, c: usize| {
            let s = self.server.as_ref()?;
            let j = s.driver.core().job(job)?;
            j.comps.get(c)?.launch.map(|l| l.0)
        };
        for ((job, c), launches) in past_barrier.iter().filter(|(_, v)| v.len() > 1) {
            // A launch the server has given up on may run on while its site's manager cannot
            // be reached to cancel it, and for a grace after (the worker's retries); past
            // that it is a component started twice.
            let Some(now_current) = current(*job, *c) else {
                continue;
            };
            let unreachable = launches.iter().all(|(site, l)| {
                // An agent site is out of reach until its link is back (`super::net`).
                let until = self.rms[*site]
                    .cancels_back()
                    .max(self.net.cut_off_until(*site));
                *l == now_current || self.now < until.saturating_add(CANCEL_GRACE)
            });
            if !unreachable {
                return Err(self.violation(format!(
                    "job {job} component {c} runs past the barrier twice: (site, launch) {launches:?}"
                )));
            }
        }
        Ok(())
    }

    /// Every launch submitted into a reservation: the reservation is its own job's and
    /// component's, and it did not start before the window it was submitted into.
    fn check_reserved(&self) -> Result<(), Violation> {
        for (site, rm) in self.rms.iter().enumerate() {
            for (id, l) in &rm.launches {
                let Some((name, start)) = &l.reservation else {
                    continue;
                };
                let own = format!("coalloc-J{}-c{}-", l.job, l.component);
                if !name.starts_with(&own) {
                    return Err(self.violation(format!(
                        "R{id} at s{site} (job {} component {}) was submitted into another's reservation {name}",
                        l.job, l.component
                    )));
                }
                if let super::rm::St::Running { since } = l.state {
                    if since < *start {
                        return Err(self.violation(format!(
                            "R{id} at s{site} (job {} launch {}) runs from +{} ms, before its reservation {name} begins at +{} ms",
                            l.job,
                            l.launch,
                            since - super::plan::T0,
                            start - super::plan::T0
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Once the run is over ([`World::done`]): whether no manager holds a reservation; an
    /// error listing them once they have had [`RESERVE_GRACE`] to be deleted.
    pub(super) fn reservations_settled(&mut self) -> Result<bool, Violation> {
        let left: Vec<String> = self
            .rms
            .iter()
            .enumerate()
            .flat_map(|(site, rm)| {
                rm.windows.iter().map(move |(name, w)| {
                    format!(
                        "{name} at s{site} ({} processors over +{}..+{} ms)",
                        w.count,
                        w.start - super::plan::T0,
                        w.end - super::plan::T0
                    )
                })
            })
            .collect();
        if left.is_empty() {
            return Ok(true);
        }
        let since = *self.reservations_over.get_or_insert(self.now);
        if self.now < since + RESERVE_GRACE {
            return Ok(false);
        }
        Err(self.violation(format!(
            "reservations left behind at their managers {} s after every job ended: {}",
            (self.now - since) / 1000,
            left.join("; ")
        )))
    }

    /// Once the run is over ([`World::done`]): whether every ended launch has left its
    /// manager's log, or is excused (see the module doc); an error once the jobs have had
    /// `min_job_age` and [`DISCARD_GRACE`] to leave memory and their discards to arrive.
    /// Always settled when jobs never leave memory within a run.
    pub(super) fn discards_settled(&mut self) -> Result<bool, Violation> {
        let Some(age) = self.plan.min_job_age else {
            return Ok(true);
        };
        let since = *self.quiet_since.get_or_insert(self.now);
        let mut left = Vec::new();
        for (site, rm) in self.rms.iter().enumerate() {
            for (id, l) in &rm.launches {
                let excused =
                    !l.told || l.by_number || self.discards_lost[site].contains(&format!("R{id}"));
                if l.ended() && !l.discarded && !excused {
                    left.push(format!(
                        "R{id} at s{site} (job {} launch {}, {:?})",
                        l.job, l.launch, l.state
                    ));
                }
            }
        }
        if left.is_empty() {
            return Ok(true);
        }
        if self.now < since + age + AGE_EVERY + DISCARD_GRACE {
            return Ok(false);
        }
        Err(self.violation(format!(
            "launches never discarded from their manager's log ({} s after the run was over, min_job_age {age} ms): {}",
            (self.now - since) / 1000,
            left.join("; ")
        )))
    }
}
