//! The Repeated Placement Policy (RPP) for jobs with deadlines, with Wait-X and the GP / LP
//! priorities (seed 001 §2.2, "Scheduling Policies").
//!
//! A job with deadline `D` (its required start time, [`Job::deadline`]) submitted at `S` is
//! placed by repeated tries (seed 001 §2.2):
//!
//! ```text
//! PT0     = S   + Lp · (D − S)
//! PT(m+1) = PT(m) + Lp · (D − PT(m))
//! ```
//!
//! A successful try starts the job at once — "the processors allocated to the job are
//! claimed immediately" — with its barrier held until `D` ([`StartOptions::hold_until`]),
//! so it computes from its deadline on and the held processor-time is the seed's processor
//! wasted time ([`JobRecord::wasted`]). The job then leaves the queue.
//!
//! **Times and rounding.** Time is integer milliseconds. `S` is [`Job::submit`], else the
//! scheduler's submission time ([`JobRecord::submit`]). With `gap = D − T`:
//!
//! - `PT0 = S + clamp(round(Lp · (D − S)), 0, D − S)`;
//! - after a failed try at `T < D`, the next try is at `T + clamp(round(Lp · gap), 1, gap)`,
//!   so the sequence always advances by at least 1 ms (a step that rounds to 0 ms counts
//!   as 1 ms) and never passes `D`; when the next step would leave less than 1 ms, the try
//!   is at `D` itself, which is the last.
//!
//! `round` is `f64::round` (to nearest, halves away from zero) of `Lp · gap` computed in
//! `f64`. `T` is the time the try really happened: when the scheduler passes on time it is
//! `PT(m)`; after a late pass the sequence continues from the pass. With Lp = 0.7, S = 0 and
//! D = 1000 s the tries are at 700, 910, 973, 991.9, 997.57, 999.271, 999.781, 999.934,
//! 999.98, 999.994, 999.998, 999.999 and 1000 s.
//!
//! **Wait-X** (seed 001 §2.2: "the scheduler will simply ignore the job until T = D − I").
//! With an ignore time `I` no try happens before `D − I`: every try time is
//! `max(PT, D − I)`, so the first try is at `max(PT0, D − I)` and the sequence goes on from
//! there. `I = ∞` (`ignore: None`, Wait-∞) never ignores a job.
//!
//! **Mp.** The seed bounds `m`; here [`RppParams::mp`] is the number of tries (`PT0` …
//! `PT(Mp−1)`, the seed's `M` is `Mp − 1`). Only plain tries before the deadline count, and
//! the counter restarts when a job returns to the queue after an abort. Such a job is
//! planned again from the same `S`, so its first try is usually at once.
//!
//! **At the deadline** — the try at `D`, or the first pass after it — a plain try is made
//! first. If it fails:
//!
//! - GP ("when a global job has reached its deadline and not sufficient processors are idle,
//!   local jobs are killed"): one more try with [`StartOptions::kill_local`], which places as
//!   if local jobs' processors were free and makes the scheduler kill what it needs; if even
//!   that fails, the job fails with [`gp_failure`].
//! - LP ("when we cannot claim sufficient numbers of processors for a global multicomponent
//!   job, that job fails"): the job fails with [`lp_deadline_failure`].
//!
//! When Mp tries have failed before the deadline, LP fails the job at once
//! ([`lp_mp_failure`]); GP makes no more plain tries and waits for the deadline, where it
//! kills local jobs as above (the seed's GP kills only once a job "has reached its
//! deadline"). A job whose deadline has passed when it enters the queue gets its deadline
//! try at the first pass.
//!
//! **Order.** As the seed notes, global jobs are not scheduled in FCFS order: at a pass
//! every job whose try time has come is tried, in order of try time, then arrival. A job
//! without a deadline is due at every pass from its arrival on (like FPFS: each one that
//! fits starts, in arrival order; its try time is its arrival), so the policy also serves
//! ordinary jobs. Between its tries a deadline job is not tried, even if room appears.
//!
//! [`JobRecord::wasted`]: crate::scheduler::api::JobRecord::wasted
//! [`JobRecord::submit`]: crate::scheduler::api::JobRecord::submit

use super::{PassCtx, QueuePolicy, StartOptions};
use crate::model::{Job, Millis, Time};
use crate::scheduler::api::JobId;
use std::collections::{BTreeMap, BTreeSet};

/// Who wins when a global job cannot get its processors at its deadline (seed 001 §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum GlobalPriority {
    /// Global priority: local jobs are killed to make room.
    #[default]
    Gp,
    /// Local priority: the global job fails.
    Lp,
}

impl GlobalPriority {
    pub const NAMES: &'static [&'static str] = &["gp", "lp"];

    pub fn from_name(name: &str) -> Result<GlobalPriority, String> {
        match name.to_ascii_lowercase().as_str() {
            "gp" => Ok(GlobalPriority::Gp),
            "lp" => Ok(GlobalPriority::Lp),
            _ => Err(format!(
                "unknown priority policy `{name}` (expected one of: {})",
                Self::NAMES.join(", ")
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GlobalPriority::Gp => "gp",
            GlobalPriority::Lp => "lp",
        }
    }
}

/// The RPP's parameters (seed 001 §2.2).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RppParams {
    /// Lp, `0 < lp <= 1`: the share of the time left until the deadline that each try waits.
    pub lp: f64,
    /// Mp: most plain tries before the deadline; `None` = no limit.
    pub mp: Option<u32>,
    /// Wait-X's ignore time I: no try before `deadline − I`; `None` = Wait-∞ (never ignore).
    pub ignore: Option<Millis>,
    pub priority: GlobalPriority,
}

impl Default for RppParams {
    fn default() -> Self {
        RppParams {
            lp: 0.7,
            mp: None,
            ignore: None,
            priority: GlobalPriority::Gp,
        }
    }
}

impl RppParams {
    /// Check the ranges. [`Rpp::new`] takes any values without panicking (Lp ≤ 0 or NaN
    /// tries at `S` and then every 1 ms; Lp > 1 tries only at the deadline; Mp = 0 leaves
    /// only the deadline try; a negative I counts as 0), but configuration readers should
    /// refuse them with this message.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.lp > 0.0 && self.lp <= 1.0) {
            return Err(format!("Lp must be in (0, 1], got {}", self.lp));
        }
        if self.mp == Some(0) {
            return Err("Mp must be at least 1 (leave it out for no limit)".to_owned());
        }
        if self.ignore.is_some_and(|i| i < 0) {
            return Err("the ignore time I must not be negative".to_owned());
        }
        Ok(())
    }

    /// The earliest time Wait-X lets a job with this deadline be tried.
    fn earliest(&self, deadline: Time) -> Option<Time> {
        self.ignore.map(|i| deadline.saturating_sub(i.max(0)))
    }

    /// The first try of a job submitted at `submit` (Wait-X applied).
    pub fn first_try(&self, submit: Time, deadline: Time) -> Time {
        let gap = deadline.saturating_sub(submit).max(0);
        let t = submit + share(self.lp, gap).clamp(0, gap);
        self.earliest(deadline).map_or(t, |e| t.max(e))
    }

    /// The try after a failed one at `at` (Wait-X applied); `deadline` when `at` is at or
    /// past it.
    pub fn next_try(&self, at: Time, deadline: Time) -> Time {
        if at >= deadline {
            return deadline;
        }
        let gap = deadline - at;
        let t = at + share(self.lp, gap).clamp(1, gap);
        self.earliest(deadline).map_or(t, |e| t.max(e))
    }

    /// Every try time of a job submitted at `submit` when no try succeeds and every pass is
    /// on time, up to and including the deadline (Mp not applied). Its length grows like
    /// `log(D − S) / −log(1 − Lp)`; with a tiny Lp it can reach `D − S` entries.
    pub fn try_times(&self, submit: Time, deadline: Time) -> Vec<Time> {
        let mut t = self.first_try(submit, deadline);
        let mut out = vec![t];
        while t < deadline {
            t = self.next_try(t, deadline);
            out.push(t);
        }
        out
    }
}

/// `round(lp · gap)` in whole milliseconds (NaN counts as 0).
fn share(lp: f64, gap: Millis) -> Millis {
    // `as` saturates and maps NaN to 0; gaps are far below 2^53 ms.
    (lp * gap as f64).round() as Millis
}

/// A time as in job specs (whole seconds, else milliseconds).
fn time(t: Time) -> String {
    crate::spec::format_time(t)
}

/// Why an LP job fails at its deadline.
pub fn lp_deadline_failure(deadline: Time, tries: u32) -> String {
    format!(
        "deadline missed: not placed by its deadline ({}) after {tries} placement tries \
         (LP: local jobs are not killed)",
        time(deadline)
    )
}

/// Why an LP job fails when Mp tries have failed before its deadline.
pub fn lp_mp_failure(deadline: Time, mp: u32) -> String {
    format!(
        "deadline missed: not placed in {mp} placement tries (the limit Mp) before its \
         deadline ({}) (LP: local jobs are not killed)",
        time(deadline)
    )
}

/// Why a GP job fails at its deadline: even killing local jobs does not make room.
pub fn gp_failure(deadline: Time, tries: u32) -> String {
    format!(
        "deadline missed: not placed at its deadline ({}) even with local jobs killed, after \
         {tries} placement tries (GP)",
        time(deadline)
    )
}

/// One queued job.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Entry {
    id: JobId,
    deadline: Option<Time>,
    /// When it is due: its arrival (no deadline, or not planned yet) or its next try.
    due: Time,
    /// Its try times are computed (at the first pass after it arrives, when the submission
    /// time can be read).
    planned: bool,
    /// Plain tries made since it entered the queue.
    tries: u32,
    /// GP after Mp failed tries: only the deadline try is left.
    exhausted: bool,
}

/// The RPP queue. See the module documentation.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Rpp {
    params: RppParams,
    /// Arrival sequence → job.
    entries: BTreeMap<u64, Entry>,
    seq_of: BTreeMap<JobId, u64>,
    /// Jobs with a deadline by (due, arrival): what `next_wakeup` reports.
    timed: BTreeSet<(Time, u64)>,
    /// Jobs without a deadline by (arrival time, arrival).
    untimed: BTreeSet<(Time, u64)>,
    next_seq: u64,
}

impl Rpp {
    pub fn new(params: RppParams) -> Rpp {
        Rpp {
            params,
            ..Rpp::default()
        }
    }

    pub fn params(&self) -> &RppParams {
        &self.params
    }

    /// Drop a job from the queue.
    fn drop_seq(&mut self, seq: u64) -> Option<Entry> {
        let e = self.entries.remove(&seq)?;
        self.seq_of.remove(&e.id);
        if e.deadline.is_some() {
            self.timed.remove(&(e.due, seq));
        } else {
            self.untimed.remove(&(e.due, seq));
        }
        Some(e)
    }

    /// Move a deadline job to a new due time.
    fn rekey(&mut self, seq: u64, due: Time) {
        if let Some(e) = self.entries.get_mut(&seq) {
            self.timed.remove(&(e.due, seq));
            e.due = due;
            self.timed.insert((due, seq));
        }
    }

    /// Drop the job and end it.
    fn give_up(&mut self, ctx: &mut dyn PassCtx, seq: u64, reason: String) {
        if let Some(e) = self.drop_seq(seq) {
            ctx.fail(e.id, reason);
        }
    }

    /// One due job's turn in a pass.
    fn visit(&mut self, ctx: &mut dyn PassCtx, seq: u64) {
        let Some(e) = self.entries.get(&seq).cloned() else {
            return;
        };
        let now = ctx.now();
        let id = e.id;
        let Some(deadline) = e.deadline else {
            if ctx.try_start(id, None) {
                self.drop_seq(seq);
            }
            return;
        };
        if !e.planned {
            let submit = ctx.job(id).submit.unwrap_or(ctx.record(id).submit);
            let first = self.params.first_try(submit, deadline);
            if let Some(entry) = self.entries.get_mut(&seq) {
                entry.planned = true;
            }
            if self.params.mp == Some(0) {
                return self.out_of_tries(ctx, seq, deadline, 0);
            }
            if first > now {
                return self.rekey(seq, first);
            }
        }
        if e.exhausted && now < deadline {
            return self.rekey(seq, deadline);
        }
        let hold = StartOptions {
            hold_until: Some(deadline),
            ..StartOptions::default()
        };
        if ctx.start_with(id, &hold) {
            self.drop_seq(seq);
            return;
        }
        let tries = e.tries + 1;
        if let Some(entry) = self.entries.get_mut(&seq) {
            entry.tries = tries;
        }
        if now >= deadline {
            return self.missed(ctx, seq, deadline, tries);
        }
        if self.params.mp.is_some_and(|mp| tries >= mp) {
            return self.out_of_tries(ctx, seq, deadline, tries);
        }
        let next = self.params.next_try(now, deadline);
        self.rekey(seq, next);
    }

    /// Mp tries failed before the deadline: LP fails the job, GP waits for the deadline.
    fn out_of_tries(&mut self, ctx: &mut dyn PassCtx, seq: u64, deadline: Time, tries: u32) {
        match self.params.priority {
            GlobalPriority::Lp => self.give_up(ctx, seq, lp_mp_failure(deadline, tries)),
            GlobalPriority::Gp => {
                if let Some(entry) = self.entries.get_mut(&seq) {
                    entry.exhausted = true;
                }
                let due = deadline.max(ctx.now());
                self.rekey(seq, due);
                if due <= ctx.now() {
                    self.visit(ctx, seq);
                }
            }
        }
    }

    /// The plain try at (or after) the deadline failed.
    fn missed(&mut self, ctx: &mut dyn PassCtx, seq: u64, deadline: Time, tries: u32) {
        match self.params.priority {
            GlobalPriority::Lp => self.give_up(ctx, seq, lp_deadline_failure(deadline, tries)),
            GlobalPriority::Gp => {
                let Some(id) = self.entries.get(&seq).map(|e| e.id) else {
                    return;
                };
                let kill = StartOptions {
                    hold_until: Some(deadline),
                    kill_local: true,
                    ..StartOptions::default()
                };
                if ctx.start_with(id, &kill) {
                    self.drop_seq(seq);
                } else {
                    self.give_up(ctx, seq, gp_failure(deadline, tries));
                }
            }
        }
    }
}

impl QueuePolicy for Rpp {
    fn saved(&self) -> Option<crate::queue::saved::SavedRef<'_>> {
        Some(crate::queue::saved::SavedRef::Rpp(self))
    }

    fn name(&self) -> &'static str {
        "rpp"
    }

    fn push(&mut self, id: JobId, job: &Job, now: Time) {
        self.remove(id);
        let seq = self.next_seq;
        self.next_seq += 1;
        let e = Entry {
            id,
            deadline: job.deadline(),
            due: now,
            planned: false,
            tries: 0,
            exhausted: false,
        };
        if e.deadline.is_some() {
            // Due at once, to be planned at the next pass (which follows every push).
            self.timed.insert((now, seq));
        } else {
            self.untimed.insert((now, seq));
        }
        self.entries.insert(seq, e);
        self.seq_of.insert(id, seq);
    }

    fn remove(&mut self, id: JobId) {
        if let Some(&seq) = self.seq_of.get(&id) {
            self.drop_seq(seq);
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn pass(&mut self, ctx: &mut dyn PassCtx) {
        let now = ctx.now();
        let mut due: Vec<(Time, u64)> = self.timed.range(..=(now, u64::MAX)).copied().collect();
        due.extend(self.untimed.iter().copied());
        due.sort_unstable();
        for (_, seq) in due {
            self.visit(ctx, seq);
        }
    }

    fn next_wakeup(&self) -> Option<Time> {
        self.timed.first().map(|&(t, _)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_advances_and_ends_at_the_deadline() {
        let p = RppParams::default();
        assert_eq!(p.first_try(0, 1_000_000), 700_000);
        assert_eq!(p.next_try(700_000, 1_000_000), 910_000);
        assert_eq!(p.next_try(999_999, 1_000_000), 1_000_000);
        assert_eq!(p.next_try(1_000_001, 1_000_000), 1_000_000);
        // A deadline at or before the submission: the first try is at once.
        assert_eq!(p.first_try(500, 400), 500);
    }

    #[test]
    fn out_of_range_parameters_still_give_a_finite_sequence() {
        for lp in [0.0, -1.0, f64::NAN, 2.0] {
            let p = RppParams {
                lp,
                ..RppParams::default()
            };
            assert!(p.validate().is_err());
            let t = p.try_times(0, 5);
            assert_eq!(t.last(), Some(&5));
            assert!(t.windows(2).all(|w| w[0] < w[1]));
        }
        let p = RppParams {
            ignore: Some(-5),
            ..RppParams::default()
        };
        assert_eq!(p.try_times(0, 10), [10]);
    }
}
