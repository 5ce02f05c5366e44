//! Backfilling: EASY and conservative (seed 003 §3.2.2).
//!
//! Seed 003 §3.2.2: backfilling "is similar to FPFS, but in every re-scheduling action, the
//! execution of the next job must not be delayed by the smaller job ... that jumped over
//! it. ... The EASY version has to make sure that the execution of the first job will not be
//! delayed by the backfilled job, while the conservative version has to make sure that not
//! only the execution of the first job, but also the execution of every job that has arrived
//! prior to the backfilled job must not be delayed. For this condition, the scheduler must
//! estimate the execution time of both running and queued jobs."
//!
//! - [`Easy`] (`easy`): one reservation, for the first job that does not fit.
//! - [`Conservative`] (`conservative`): a reservation for every queued job.
//!
//! Both keep the queue in arrival order; a job that comes back after an abort goes to the
//! tail, as with FCFS (seed 003 §4.3.4).
//!
//! # Time, estimates and the profile
//!
//! Every pass rebuilds a [`Profile`]: free processors per site over time, from the idle
//! processors now and the running (or starting) jobs of [`PassCtx::running`], each of which
//! gives its processors back at its estimated end (its start plus [`PassCtx::estimate`]). A
//! running job past its estimate is taken to end now. A queued job is assumed to run for
//! [`PassCtx::estimate`] (at least 1 ms). Jobs may run longer or shorter than estimated:
//! reservations live for one pass only, so the next pass corrects them. Processors busy with
//! local jobs (not coalloc's) stay busy in the profile.
//!
//! # Co-allocation
//!
//! A job has several components over several sites, so a reservation is a number of
//! processors per site: where [`PassCtx::place_on`] (the configured fit, as a dry run) puts
//! the job against the profile's free processors at its start time. "Not delaying" a job
//! means leaving those per-site processors free for it. A later job may start now only if
//! the placement the scheduler would really make now stays within what the reservations
//! leave ([`start_within`]): first the placement on the idle processors now; if that takes
//! reserved processors, the placement on the idle processors minus the reserved ones gives a
//! set of sites, and the job is started with the scheduler's placement restricted to those
//! sites, when that placement stays within bounds too.
//!
//! The guarantee is about processor counts per site: at the reservation's time the reserved
//! site has the reserved processors free. Whether the configured fit then picks exactly that
//! placement is the placement module's business (it will see at least as many free
//! processors on every site as it saw in the dry run).
//!
//! # A job that fits at no time
//!
//! A job may fit at no step of the profile, not even when every running job has ended: it
//! needs a site that is unusable now, or processors that local jobs hold. What stops it is
//! outside coalloc's estimates and may go away at any moment, so its start time is unknown.
//! It is then placed in the *relaxed* profile — every site usable, local jobs' processors
//! free — at the earliest step where it fits there, `t*`. Before `t*` it could not start even
//! if the obstacle went away; from `t*` on, the processors it takes there must stay
//! available to it, for as long as the obstacle may last (forever):
//!
//! - EASY: the head's shadow time is infinite, so no job "ends before the shadow"; every
//!   later job must fit in the extra processors, the relaxed free processors at `t*` minus
//!   the head's reservation (see [`easy`]).
//! - Conservative: the job holds, from `t*` on and without end, its relaxed placement minus
//!   the local processors (which it will get when the local jobs leave), per site (see
//!   [`conservative`]).
//!
//! A job that does not fit even in the relaxed profile's last step (the sites shrank since
//! it was accepted) can be delayed by nobody and reserves nothing; EASY passes over it and
//! takes the next job that does not fit as the head.
//!
//! # Determinism
//!
//! Arrival order is a sequence number in a `BTreeMap`; running jobs are ordered by estimated
//! end, then job number; profiles are `BTreeMap`s of per-site vectors. No hashing.

pub mod conservative;
pub mod easy;
pub mod profile;

pub use conservative::Conservative;
pub use easy::{head_reservation, Easy, HeadReservation};
pub use profile::{Profile, Step};

pub(crate) use super::Arrivals;
use super::PassCtx;
use crate::model::Job;
use crate::placement::PerSite;
use crate::scheduler::api::{JobId, SiteId};

/// Processors per site that a placement (`(site, processors)` per component) takes.
pub fn need_of(placement: &[(SiteId, u32)], sites: usize) -> PerSite<u32> {
    let mut need: PerSite<u32> = smallvec::smallvec![0u32; sites];
    for &(site, n) in placement {
        if let Some(x) = need.get_mut(site) {
            *x += n;
        }
    }
    need
}

/// Whether `need` fits within `cap` on every site.
fn within(need: &[u32], cap: &[u32]) -> bool {
    need.iter().zip(cap).all(|(n, c)| n <= c)
}

/// What a job needs at least: the quick rejects before a dry-run placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Demand {
    /// Processors in all.
    pub total: u64,
    /// Processors that one site must have: the largest component, or a flexible job's
    /// smallest piece.
    pub largest: u32,
    /// The job's own estimate ([`Job::own_estimate`]), kept here so that a backfilling pass
    /// does not look the job up for it (about a million lookups in a replay of SDSC-BLUE,
    /// each a miss of the cache). Not in a snapshot (its form stays as it was): `None`
    /// after a restart, and `None` when the job has none; then [`PassCtx::estimate`].
    #[serde(skip)]
    pub estimate: Option<std::num::NonZeroI64>,
}

impl Demand {
    pub fn of(job: &Job) -> Demand {
        let largest = match job.flexible() {
            Some(f) => f.min_component.unwrap_or(1).min(f.total),
            None => job.components.iter().map(|c| c.count).max().unwrap_or(0),
        };
        Demand {
            total: job.total_processors(),
            largest,
            estimate: job.own_estimate().and_then(std::num::NonZeroI64::new),
        }
    }

    /// The job's estimate: its own, else what the scheduler estimates ([`PassCtx::estimate`]).
    pub fn estimate(&self, ctx: &dyn PassCtx, id: JobId) -> crate::model::Millis {
        self.estimate
            .map_or_else(|| ctx.estimate(id), std::num::NonZeroI64::get)
    }

    /// Whether a step's usable sites may hold the job.
    pub fn may_fit(&self, step: &Step) -> bool {
        self.may_fit_stats((step.usable_total, step.usable_max))
    }

    /// Whether usable sites with these [`usable_stats`] may hold the job.
    pub fn may_fit_stats(&self, (total, max): (u64, u32)) -> bool {
        total >= self.total && max >= self.largest
    }

    /// Whether these free processors on the usable sites may hold the job (`O(S)`).
    pub fn may_fit_in(&self, free: &[u32], usable: &[bool]) -> bool {
        self.may_fit_stats(usable_stats(free, usable))
    }
}

/// The sum of and the most processors on the usable sites.
pub fn usable_stats(free: &[u32], usable: &[bool]) -> (u64, u32) {
    usable_stats_of(free.iter().copied().zip(usable.iter().copied()))
}

/// [`usable_stats`] of `(free, usable)` per site, for a caller that has no vectors of them.
pub fn usable_stats_of(sites: impl Iterator<Item = (u32, bool)>) -> (u64, u32) {
    sites
        .filter(|&(_, u)| u)
        .fold((0, 0), |(sum, max), (f, _)| {
            (sum + u64::from(f), max.max(f))
        })
}

/// `a - b` per site, never below zero.
fn minus(a: &[u32], b: &[u32]) -> PerSite<u32> {
    a.iter().zip(b).map(|(x, y)| x.saturating_sub(*y)).collect()
}

/// The smaller of `a` and `b` per site.
fn min_of(a: &[u32], b: &[u32]) -> PerSite<u32> {
    a.iter().zip(b).map(|(x, y)| *x.min(y)).collect()
}

/// Start job `id` now if the scheduler's placement takes at most `cap[s]` processors on every
/// site `s` (see the module documentation: the unrestricted placement first, then one
/// restricted to the sites of a dry run against `min(idle, cap)`). `idle` and `usable` are
/// the scheduler's now. Returns the processors per site the job took.
pub fn start_within(
    ctx: &mut dyn PassCtx,
    id: JobId,
    idle: &[u32],
    usable: &[bool],
    cap: &[u32],
) -> Option<PerSite<u32>> {
    let sites = idle.len();
    let placed = ctx.place_on(id, idle, usable)?;
    let need = need_of(&placed, sites);
    if within(&need, cap) {
        return ctx.start_placed(id, None, &placed).then_some(need);
    }
    let bounded = min_of(idle, cap);
    let dry = ctx.place_on(id, &bounded, usable)?;
    let mut allowed: PerSite<bool> = smallvec::smallvec![false; sites];
    for &(site, _) in &dry {
        if let Some(a) = allowed.get_mut(site) {
            *a = true;
        }
    }
    let restricted: PerSite<bool> = usable.iter().zip(&allowed).map(|(u, a)| *u && *a).collect();
    let placed = ctx.place_on(id, idle, &restricted)?;
    let need = need_of(&placed, sites);
    if within(&need, cap) {
        return ctx
            .start_placed(id, Some(&allowed), &placed)
            .then_some(need);
    }
    None
}

/// Free processors per site as if local jobs were gone: what a job that fits at no time of
/// the profile is checked against (with every site usable).
fn relaxed(free: &[u32], local: &[u32]) -> PerSite<u32> {
    free.iter()
        .zip(local)
        .map(|(f, l)| f.saturating_add(*l))
        .collect()
}
