//! EASY backfilling (seed 003 §3.2.2): "the execution of the first job will not be delayed
//! by the backfilled job".
//!
//! A pass:
//!
//! 1. In arrival order, start jobs while they fit (as FCFS). The first job that does not fit
//!    is the *head*. If no processor is idle then, the pass ends (nothing could backfill).
//! 2. The head's *shadow time*: walk the steps of the running jobs' profile (those of
//!    [`Profile`](super::Profile), without building it) — by estimated end, ties by job
//!    number, jobs that end together at once, a job past its estimate at now — adding their
//!    processors back, until [`PassCtx::place_on`] places the head on the free processors
//!    of that step. That step's time is the shadow time; that placement is the head's
//!    reservation (processors per site at the shadow time), and the *extra* processors are
//!    the free ones at the shadow time minus the reservation, per site. This is computed
//!    once per pass (and kept for the next pass when that would find the same; see below).
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
//! # Passes that only add jobs
//!
//! Most passes of a busy queue follow an arrival and nothing else: the same jobs run, the
//! sites hold the same idle processors, the head is the same. Such a pass would build the
//! same profile and find the same reservation (a step before the reservation's time that
//! `now` has passed merges into `now` with a free count the head did not fit in), and every
//! job it already looked at would be refused again (it sees no more idle or extra
//! processors than it did, and a later `now` makes no job shorter; placement is taken to
//! need no fewer processors when it has fewer, as [FCFS](crate::queue::fcfs) takes it). So a
//! pass keeps its reservation and where the queue ended, and the next pass, when it sees the
//! same epoch, [`PassCtx::running_version`], idle, usable and local processors, the same
//! head still queued, and comes no later than the reservation's time, only looks at the jobs
//! that arrived since. A pass in which a job backfilled keeps nothing: onto extra processors,
//! a fresh reservation may then put the head elsewhere on several sites; onto idle ones, a
//! job refused before that start may fit after it (the scheduler places a job on the idle
//! processors it sees, and fewer of them on one site may move it to sites within the extra
//! ones).
//!
//! # Complexity
//!
//! With `Q` queued jobs, `R` running jobs and `S` sites, a pass walks the running jobs in
//! order of estimated end from the index the scheduler keeps
//! ([`PassCtx::running_by_end`]), only as far as the step where the head fits (`O(k·S)` for
//! the `k` jobs that end by then, plus `O(log R)` to start), computing the shadow once (again
//! only after passing over a head that fits nowhere): at most one dry-run placement per
//! distinct end, after an `O(1)` reject on the step's total and largest free site. It then
//! looks at every later job once: an `O(1)` reject when the job needs more processors, or a
//! larger component, than the idle ones (or the idle extra ones, for a long job) offer (the
//! queue keeps each job's [`Demand`], so the reject reads no job record), else one to three
//! dry-run placements. The idle and extra vectors are re-read only after a start. So
//! `O(Q + k·(S + P))` plus `P` per job tried, for a placement cost `P` (about `S log S`),
//! with no work quadratic in `Q`.

use super::profile::walk_steps;
use super::{
    minus, need_of, relaxed, start_within, usable_stats, usable_stats_of, Arrivals, Demand,
};
use crate::model::{Job, Time};
use crate::placement::PerSite;
use crate::queue::{sites_now, PassCtx, QueuePolicy, SiteNow};
use crate::scheduler::api::JobId;

/// EASY backfilling. See the module documentation.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Easy {
    /// The queue, with each job's demand.
    queue: Arrivals<Demand>,
    /// The last pass's head reservation, while the next pass would find the same.
    carry: Option<Carry>,
    /// Never carry (see [`Easy::without_carry`]).
    no_carry: bool,
}

impl Easy {
    pub fn new() -> Easy {
        Easy::default()
    }

    /// EASY that computes every pass from scratch: the reference the carried passes are
    /// tested against (`tests/backfill_carry.rs`).
    pub fn without_carry() -> Easy {
        Easy {
            no_carry: true,
            ..Easy::default()
        }
    }
}

/// What the head of the queue holds during a pass.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum HeadReservation {
    /// The head can start at `shadow` on `reserved` processors per site; `extra` are the
    /// processors free at `shadow` beyond them.
    At {
        shadow: Time,
        reserved: PerSite<u32>,
        extra: PerSite<u32>,
    },
    /// The head fits at no time of the profile (infinite shadow). It reserves `reserved` at
    /// `relaxed_at`, the first step of the relaxed profile where it fits; `extra` is what that
    /// step has beyond it.
    Never {
        relaxed_at: Time,
        reserved: PerSite<u32>,
        extra: PerSite<u32>,
    },
    /// The head does not fit even in the relaxed profile: it reserves nothing.
    Hopeless,
}

/// The head's shadow time and reservation (see the module documentation).
pub fn head_reservation(ctx: &dyn PassCtx, head: JobId) -> HeadReservation {
    let now = ctx.now();
    let (mut idle, mut usable) = (PerSite::new(), PerSite::new());
    read_sites(ctx, &mut idle, &mut usable);
    // The steps of the pass's profile, walked without building it.
    let demand = Demand::of(ctx.job(head));
    let sites = usable.len();
    let at = walk_steps(now, &idle, ctx, demand.total, |t, free| {
        if !demand.may_fit_stats(usable_stats(free, &usable)) {
            return None;
        }
        let reserved = need_of(&ctx.place_on(head, free, &usable)?, sites);
        let extra = minus(free, &reserved);
        Some(HeadReservation::At {
            shadow: t,
            reserved,
            extra,
        })
    });
    if let Some(at) = at {
        return at;
    }
    let local = ctx.local_busy();
    let local_total: u64 = local.iter().map(|&l| u64::from(l)).sum();
    let all: PerSite<bool> = smallvec::smallvec![true; sites];
    let need = demand.total.saturating_sub(local_total);
    let never = walk_steps(now, &idle, ctx, need, |t, free| {
        let total: u64 = free.iter().map(|&f| u64::from(f)).sum();
        if total + local_total < demand.total {
            return None;
        }
        let avail = relaxed(free, &local);
        let reserved = need_of(&ctx.place_on(head, &avail, &all)?, sites);
        let extra = minus(&avail, &reserved);
        Some(HeadReservation::Never {
            relaxed_at: t,
            reserved,
            extra,
        })
    });
    never.unwrap_or(HeadReservation::Hopeless)
}

impl QueuePolicy for Easy {
    fn saved(&self) -> Option<crate::queue::saved::SavedRef<'_>> {
        Some(crate::queue::saved::SavedRef::Easy(self))
    }

    fn name(&self) -> &'static str {
        "easy"
    }

    fn push(&mut self, id: JobId, job: &Job, _now: Time) {
        self.queue.push_with(id, Demand::of(job));
    }

    fn reserve(&mut self, jobs: usize) {
        self.queue.reserve(jobs);
    }

    fn edited(&mut self, id: JobId, job: &Job) {
        if let Some(d) = self.queue.payload_mut(id) {
            *d = Demand::of(job);
        }
    }

    fn remove(&mut self, id: JobId) {
        self.queue.remove(id);
    }

    fn len(&self) -> usize {
        self.queue.len()
    }

    fn pass(&mut self, ctx: &mut dyn PassCtx) {
        // Looked at in place: a carry is large, and most passes that have one use it.
        if self
            .carry
            .as_ref()
            .is_some_and(|c| c.holds(ctx, &self.queue))
        {
            let carry = self.carry.take().expect("just looked at");
            // Only jobs arrived since: the ones before them would decide as they did.
            self.backfill(ctx, carry.cursor, carry.reservation);
        } else {
            self.carry = None;
            self.full_pass(ctx);
        }
    }
}

impl Easy {
    /// A pass that computes the head's reservation afresh, over the whole queue. The queue
    /// is walked in arrival order by sequence number (a pass only takes jobs out of it).
    fn full_pass(&mut self, ctx: &mut dyn PassCtx) {
        let mut seq = 0;
        // 1. FCFS until the head.
        let reservation = loop {
            let Some((s, id, _)) = self.queue.first_with(seq) else {
                return;
            };
            seq = s + 1;
            if ctx.try_start(id, None) {
                self.queue.remove(id);
                continue;
            }
            if usable_stats_of(sites_now(ctx).map(|s| (s.idle, s.usable))).0 == 0 {
                // Nothing is idle: nothing to backfill, no need for a shadow.
                return;
            }
            let (shadow, until, extra) = match head_reservation(ctx, id) {
                HeadReservation::At { shadow, extra, .. } => (Some(shadow), shadow, extra),
                HeadReservation::Never {
                    relaxed_at, extra, ..
                } => (None, relaxed_at, extra),
                HeadReservation::Hopeless => continue,
            };
            break Reservation {
                head: id,
                shadow,
                until,
                extra,
            };
        };
        // 2. Backfill the later jobs.
        self.backfill(ctx, seq, reservation);
    }

    /// Step 2 of a pass: start the queued jobs from sequence number `from` on (in arrival
    /// order) that backfill under the head's reservation; then carry the reservation to the
    /// next pass if no job backfilled (a new [`head_reservation`] would find the same, and
    /// every job looked at was refused with the idle processors the next pass sees).
    fn backfill(&mut self, ctx: &mut dyn PassCtx, from: u64, mut r: Reservation) {
        let now = ctx.now();
        let (mut idle, mut usable) = (PerSite::new(), PerSite::new());
        read_sites(ctx, &mut idle, &mut usable);
        let mut untouched = true;
        // The sum and the most on one site, of the idle processors and of the idle extra ones.
        let mut room = usable_stats(&idle, &usable);
        let mut extra_room = extra_stats(&idle, &r.extra, &usable);
        // By position: a start takes the job at `at` out, and the next one moves up to `at`.
        let mut at = self.queue.position_from(from);
        while let Some((_, id, &demand)) = self.queue.at(at) {
            at += 1;
            if room.0 == 0 {
                break;
            }
            if !demand.may_fit_stats(room) {
                continue;
            }
            let short = r
                .shadow
                .is_some_and(|s| now.saturating_add(demand.estimate(ctx, id)) <= s);
            let started = if short {
                start_within(ctx, id, &idle, &usable, &idle)
            } else if !demand.may_fit_stats(extra_room) {
                None
            } else {
                start_within(ctx, id, &idle, &usable, &r.extra)
            };
            let Some(took) = started else {
                continue;
            };
            self.queue.remove(id);
            at -= 1;
            untouched = false;
            if !short {
                r.extra = minus(&r.extra, &took);
            }
            read_sites(ctx, &mut idle, &mut usable);
            room = usable_stats(&idle, &usable);
            extra_room = extra_stats(&idle, &r.extra, &usable);
        }
        self.carry = (untouched && !self.no_carry).then(|| Carry {
            seen: Seen::now(ctx),
            reservation: r,
            cursor: self.queue.next_seq(),
        });
    }
}

/// The head's reservation during a pass.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Reservation {
    head: JobId,
    /// The shadow time (`None`: the head fits at no time).
    shadow: Option<Time>,
    /// The reservation's time: the shadow time, or the relaxed step of a head that fits at
    /// no time.
    until: Time,
    /// The extra processors per site, less what backfilled jobs took.
    extra: PerSite<u32>,
}

/// Idle processors and usability of every site now, into `idle` and `usable` (cleared
/// first): [`PassCtx::idle`] and [`PassCtx::usable`] without allocating.
fn read_sites(ctx: &dyn PassCtx, idle: &mut PerSite<u32>, usable: &mut PerSite<bool>) {
    idle.clear();
    usable.clear();
    for s in sites_now(ctx) {
        idle.push(s.idle);
        usable.push(s.usable);
    }
}

/// [`usable_stats`] of the idle extra processors, `min(idle, extra)` per site.
fn extra_stats(idle: &[u32], extra: &[u32], usable: &[bool]) -> (u64, u32) {
    usable_stats_of(
        idle.iter()
            .zip(extra)
            .map(|(&i, &e)| i.min(e))
            .zip(usable.iter().copied()),
    )
}

/// What a pass saw of everything but the queue: a later pass that sees the same (and comes
/// no later than the reservation's time) would build the same profile.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Seen {
    epoch: u64,
    running: u64,
    /// Idle, usable and local processors per site.
    sites: PerSite<SiteNow>,
}

impl Seen {
    fn now(ctx: &dyn PassCtx) -> Seen {
        Seen {
            epoch: ctx.epoch(),
            running: ctx.running_version(),
            sites: sites_now(ctx).collect(),
        }
    }

    /// Whether a pass now would see the same (without copying what it sees).
    fn still(&self, ctx: &dyn PassCtx) -> bool {
        self.epoch == ctx.epoch()
            && self.running == ctx.running_version()
            && sites_now(ctx).eq(self.sites.iter().copied())
    }
}

/// The head's reservation, carried from one pass to the next (see "Passes that only add
/// jobs" in the module documentation).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Carry {
    seen: Seen,
    reservation: Reservation,
    /// Every job that arrived before this sequence number was looked at.
    cursor: u64,
}

impl Carry {
    fn holds(&self, ctx: &dyn PassCtx, queue: &Arrivals<Demand>) -> bool {
        ctx.now() <= self.reservation.until
            && queue.contains(self.reservation.head)
            && self.seen.still(ctx)
    }
}
