//! EASY backfilling (seed 003 §3.2.2): "the execution of the first job will not be delayed
//! by the backfilled job".
//!
//! A pass:
//!
//! 1. In arrival order, start jobs while they fit (as FCFS). The first job that does not fit
//!    is the *head*. If no processor is idle then, the pass ends (nothing could backfill).
//! 2. The head's *shadow time*: walk the [`Profile`] of the running jobs — by estimated end,
//!    ties by job number, jobs that end together at once, a job past its estimate at now —
//!    adding their processors back, until [`PassCtx::place_on`] places the head on the free
//!    processors of that step. That step's time is the shadow time; that placement is the
//!    head's reservation (processors per site at the shadow time), and the *extra*
//!    processors are the free ones at the shadow time minus the reservation, per site. This
//!    is computed once per pass.
//! 3. Every later job, in arrival order, starts now if it fits now and either
//!    - it ends by the shadow time (now + estimate <= shadow), on any idle processors, or
//!    - on every site it takes no more than the extra processors there ([`start_within`]);
//!      the extra processors then shrink by what it took.
//!
//! If the head fits at no step (it needs an unusable site, or processors local jobs hold),
//! the shadow time is infinite: no job ends before it, so only the second rule applies. The
//! reservation is then the head's placement at the first step of the *relaxed* profile
//! (every site usable, local jobs' processors free) where it fits, and the extra processors
//! are the relaxed free processors of that step minus the reservation (see [the backfill
//! module](super#a-job-that-fits-at-no-time)). A job then backfills only onto processors the
//! head would not need, however short it is. A head that does not fit even in the relaxed
//! profile is passed over.
//!
//! This is textbook EASY: the reservation is protected by both rules (unlike AccaSim's
//! backfilling, which does not protect it).
//!
//! # Complexity
//!
//! With `Q` queued jobs, `R` running jobs and `S` sites, a pass builds one profile
//! (`O(R log R + R·S)`) and computes the shadow once (again only after passing over a head
//! that fits nowhere): at most one dry-run placement per distinct end, after an `O(1)`
//! reject on the step's total and largest free site. It then looks at every later job once:
//! an `O(1)` reject when the job needs more processors, or a larger component, than the idle
//! ones (or the idle extra ones, for a long job) offer, else one to three dry-run
//! placements. The idle and extra vectors are re-read only after a start. So
//! `O(Q·P + R·(S + P))` for a placement cost `P` (about `S log S`), with no work quadratic
//! in `Q`.

use super::{
    min_of, minus, need_of, relaxed, start_within, usable_stats, Arrivals, Demand, Profile,
};
use crate::model::{Job, Time};
use crate::queue::{PassCtx, QueuePolicy};
use crate::scheduler::api::JobId;

/// EASY backfilling. See the module documentation.
#[derive(Debug, Default)]
pub struct Easy {
    queue: Arrivals,
}

impl Easy {
    pub fn new() -> Easy {
        Easy::default()
    }
}

/// What the head of the queue holds during a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadReservation {
    /// The head can start at `shadow` on `reserved` processors per site; `extra` are the
    /// processors free at `shadow` beyond them.
    At {
        shadow: Time,
        reserved: Vec<u32>,
        extra: Vec<u32>,
    },
    /// The head fits at no time of the profile (infinite shadow). It reserves `reserved` at
    /// `relaxed_at`, the first step of the relaxed profile where it fits; `extra` is what that
    /// step has beyond it.
    Never {
        relaxed_at: Time,
        reserved: Vec<u32>,
        extra: Vec<u32>,
    },
    /// The head does not fit even in the relaxed profile: it reserves nothing.
    Hopeless,
}

/// The head's shadow time and reservation (see the module documentation).
pub fn head_reservation(ctx: &dyn PassCtx, head: JobId) -> HeadReservation {
    let now = ctx.now();
    let usable = ctx.usable();
    let profile = Profile::new(now, ctx.idle(), &usable, &ctx.running());
    let demand = Demand::of(ctx.job(head));
    let sites = usable.len();
    for (t, step) in profile.steps_from(now) {
        if !demand.may_fit(step) {
            continue;
        }
        if let Some(p) = ctx.place_on(head, &step.free, &usable) {
            let reserved = need_of(&p, sites);
            let extra = minus(&step.free, &reserved);
            return HeadReservation::At {
                shadow: t,
                reserved,
                extra,
            };
        }
    }
    let local = ctx.local_busy();
    let local_total: u64 = local.iter().map(|&l| u64::from(l)).sum();
    let all = vec![true; sites];
    for (t, step) in profile.steps_from(now) {
        if step.total + local_total < demand.total {
            continue;
        }
        let avail = relaxed(&step.free, &local);
        if let Some(p) = ctx.place_on(head, &avail, &all) {
            let reserved = need_of(&p, sites);
            let extra = minus(&avail, &reserved);
            return HeadReservation::Never {
                relaxed_at: t,
                reserved,
                extra,
            };
        }
    }
    HeadReservation::Hopeless
}

impl QueuePolicy for Easy {
    fn name(&self) -> &'static str {
        "easy"
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
        let order = self.queue.snapshot();
        let mut rest = order.into_iter();
        // 1. FCFS until the head.
        let (shadow, mut extra) = loop {
            let Some(id) = rest.next() else {
                return;
            };
            if ctx.try_start(id, None) {
                self.queue.remove(id);
                continue;
            }
            if usable_stats(&ctx.idle(), &ctx.usable()).0 == 0 {
                // Nothing is idle: nothing to backfill, no need for a shadow.
                return;
            }
            match head_reservation(ctx, id) {
                HeadReservation::At { shadow, extra, .. } => break (Some(shadow), extra),
                HeadReservation::Never { extra, .. } => break (None, extra),
                HeadReservation::Hopeless => continue,
            }
        };
        // 2. Backfill the later jobs.
        let now = ctx.now();
        let usable = ctx.usable();
        let mut idle = ctx.idle();
        // The sum and the most on one site, of the idle processors and of the idle extra ones.
        let mut room = usable_stats(&idle, &usable);
        let mut extra_room = usable_stats(&min_of(&idle, &extra), &usable);
        for id in rest {
            if room.0 == 0 {
                break;
            }
            let demand = Demand::of(ctx.job(id));
            if !demand.may_fit_stats(room) {
                continue;
            }
            let short = shadow.is_some_and(|s| now.saturating_add(ctx.estimate(id)) <= s);
            let started = if short {
                start_within(ctx, id, &idle, &usable, &idle)
            } else if !demand.may_fit_stats(extra_room) {
                None
            } else {
                start_within(ctx, id, &idle, &usable, &extra)
            };
            let Some(took) = started else {
                continue;
            };
            self.queue.remove(id);
            if !short {
                extra = minus(&extra, &took);
            }
            idle = ctx.idle();
            room = usable_stats(&idle, &usable);
            extra_room = usable_stats(&min_of(&idle, &extra), &usable);
        }
    }
}
