//! HSDF's view of the queue (seed 004 §IV-A 4): the queued jobs with what their order needs,
//! and when a job overtakes a blocked head.
//!
//! HSDF orders the queue by estimated slowdown, highest first, ties by arrival
//! ([`Key`]). A job's estimated slowdown at time `t` is `1 + (t - submit) / p` with `p` its
//! predicted runtime, fixed while it waits ([`crate::predictor`]): a line in `t` with slope
//! `1 / p`. Two such lines cross at most once, so once job `j` comes before job `h` it stays
//! before it, and only a job predicted shorter than `h` can overtake it. When a pass ended on
//! a blocked head `h`, [`Index::overtaken_at`] gives the first time any queued job comes
//! before `h`; until then (and until the epoch changes or `h` leaves) every pass would find
//! `h` at the head, already tried, and end at once, so the policy skips them (see "Passes
//! that cannot change anything" in [`super`]).
//!
//! The rows (job, submission, prediction, arrival) are a cache of the queue and the jobs'
//! records: they are not saved in a snapshot but rebuilt at the first pass after a restore.
//! Jobs pushed since the last pass wait in [`Index::pending`] (saved), since their submission
//! times are read from their records during a pass.

use super::Entry;
use crate::model::{Millis, Time};
use crate::predictor::{wait_so_far, EstimatedSlowdown};
use crate::queue::PassCtx;
use crate::scheduler::api::JobId;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

/// HSDF's order at some time: highest estimated slowdown first, then arrival.
type Key = (Reverse<EstimatedSlowdown>, u64);

/// One queued job as HSDF orders it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Row {
    pub(super) id: JobId,
    submit: Time,
    predicted: Millis,
    seq: u64,
}

impl Row {
    fn of(ctx: &dyn PassCtx, id: JobId, e: &Entry) -> Row {
        Row {
            id,
            submit: ctx.record(id).submit,
            predicted: e.predicted,
            seq: e.seq,
        }
    }

    /// The job's place in HSDF's order at `now` (smaller comes first).
    fn key(&self, now: Time) -> Key {
        let wait = wait_so_far(now, self.submit);
        (
            Reverse(EstimatedSlowdown::new(wait, self.predicted)),
            self.seq,
        )
    }

    /// Whether `self` comes before `head` in HSDF's order at `t`.
    fn ahead_of(&self, head: &Row, t: Time) -> bool {
        self.key(t) < head.key(t)
    }

    /// The first time at or after `now` at which `self` comes before `head` in HSDF's order,
    /// if ever. Computed from the lines, then pinned with the order itself.
    fn overtakes_at(&self, head: &Row, now: Time) -> Option<Time> {
        let ahead = |t: Time| self.ahead_of(head, t);
        if ahead(now) {
            return Some(now);
        }
        if self.submit > now || head.submit > now {
            // A wait still clamped at 0 is not on its line yet: look again a moment later.
            return now.checked_add(1);
        }
        // self before head at t ⟺ (t - s_j) p_h > (t - s_h) p_j, or equal and j arrived
        // first; that is d t > c (≥ c) with d = p_h - p_j, c = s_j p_h - s_h p_j.
        let (pj, ph) = (
            i128::from(self.predicted.max(1)),
            i128::from(head.predicted.max(1)),
        );
        let d = ph - pj;
        if d <= 0 {
            return None; // predicted no shorter: never overtakes
        }
        let c = i128::from(self.submit) * ph - i128::from(head.submit) * pj;
        let t = if self.seq < head.seq {
            -((-c).div_euclid(d)) // ⌈c / d⌉
        } else {
            c.div_euclid(d) + 1
        };
        let mut t = Time::try_from(t.max(i128::from(now) + 1)).ok()?;
        while !ahead(t) {
            t = t.checked_add(1)?;
        }
        while t - 1 > now && ahead(t - 1) {
            t -= 1;
        }
        Some(t)
    }
}

/// The queue as HSDF orders it; see the module documentation.
///
/// The rows are kept in groups of equal prediction (at least 1 ms), each in order of
/// submission, then arrival. Within a group every job waited since its own submission, so
/// the group's first job, if it was submitted by `now`, comes first in HSDF's order at
/// `now` among the group's jobs submitted by then, and overtakes a head first among them.
/// The groups' first jobs are kept in a list: the head and the first time it is overtaken
/// are found in one look per group instead of one per job (an overloaded queue holds tens
/// of thousands of jobs with some hundreds of predictions). Jobs submitted after `now` (a
/// driver's clock behind a submission) are looked at one by one.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Index {
    /// The queued jobs with rows, by number.
    #[serde(skip)]
    rows: BTreeMap<JobId, Row>,
    /// Prediction (at least 1) → its group.
    #[serde(skip)]
    groups: BTreeMap<Millis, Group>,
    /// Every group's first job.
    #[serde(skip)]
    fronts: Vec<Row>,
    /// Every row by (submission, arrival), for the jobs submitted after some time.
    #[serde(skip)]
    by_submit: BTreeSet<(Time, u64, JobId)>,
    /// Whether `rows` holds every queued job not in `pending` (false after a restore).
    #[serde(skip)]
    built: bool,
    /// Jobs pushed since the last pass, without a row yet.
    pub(super) pending: Vec<JobId>,
    /// The head the last pass ended on, while the policy skips passes.
    pub(super) held: Option<JobId>,
}

/// The queued jobs of one prediction.
#[derive(Debug, Default)]
struct Group {
    /// By (submission, arrival).
    jobs: BTreeSet<(Time, u64, JobId)>,
    /// Where the first is in [`Index::fronts`].
    front: usize,
}

impl Index {
    /// A job enters the queue: its row is made at the next pass.
    pub(super) fn push(&mut self, id: JobId) {
        self.remove(id);
        self.pending.push(id);
    }

    pub(super) fn remove(&mut self, id: JobId) {
        let Some(r) = self.rows.remove(&id) else {
            self.pending.retain(|&p| p != id);
            return;
        };
        let p = r.predicted.max(1);
        self.by_submit.remove(&(r.submit, r.seq, id));
        let Some(g) = self.groups.get_mut(&p) else {
            return;
        };
        g.jobs.remove(&(r.submit, r.seq, id));
        let at = g.front;
        match g.jobs.first() {
            Some(&(_, _, first)) => self.fronts[at] = self.rows[&first],
            None => {
                self.groups.remove(&p);
                self.fronts.swap_remove(at);
                if let Some(moved) = self.fronts.get(at) {
                    let g = self.groups.get_mut(&moved.predicted.max(1));
                    g.expect("every front has its group").front = at;
                }
            }
        }
    }

    /// Rows for the pending jobs (and for every queued job, after a restore); returns the
    /// new rows of pending jobs.
    pub(super) fn sync(&mut self, ctx: &dyn PassCtx, entries: &BTreeMap<JobId, Entry>) -> Vec<Row> {
        if !self.built {
            *self = Index {
                pending: std::mem::take(&mut self.pending),
                held: self.held,
                ..Index::default()
            };
            for (&id, e) in entries {
                if !self.pending.contains(&id) {
                    self.insert(Row::of(ctx, id, e));
                }
            }
            self.built = true;
        }
        let mut new = Vec::new();
        for id in std::mem::take(&mut self.pending) {
            if let Some(e) = entries.get(&id) {
                let r = Row::of(ctx, id, e);
                self.insert(r);
                new.push(r);
            }
        }
        new
    }

    fn insert(&mut self, r: Row) {
        let p = r.predicted.max(1);
        self.rows.insert(r.id, r);
        self.by_submit.insert((r.submit, r.seq, r.id));
        let fronts = self.fronts.len();
        let g = self.groups.entry(p).or_insert_with(|| Group {
            jobs: BTreeSet::new(),
            front: fronts,
        });
        g.jobs.insert((r.submit, r.seq, r.id));
        if g.front == fronts {
            self.fronts.push(r); // a new group
        } else if g.jobs.first().is_some_and(|&(_, _, first)| first == r.id) {
            self.fronts[g.front] = r;
        }
    }

    pub(super) fn row(&self, id: JobId) -> Option<Row> {
        self.rows.get(&id).copied()
    }

    /// The jobs submitted after `now`: they waited 0 so far, and are not on their lines.
    fn later(&self, now: Time) -> impl Iterator<Item = Row> + '_ {
        self.by_submit
            .range((now.saturating_add(1), 0, 0)..)
            .map(|&(_, _, id)| self.rows[&id])
    }

    /// The head of HSDF's order at `now`.
    pub(super) fn head(&self, now: Time) -> Option<Row> {
        let on_lines = self.fronts.iter().filter(|f| f.submit <= now);
        on_lines
            .copied()
            .chain(self.later(now))
            .min_by_key(|r| r.key(now))
    }

    /// The first time at or after `now` at which a queued job comes before `head` (`None`:
    /// never, as long as the queue holds only these jobs).
    pub(super) fn overtaken_at(&self, head: &Row, now: Time) -> Option<Time> {
        if head.submit > now {
            // The head is not on its line yet: every job, one by one.
            return Self::overtaken_by(head, self.rows.values(), now);
        }
        if self.head(now).is_some_and(|h| h.id != head.id) {
            return Some(now);
        }
        // Only a job predicted shorter overtakes, and its group's first does so first.
        let ph = head.predicted.max(1);
        let leads = self
            .fronts
            .iter()
            .filter(|f| f.submit <= now && f.predicted.max(1) < ph)
            .copied();
        Self::overtaken_by(head, leads.chain(self.later(now)), now)
    }

    /// The first time at or after `now` at which one of `rows` comes before `head`.
    pub(super) fn overtaken_by(
        head: &Row,
        rows: impl IntoIterator<Item = impl std::borrow::Borrow<Row>>,
        now: Time,
    ) -> Option<Time> {
        let mut first: Option<Time> = None;
        for r in rows {
            let r = r.borrow();
            if r.id == head.id {
                continue;
            }
            if let Some(b) = first {
                // On their lines (both waited since `now`), a job behind `head` at `now`
                // that is still behind it just before `b` overtakes it at `b` or later, if
                // ever (the lines cross once): no need to know when.
                let lines = r.submit <= now && head.submit <= now;
                let behind = |t: Time| !r.ahead_of(head, t);
                if b <= now || (lines && behind(now) && behind(b - 1)) {
                    continue;
                }
            }
            if let Some(t) = r.overtakes_at(head, now) {
                first = Some(first.map_or(t, |b| b.min(t)));
            }
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: JobId, submit: Time, predicted: Millis, seq: u64) -> Row {
        Row {
            id,
            submit,
            predicted,
            seq,
        }
    }

    /// The first overtaking time, by trying every time.
    fn by_search(j: &Row, h: &Row, now: Time, horizon: Time) -> Option<Time> {
        (now..horizon).find(|&t| j.key(t) < h.key(t))
    }

    fn index_of(rows: &[Row]) -> Index {
        let mut index = Index::default();
        for &r in rows {
            index.insert(r);
        }
        index
    }

    #[test]
    fn the_first_overtaking_of_many_is_the_earliest() {
        let h = row(1, 0, 1_000, 5);
        let mut rng = crate::queue::tags::SplitMix64::new(7);
        for case in 0..200 {
            let mut rows = vec![h];
            let now = 500;
            for id in 2..2 + rng.below(12) as JobId {
                let r = row(
                    id,
                    rng.below(501) as Time,
                    // Shorter than the head's (overtaking by 5,000 at the latest) or not.
                    [1 + rng.below(899), 1_000 + rng.below(500)][rng.below(2) as usize] as Millis,
                    id,
                );
                rows.push(r);
            }
            let from = rng.below(3) as usize;
            let later = rows.get(from..).unwrap_or_default();
            let want = |rows: &[Row]| {
                rows.iter()
                    .filter(|r| r.id != h.id)
                    .filter_map(|r| by_search(r, &h, now, 6_000))
                    .min()
            };
            assert_eq!(
                Index::overtaken_by(&h, later, now),
                want(later),
                "case {case}"
            );
            let index = index_of(&rows);
            if index.head(now).is_some_and(|x| x.id == h.id) {
                assert_eq!(index.overtaken_at(&h, now), want(&rows), "case {case}");
            }
        }
    }

    /// The groups give the head and the first overtaking time that a look at every job
    /// gives (and, for jobs on their lines, a search of every time): equal predictions and
    /// submissions, predictions of 0 and 1 ms (both 1), jobs submitted after `now`, jobs
    /// removed.
    #[test]
    fn groups_agree_with_every_job_one_by_one() {
        let mut rng = crate::queue::tags::SplitMix64::new(11);
        for case in 0..1_000 {
            let n = 1 + rng.below(14) as usize;
            let mut rows: Vec<Row> = (0..n)
                .map(|i| {
                    let submit = [rng.below(40), 10 * rng.below(4), 45 + rng.below(10)]
                        [rng.below(3) as usize] as Time;
                    let predicted = [rng.below(3), 5 * (1 + rng.below(4)), 1 + rng.below(60)]
                        [rng.below(3) as usize] as Millis;
                    row(i as JobId + 1, submit, predicted, rng.below(1_000))
                })
                .collect();
            // Arrivals are unique.
            for (i, r) in rows.iter_mut().enumerate() {
                r.seq = r.seq * 100 + i as u64;
            }
            let mut index = index_of(&rows);
            for _ in 0..rng.below(4).min(rows.len() as u64 - 1) {
                let gone = rows.remove(rng.below(rows.len() as u64) as usize);
                index.remove(gone.id);
            }
            let now = 40 + rng.below(10) as Time;
            let want = rows.iter().min_by_key(|r| r.key(now)).copied();
            assert_eq!(
                index.head(now).map(|r| r.id),
                want.map(|r| r.id),
                "case {case}: head at {now} of {rows:?}"
            );
            for h in &rows {
                // The look at every job as it was before the groups (a job submitted after
                // `now` answers "a moment later", not the exact time).
                let want = Index::overtaken_by(h, &rows, now);
                if h.submit <= now && rows.iter().all(|r| r.submit <= now) {
                    let exact = rows
                        .iter()
                        .filter(|r| r.id != h.id)
                        .filter_map(|r| by_search(r, h, now, 20_000))
                        .min();
                    assert_eq!(want, exact, "case {case}");
                }
                assert_eq!(
                    index.overtaken_at(h, now),
                    want,
                    "case {case}: {h:?} at {now} in {rows:?}"
                );
            }
        }
    }

    #[test]
    fn overtaking_times_are_exact() {
        let h = row(1, 0, 1_000, 5);
        // j: submitted at 600, predicted 400: (t - 600) * 1000 > t * 400 ⟺ t > 1000.
        let later = row(2, 600, 400, 6);
        assert_eq!(later.overtakes_at(&h, 700), Some(1_001));
        // Arrived first: a tie at 1000 is enough.
        let earlier = row(2, 600, 400, 4);
        assert_eq!(earlier.overtakes_at(&h, 700), Some(1_000));
        // Predicted as long or longer: never.
        assert_eq!(row(2, 0, 1_000, 6).overtakes_at(&h, 10), None);
        assert_eq!(row(2, 5, 3_000, 6).overtakes_at(&h, 10), None);
        // Already ahead.
        assert_eq!(row(2, 0, 10, 6).overtakes_at(&h, 10), Some(10));
        for (s, p, seq) in [(3, 7, 1), (3, 7, 9), (97, 13, 2), (50, 1, 9), (0, 999, 1)] {
            for (hs, hp) in [(0, 1_000), (20, 333), (90, 14)] {
                let h = row(1, hs, hp, 5);
                let j = row(2, s, p, seq);
                for now in [100, 101, 250] {
                    if j.key(now) < h.key(now) {
                        continue;
                    }
                    assert_eq!(
                        j.overtakes_at(&h, now),
                        by_search(&j, &h, now, 1_000_000),
                        "{j:?} {h:?} {now}"
                    );
                }
            }
        }
    }
}
