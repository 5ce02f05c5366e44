//! KOALA-C's traditional policies for one set of sites (seed 004 §IV-A): First-Fit (FF),
//! Round-Robin (RR), Shortest-Job-First (SJF) with runtime predictions, SJF-ideal with exact
//! runtimes, and Highest-SlowDown-First (HSDF).
//!
//! Seed 004 §IV-A: "Arriving jobs are entered into a global queue, and periodically (every
//! 30 seconds in our experiments) the selected scheduling policy is invoked. On each site,
//! jobs run to completion without preemption of any form." All five policies here keep one
//! queue, try only its head, and end the pass at the first job that cannot start (no
//! skipping: FF and RR are FCFS, §IV-A 1–2, and SJF and HSDF are read the same way, a
//! priority order instead of arrival order). Every start uses the placement module through
//! [`PassCtx::start_with`], so jobs of every kind work, not only the one-site jobs of
//! seed 004 (§II-A, our [`JobKind::Total`](crate::model::JobKind::Total)).
//!
//! - **FF** (§IV-A 1): FCFS; the head goes to "the first site in which it fits" —
//!   [`Fit::First`], the site-list order being §IV-A's "ordered in some arbitrary way".
//! - **RR** (§IV-A 2): FCFS; sites are tried "in a cyclical fashion", starting after the
//!   site the previous job went to (a cursor; the first job tries site 0 first). The job is
//!   offered growing windows of sites in cyclic order — the next site alone, then the next
//!   two, and so on up to all sites — and starts first-fit in the first window that holds
//!   it. For a one-component job that is exactly "one site at a time, cyclically"; a
//!   multi-component (or flexible) job uses the shortest run of sites after the cursor that
//!   holds it, and an ordered job waits for the window to reach its named sites. The cursor
//!   then moves to the cyclically last site the job took processors on (read from the idle
//!   counts before and after the start). Windows other than the last (all sites) are
//!   checked with [`PassCtx::fits`] first, so a blocked head records one placement failure
//!   per pass, as under FCFS.
//! - **SJF** (§IV-A 3): the queue is ordered by predicted runtime, ties by arrival; the head
//!   starts first-fit. The prediction ([`RuntimePredictor`], seed 004 §III-B) is the mean of
//!   the user's last two finished runtimes, else the one, else the job's `runtime_estimate`,
//!   else [`KoalaCParams::default_runtime`]. It is made when the job enters the queue (the
//!   seed predicts "the runtime of a newly arrived job") and kept while it waits.
//! - **SJF-ideal** (§IV-A 3): "perfect prior knowledge of the job runtimes": ordered by the
//!   job's `runtime_estimate` taken as exact — the simulator puts the true runtime there —
//!   else the default. Runtimes of finished jobs are not used.
//! - **HSDF** (§IV-A 4): at every pass the queue is ordered by estimated slowdown
//!   `(wait + predicted runtime) / predicted runtime`, highest first, ties by arrival, with
//!   SJF's prediction and the wait estimate of [`crate::predictor`] (the time waited since
//!   submission); the head starts first-fit. The order is found at each pass without sorting
//!   the queue: each head in one look per predicted runtime (`koala_c::hsdf`).
//!
//! "Arrival" is entry into this queue: a job that comes back after an abort or a failure
//! after commit goes to the tail of its ties (as in [`super::fcfs`]) with a fresh prediction.
//!
//! # The period
//!
//! With [`KoalaCParams::period`] set, passes happen only at multiples of the period on the
//! driver's clock (30 s in the seed's experiments): a pass the scheduler asks for in between
//! does nothing, and while jobs wait the policy asks to be woken at the next multiple
//! ([`QueuePolicy::next_wakeup`]). Without it (the default) every scheduler pass is a
//! scheduling pass — the event-driven reading of "periodically".
//!
//! # Passes that cannot change anything
//!
//! FF, RR, SJF and SJF-ideal try the head only, in an order that depends on nothing but the
//! queue, so a pass that ended on a blocked head cannot start anything before a site gains
//! processors or becomes usable ([`PassCtx::epoch`]) or a job enters or leaves the queue:
//! until then passes are skipped (`Stall`) and the policy is [`QueuePolicy::blocked`], so
//! the scheduler stops waking it every period. A skipped pass tries nothing, so it counts
//! no placement try (as under FCFS).
//!
//! HSDF's order changes with the time, and its pass ends at once, trying nothing, when its
//! head was already tried at this epoch. A pass that ended on a blocked head `h` therefore
//! cannot start anything before the epoch changes, `h` leaves the queue, or another job
//! overtakes `h` in the order. Estimated slowdowns grow linearly with the time, so a job
//! that overtakes `h` stays before it, and the first time any queued job does can be
//! computed (`hsdf::Index::overtaken_at`); a job that enters the queue meanwhile brings
//! that time forward if it overtakes `h` sooner (a job that leaves may leave it early, which
//! costs one pass that finds `h` again). Until that time HSDF is blocked as the others are,
//! and the scheduler wakes it at the first multiple of the period at or after it
//! ([`QueuePolicy::unblocks_at`]) instead of at every multiple: the same passes try the same
//! jobs as a pass every period that orders the whole queue would (`tests/hsdf.rs`).

use super::{PassCtx, QueuePolicy, StartOptions};
use crate::model::{Job, Millis, Time, HOUR};
use crate::placement::Fit;
use crate::predictor::RuntimePredictor;
use crate::scheduler::api::{JobId, SiteId};
use std::collections::{BTreeMap, BTreeSet};

mod hsdf;
use hsdf::Row;

/// Parameters of FF, RR, SJF, SJF-ideal and HSDF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KoalaCParams {
    /// Schedule only at multiples of this period (seed 004 §IV-A: 30 s); `None` = at every
    /// scheduler pass. A period of 0 or less counts as `None`.
    pub period: Option<Millis>,
    /// The predicted runtime of a job with no history and no `runtime_estimate` (SJF, HSDF),
    /// and SJF-ideal's runtime of a job without a `runtime_estimate`.
    pub default_runtime: Millis,
}

impl Default for KoalaCParams {
    fn default() -> Self {
        KoalaCParams {
            period: None,
            default_runtime: HOUR,
        }
    }
}

/// Which of the five policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum Kind {
    Ff,
    Rr,
    Sjf,
    SjfIdeal,
    Hsdf,
}

/// One queued job.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Entry {
    /// The queue key: predicted (SJF) or exact (SJF-ideal) runtime, 0 otherwise.
    key: Millis,
    /// Arrival sequence.
    seq: u64,
    /// Predicted runtime (HSDF).
    predicted: Millis,
}

/// FF, RR, SJF, SJF-ideal and HSDF; see the module documentation.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct KoalaC {
    kind: Kind,
    params: KoalaCParams,
    period: Period,
    predictor: RuntimePredictor,
    /// (key, arrival) → job.
    queue: BTreeMap<(Millis, u64), JobId>,
    entries: BTreeMap<JobId, Entry>,
    next_seq: u64,
    /// RR: the site the previous job went to.
    cursor: Option<SiteId>,
    stall: Stall,
    /// HSDF: the jobs tried at this epoch that did not start.
    failed: (u64, BTreeSet<JobId>),
    /// HSDF: the queue with what its order needs, and the blocked head.
    #[serde(default)]
    hsdf: hsdf::Index,
}

impl KoalaC {
    fn new(kind: Kind, params: KoalaCParams) -> KoalaC {
        KoalaC {
            kind,
            params,
            period: Period::new(params.period),
            predictor: RuntimePredictor::new(),
            queue: BTreeMap::new(),
            entries: BTreeMap::new(),
            next_seq: 0,
            cursor: None,
            stall: Stall::default(),
            failed: (0, BTreeSet::new()),
            hsdf: hsdf::Index::default(),
        }
    }

    /// First-Fit (seed 004 §IV-A 1).
    pub fn ff(params: KoalaCParams) -> KoalaC {
        KoalaC::new(Kind::Ff, params)
    }

    /// Round-Robin (seed 004 §IV-A 2).
    pub fn rr(params: KoalaCParams) -> KoalaC {
        KoalaC::new(Kind::Rr, params)
    }

    /// Shortest-Job-First with runtime predictions (seed 004 §IV-A 3, §III-B).
    pub fn sjf(params: KoalaCParams) -> KoalaC {
        KoalaC::new(Kind::Sjf, params)
    }

    /// SJF with the exact runtimes in `runtime_estimate` (seed 004 §IV-A 3).
    pub fn sjf_ideal(params: KoalaCParams) -> KoalaC {
        KoalaC::new(Kind::SjfIdeal, params)
    }

    /// Highest-SlowDown-First (seed 004 §IV-A 4).
    pub fn hsdf(params: KoalaCParams) -> KoalaC {
        KoalaC::new(Kind::Hsdf, params)
    }

    /// The runtime predictor (what SJF and HSDF have learned).
    pub fn predictor(&self) -> &RuntimePredictor {
        &self.predictor
    }

    /// HSDF's pass (seed 004 §IV-A 4): the queue by estimated slowdown at this time (it
    /// depends on the time and the jobs' submission times), head by head, ending at once
    /// when the head was already tried at this epoch. A pass that ends on a blocked head
    /// holds the policy until a job overtakes that head (module documentation).
    fn pass_hsdf(&mut self, ctx: &mut dyn PassCtx) {
        let now = ctx.now();
        let epoch = ctx.epoch();
        if self.failed.0 != epoch {
            self.failed = (epoch, BTreeSet::new());
        }
        let Some(head) = self.hsdf.head(now) else {
            return;
        };
        if self.failed.1.contains(&head.id) {
            return self.hold_hsdf(head.id, now); // the head still does not fit
        }
        // Heads one at a time, the next found again after each start: most passes start
        // none or one, so a walk per start costs less than ordering the queue.
        let mut next = Some(head);
        while let Some(Row { id, .. }) = next {
            if !self.start(ctx, id) {
                let epoch = ctx.epoch();
                if self.failed.0 != epoch {
                    self.failed = (epoch, BTreeSet::new());
                }
                self.failed.1.insert(id);
                return self.hold_hsdf(id, now);
            }
            self.remove(id);
            next = self.hsdf.head(now);
        }
    }

    /// HSDF's pass ended at `now` on `head`, already tried at this epoch: passes are skipped
    /// until the epoch changes, `head` leaves, or a job overtakes it.
    fn hold_hsdf(&mut self, head: JobId, now: Time) {
        let Some(row) = self.hsdf.row(head) else {
            return;
        };
        let until = self.hsdf.overtaken_at(&row, now);
        self.stall.hold(self.failed.0, until);
        self.hsdf.held = Some(head);
    }

    /// HSDF, before a pass: rows for the jobs pushed since the last one; a held head may be
    /// overtaken sooner by one of them.
    fn sync_hsdf(&mut self, ctx: &dyn PassCtx) {
        let new = self.hsdf.sync(ctx, &self.entries);
        let held = self.hsdf.held.filter(|_| self.stall.blocked());
        if let Some(head) = held.and_then(|h| self.hsdf.row(h)) {
            let until = hsdf::Index::overtaken_by(&head, &new, ctx.now());
            self.stall.until_at_most(until);
        }
    }

    /// RR's start: growing windows of sites in cyclic order after the cursor.
    fn start_round_robin(&mut self, ctx: &mut dyn PassCtx, id: JobId) -> bool {
        let n = ctx.usable().len();
        if n == 0 {
            return false;
        }
        let first = self.cursor.map_or(0, |c| (c + 1) % n);
        let before = ctx.idle();
        let mut allowed = vec![false; n];
        for k in 0..n {
            allowed[(first + k) % n] = true;
            if k + 1 < n && !ctx.fits(id, Some(&allowed)) {
                continue;
            }
            let options = StartOptions {
                allowed: Some(allowed.clone()),
                fit: Some(Fit::First),
                ..StartOptions::default()
            };
            if ctx.start_with(id, &options) {
                let after = ctx.idle();
                let took = (0..=k)
                    .rev()
                    .map(|j| (first + j) % n)
                    .find(|&s| after.get(s) < before.get(s));
                self.cursor = Some(took.unwrap_or((first + k) % n));
                return true;
            }
        }
        false
    }

    fn start(&mut self, ctx: &mut dyn PassCtx, id: JobId) -> bool {
        match self.kind {
            Kind::Rr => self.start_round_robin(ctx, id),
            _ => ctx.start_with(
                id,
                &StartOptions {
                    fit: Some(Fit::First),
                    ..StartOptions::default()
                },
            ),
        }
    }
}

impl QueuePolicy for KoalaC {
    fn saved(&self) -> Option<crate::queue::saved::SavedRef<'_>> {
        Some(crate::queue::saved::SavedRef::KoalaC(self))
    }

    fn fit(&self) -> Option<Fit> {
        Some(Fit::First)
    }

    fn name(&self) -> &'static str {
        match self.kind {
            Kind::Ff => "ff",
            Kind::Rr => "rr",
            Kind::Sjf => "sjf",
            Kind::SjfIdeal => "sjf-ideal",
            Kind::Hsdf => "hsdf",
        }
    }

    fn push(&mut self, id: JobId, job: &Job, now: Time) {
        self.remove(id);
        self.failed.1.remove(&id);
        if self.kind == Kind::Hsdf {
            self.hsdf.push(id);
        }
        self.period.on_push(now, self.entries.is_empty());
        let default = self.params.default_runtime;
        let predicted = match self.kind {
            Kind::Ff | Kind::Rr => 0,
            Kind::Sjf | Kind::Hsdf => self.predictor.predict(job, default),
            Kind::SjfIdeal => job.runtime_estimate.unwrap_or(default),
        };
        let key = match self.kind {
            Kind::Sjf | Kind::SjfIdeal => predicted,
            _ => 0,
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.insert((key, seq), id);
        self.entries.insert(
            id,
            Entry {
                key,
                seq,
                predicted,
            },
        );
    }

    fn remove(&mut self, id: JobId) {
        // HSDF: a job other than the blocked head leaving does not let anything start.
        if self.kind != Kind::Hsdf || self.hsdf.held == Some(id) {
            self.stall.clear();
        }
        if self.kind == Kind::Hsdf {
            self.hsdf.remove(id);
        }
        if let Some(e) = self.entries.remove(&id) {
            self.queue.remove(&(e.key, e.seq));
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn pass(&mut self, ctx: &mut dyn PassCtx) {
        let (now, epoch) = (ctx.now(), ctx.epoch());
        if self.kind == Kind::Hsdf {
            self.sync_hsdf(ctx);
        }
        if self.entries.is_empty() || !self.stall.begin(epoch, now, &mut self.period) {
            return;
        }
        if self.kind == Kind::Hsdf {
            return self.pass_hsdf(ctx);
        }
        while let Some(&id) = self.queue.values().next() {
            if !self.start(ctx, id) {
                self.stall.blocked_at(epoch, ctx.epoch());
                return;
            }
            self.remove(id);
        }
    }

    fn next_wakeup(&self) -> Option<Time> {
        self.period.wakeup(!self.entries.is_empty())
    }

    fn blocked(&self) -> bool {
        // HSDF: a job pushed since the last pass may overtake the held head.
        self.stall.blocked() && self.hsdf.pending.is_empty()
    }

    fn unblocks_at(&self) -> Option<Time> {
        self.period.at_or_after(self.stall.until()?)
    }

    fn finished(&mut self, _id: JobId, job: &Job, runtime: Millis) {
        self.predictor.record(job.extra().user.as_deref(), runtime);
    }

    /// The queue in its order (HSDF's by arrival: its order depends on the time), any site.
    fn demand(&self, _sites: usize) -> Option<Vec<super::Demand>> {
        Some(self.queue.values().map(|&id| (id, None)).collect())
    }
}

/// Passes only at multiples of a period (seed 004 §IV-A's periodic invocation); see the
/// module documentation. Shared with [`super::tags`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Period {
    every: Option<Millis>,
    /// The next time a pass may run.
    due: Option<Time>,
}

impl Period {
    pub(crate) fn new(every: Option<Millis>) -> Period {
        Period {
            every: every.filter(|&p| p > 0),
            due: None,
        }
    }

    /// A job enters a queue that was empty (`was_empty`) or not: a due time left over from
    /// an idle spell moves to the next multiple, so that the job waits for it.
    pub(crate) fn on_push(&mut self, now: Time, was_empty: bool) {
        if let Some(p) = self.every {
            let stale = !matches!(self.due, Some(d) if d >= now);
            if was_empty && stale {
                self.due = Some(ceil_multiple(now, p));
            }
        }
    }

    /// Whether a pass at `now` may schedule; if so, the next one is due at the next multiple.
    pub(crate) fn begin(&mut self, now: Time) -> bool {
        let Some(p) = self.every else {
            return true;
        };
        let due = *self.due.get_or_insert(ceil_multiple(now, p));
        if now < due {
            return false;
        }
        self.due = Some((now.div_euclid(p) + 1) * p);
        true
    }

    /// When to be woken while jobs wait.
    pub(crate) fn wakeup(&self, waiting: bool) -> Option<Time> {
        if waiting && self.every.is_some() {
            self.due
        } else {
            None
        }
    }
}

impl Period {
    /// The first time at or after `t` at which a pass may run: the first multiple of the
    /// period (`None` without a period: passes come with events only).
    fn at_or_after(&self, t: Time) -> Option<Time> {
        self.every.map(|p| ceil_multiple(t, p))
    }

    /// Wakeups were skipped while the policy was blocked ([`Stall`]): a due time left
    /// behind moves to the first multiple at or after `now`, where the skipped passes would
    /// have put it.
    fn catch_up(&mut self, now: Time) {
        if let (Some(p), Some(due)) = (self.every, self.due) {
            if due < now {
                self.due = Some(ceil_multiple(now, p));
            }
        }
    }
}

/// Whether the last pass of a policy that tries heads only left every head blocked, with
/// nothing changed since: see "Passes that cannot change anything" in the module
/// documentation. Shared with [`super::tags`].
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Stall {
    /// The epoch at which the last pass ended with every head blocked.
    at: Option<u64>,
    /// HSDF: passes may start something again from this time on, though nothing changed
    /// (a job overtakes the blocked head); `None`: not before something changes.
    #[serde(default)]
    until: Option<Time>,
    /// Blocked since the last pass: the scheduler may have skipped the period's wakeups.
    parked: bool,
}

impl Stall {
    /// A job entered or left the queue: the next pass runs.
    pub(crate) fn clear(&mut self) {
        self.at = None;
        self.until = None;
    }

    /// Whether a pass at `now` may schedule: not while blocked at `epoch` (the period still
    /// moves on, as the skipped pass would have moved it), else as `period` says.
    pub(crate) fn begin(&mut self, epoch: u64, now: Time, period: &mut Period) -> bool {
        if self.at == Some(epoch) && self.until.is_none_or(|u| now < u) {
            period.begin(now);
            return false;
        }
        self.clear();
        if std::mem::take(&mut self.parked) {
            period.catch_up(now);
        }
        period.begin(now)
    }

    /// The pass that began at epoch `began` ended on a blocked head (every head, for a
    /// policy with several queues) at epoch `now`.
    pub(crate) fn blocked_at(&mut self, began: u64, now: u64) {
        if began == now {
            self.at = Some(now);
            self.parked = true;
        }
    }

    /// HSDF's pass ended at epoch `at` on a head already tried at that epoch, which no job
    /// overtakes before `until`.
    fn hold(&mut self, at: u64, until: Option<Time>) {
        self.at = Some(at);
        self.until = until;
        self.parked = true;
    }

    /// A job that entered the queue overtakes HSDF's blocked head at `until`, maybe sooner.
    fn until_at_most(&mut self, until: Option<Time>) {
        if let Some(t) = until {
            self.until = Some(self.until.map_or(t, |u| u.min(t)));
        }
    }

    /// When a hold ends by itself (HSDF).
    fn until(&self) -> Option<Time> {
        self.until.filter(|_| self.at.is_some())
    }

    pub(crate) fn blocked(&self) -> bool {
        self.at.is_some()
    }
}

/// The first multiple of `p` at or after `t`.
fn ceil_multiple(t: Time, p: Millis) -> Time {
    if t.rem_euclid(p) == 0 {
        t
    } else {
        (t.div_euclid(p) + 1) * p
    }
}
