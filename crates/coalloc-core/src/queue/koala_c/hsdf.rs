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
use std::collections::BTreeMap;

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
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Index {
    /// The queued jobs, in no particular order.
    #[serde(skip)]
    rows: Vec<Row>,
    /// Job → its row.
    #[serde(skip)]
    row_of: BTreeMap<JobId, usize>,
    /// Whether `rows` holds every queued job not in `pending` (false after a restore).
    #[serde(skip)]
    built: bool,
    /// Jobs pushed since the last pass, without a row yet.
    pub(super) pending: Vec<JobId>,
    /// The head the last pass ended on, while the policy skips passes.
    pub(super) held: Option<JobId>,
}

impl Index {
    /// A job enters the queue: its row is made at the next pass.
    pub(super) fn push(&mut self, id: JobId) {
        self.remove(id);
        self.pending.push(id);
    }

    pub(super) fn remove(&mut self, id: JobId) {
        if let Some(i) = self.row_of.remove(&id) {
            self.rows.swap_remove(i);
            if let Some(moved) = self.rows.get(i) {
                self.row_of.insert(moved.id, i);
            }
        } else {
            self.pending.retain(|&p| p != id);
        }
    }

    /// Rows for the pending jobs (and for every queued job, after a restore); returns the
    /// first of the new rows of pending jobs (the rows from there on).
    pub(super) fn sync(&mut self, ctx: &dyn PassCtx, entries: &BTreeMap<JobId, Entry>) -> usize {
        if !self.built {
            self.rows.clear();
            self.row_of.clear();
            for (&id, e) in entries {
                if !self.pending.contains(&id) {
                    self.add(ctx, id, e);
                }
            }
            self.built = true;
        }
        let first = self.rows.len();
        for id in std::mem::take(&mut self.pending) {
            if let Some(e) = entries.get(&id) {
                self.add(ctx, id, e);
            }
        }
        first
    }

    fn add(&mut self, ctx: &dyn PassCtx, id: JobId, e: &Entry) {
        self.row_of.insert(id, self.rows.len());
        self.rows.push(Row {
            id,
            submit: ctx.record(id).submit,
            predicted: e.predicted,
            seq: e.seq,
        });
    }

    pub(super) fn row(&self, id: JobId) -> Option<Row> {
        self.row_of.get(&id).map(|&i| self.rows[i])
    }

    /// The head of HSDF's order at `now`.
    pub(super) fn head(&self, now: Time) -> Option<Row> {
        self.rows.iter().min_by_key(|r| r.key(now)).copied()
    }

    /// The first time at or after `now` at which a job of the rows from `from` on comes
    /// before `head` (`None`: never, as long as the queue holds only these jobs).
    pub(super) fn overtaken_at(&self, head: &Row, from: usize, now: Time) -> Option<Time> {
        let mut first: Option<Time> = None;
        for r in self.rows.get(from..).unwrap_or_default() {
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

    #[test]
    fn the_first_overtaking_of_many_is_the_earliest() {
        let h = row(1, 0, 1_000, 5);
        let mut rng = crate::queue::tags::SplitMix64::new(7);
        for case in 0..200 {
            let mut index = Index::default();
            index.rows.push(h);
            let now = 500;
            for id in 2..2 + rng.below(12) as JobId {
                let r = row(
                    id,
                    rng.below(501) as Time,
                    // Shorter than the head's (overtaking by 5,000 at the latest) or not.
                    [1 + rng.below(899), 1_000 + rng.below(500)][rng.below(2) as usize] as Millis,
                    id,
                );
                index.rows.push(r);
            }
            let from = rng.below(3) as usize;
            let want = index
                .rows
                .get(from..)
                .unwrap_or_default()
                .iter()
                .filter(|r| r.id != h.id)
                .filter_map(|r| by_search(r, &h, now, 6_000))
                .min();
            assert_eq!(index.overtaken_at(&h, from, now), want, "case {case}");
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
