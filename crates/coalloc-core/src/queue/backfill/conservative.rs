//! Conservative backfilling (seed 003 §3.2.2): "not only the execution of the first job, but
//! also the execution of every job that has arrived prior to the backfilled job must not be
//! delayed".
//!
//! A pass builds the [`Profile`] of the running jobs and gives every queued job, in arrival
//! order, a reservation in it: the earliest step time `t` (now, or a time at which the
//! profile changes) at which the job, placed with [`PassCtx::place_on`] on the fewest free
//! processors per site over `[t, t + estimate)`, fits. The reservation takes those
//! processors off the profile over that interval, so a later job can only use what every
//! earlier job leaves. When `t` is now the job starts now, provided the scheduler's
//! placement stays within that minimum ([`start_within`]); otherwise (its placement now
//! would take processors reserved for later, or processors of a running job past its
//! estimate) it keeps the reservation at now and waits for the next pass.
//!
//! Start times are skipped without a dry run when a quick reject ([`Demand`]: processors in
//! all, processors on the largest site) refuses a step of the window, or the window's
//! minimum, or when the window's minimum is nowhere above the last minimum the dry run
//! failed on (placement is taken to need no fewer processors anywhere when it has fewer;
//! should a fit break that, a reservation only comes later than it could, which delays
//! nobody else).
//!
//! A job that fits at no step (it needs an unusable site, or processors local jobs hold) is
//! placed the same way in the *relaxed* profile (every site usable, local jobs' processors
//! free), at the earliest step `t*` where it fits over its window, and holds from `t*` on,
//! without end, that placement minus the local processors per site (see [the backfill
//! module](super#a-job-that-fits-at-no-time)). A job that fits not even there reserves
//! nothing.
//!
//! The pass ends early once the idle processors cannot hold the smallest of the jobs still
//! to go (by the quick reject): no later job could start now, and reservations only matter
//! to later jobs.
//!
//! The first job behaves as FCFS's head: nothing is reserved before it, and the profile
//! only grows after now, so it starts whenever it fits now.
//!
//! # Complexity
//!
//! With `Q` queued jobs, `R` running jobs and `S` sites the profile has `B <= R + 2Q + 1`
//! steps. Each job slides a window over the steps from now until it finds its reservation
//! ([`super::profile::Windows`]: each step enters and leaves the window once, `O(S)`), with
//! at most one dry-run placement (cost `P`) per start time: `O(B·(S + P))` per job and
//! `O(Q·B·(S + P))`, quadratic in `Q`, per pass in the worst case, plus `O(S)` per step of
//! every reservation. That is the price of a reservation per job; EASY ([`super::Easy`]) is
//! linear in `Q`. Measured (release build, 100 sites of 64 processors, 200 running jobs,
//! random 1–4 component jobs): a pass over 2,000 queued jobs takes about 0.35 s, over 10,000
//! about 2 s.

use super::{minus, need_of, relaxed, start_within, within, Arrivals, Demand, Profile, Step};
use crate::model::{Job, Time};
use crate::placement::PerSite;
use crate::queue::{PassCtx, QueuePolicy};
use crate::scheduler::api::JobId;

/// Conservative backfilling. See the module documentation.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Conservative {
    queue: Arrivals,
}

impl Conservative {
    pub fn new() -> Conservative {
        Conservative::default()
    }
}

impl QueuePolicy for Conservative {
    fn saved(&self) -> Option<crate::queue::saved::SavedRef<'_>> {
        Some(crate::queue::saved::SavedRef::Conservative(self))
    }

    fn name(&self) -> &'static str {
        "conservative"
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
        let now = ctx.now();
        let usable = ctx.usable();
        let mut idle = ctx.idle();
        let order = self.queue.snapshot();
        let demands: Vec<Demand> = order.iter().map(|&id| Demand::of(ctx.job(id))).collect();
        // The least any job from here on needs: once the idle processors offer less, no
        // later job can start now and the pass is over.
        let mut least = demands.clone();
        for i in (1..least.len()).rev() {
            least[i - 1].total = least[i - 1].total.min(least[i].total);
            least[i - 1].largest = least[i - 1].largest.min(least[i].largest);
        }
        if !least.first().is_some_and(|l| l.may_fit_in(&idle, &usable)) {
            return;
        }
        let mut profile = Profile::new(now, idle.clone(), &usable, &ctx.running());
        let sites = usable.len();
        let mut local: Option<Vec<u32>> = None;
        for ((&id, &demand), least) in order.iter().zip(&demands).zip(&least) {
            if !least.may_fit_in(&idle, &usable) {
                return;
            }
            let estimate = ctx.estimate(id).max(1);
            // The reservation: its start, the processors per site, whether it started now.
            let mut found: Option<(Time, PerSite<u32>, bool)> = None;
            // The last window minimum the dry run did not fit in.
            let mut failed: Option<Vec<u32>> = None;
            for (t, cap) in profile.windows(now, estimate, |s| demand.may_fit(s)) {
                if !demand.may_fit_in(&cap, &usable)
                    || failed.as_ref().is_some_and(|f| within(&cap, f))
                {
                    continue;
                }
                if t == now {
                    if let Some(took) = start_within(ctx, id, &idle, &usable, &cap) {
                        found = Some((t, took, true));
                        break;
                    }
                }
                if let Some(p) = ctx.place_on(id, &cap, &usable) {
                    found = Some((t, need_of(&p, sites), false));
                    break;
                }
                failed = Some(cap);
            }
            if let Some((t, need, started)) = &found {
                profile.reserve(*t, Some(t.saturating_add(estimate)), need);
                if *started {
                    self.queue.remove(id);
                    idle = ctx.idle();
                }
                continue;
            }
            let local = local.get_or_insert_with(|| ctx.local_busy());
            if let Some((t, need)) = relaxed_reservation(ctx, &profile, id, local) {
                profile.reserve(t, None, &minus(&need, local));
            }
        }
    }
}

/// Where a job that fits at no step of the profile would go in the relaxed profile (every
/// site usable, `local` processors free): the earliest step and the processors per site.
fn relaxed_reservation(
    ctx: &dyn PassCtx,
    profile: &Profile,
    id: JobId,
    local: &[u32],
) -> Option<(Time, PerSite<u32>)> {
    let all = vec![true; local.len()];
    let local_total: u64 = local.iter().map(|&l| u64::from(l)).sum();
    let total = ctx.job(id).total_processors();
    let estimate = ctx.estimate(id).max(1);
    let fits = |s: &Step| s.total + local_total >= total;
    for (t, min) in profile.windows(ctx.now(), estimate, fits) {
        if let Some(p) = ctx.place_on(id, &relaxed(&min, local), &all) {
            return Some((t, need_of(&p, all.len())));
        }
    }
    None
}
