//! The availability profile of backfilling: free processors per site over time.

use crate::model::Time;
use crate::queue::{PassCtx, RunningJob};
use std::collections::btree_map::Range;
use std::collections::{BTreeMap, VecDeque};
use std::iter::Peekable;
use std::ops::Bound::{Excluded, Included, Unbounded};

/// Free processors per site from one time until the next step.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Step {
    /// Per site.
    pub free: Vec<u32>,
    /// The sum over the usable sites (the quick reject of a job that needs more).
    pub usable_total: u64,
    /// The sum over every site.
    pub total: u64,
    /// The most on one usable site.
    pub usable_max: u32,
}

impl Step {
    fn new(free: Vec<u32>, usable: &[bool]) -> Step {
        let mut step = Step {
            free,
            usable_total: 0,
            total: 0,
            usable_max: 0,
        };
        step.sum(usable);
        step
    }

    fn sum(&mut self, usable: &[bool]) {
        self.total = self.free.iter().map(|&f| u64::from(f)).sum();
        (self.usable_total, self.usable_max) = super::usable_stats(&self.free, usable);
    }
}

/// Free processors per site as a step function of time: each step holds from its time until
/// the next step's; the last one holds forever. The first step is the pass's now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Profile {
    usable: Vec<bool>,
    steps: BTreeMap<Time, Step>,
}

impl Profile {
    /// The profile of a pass at `now`: `idle` processors now, and every running job's
    /// processors back at its estimated end (an end not after now counts as now). Jobs are
    /// taken by end, then job number; jobs that end together make one step. `usable` says
    /// which sites count in [`Step::usable_total`].
    pub fn new(now: Time, idle: Vec<u32>, usable: &[bool], running: &[RunningJob]) -> Profile {
        let mut ends = by_end(now, running).into_iter().peekable();
        let mut free = idle;
        let mut steps = BTreeMap::new();
        let mut t = now;
        loop {
            while let Some((_, r)) = ends.next_if(|(end, _)| *end == t) {
                for (site, n) in r.holds.iter() {
                    if let Some(f) = free.get_mut(site) {
                        *f = f.saturating_add(n);
                    }
                }
            }
            steps.insert(t, Step::new(free.clone(), usable));
            match ends.peek() {
                Some((end, _)) => t = *end,
                None => break,
            }
        }
        Profile {
            usable: usable.to_vec(),
            steps,
        }
    }

    /// Every step from `from` on (inclusive), in time order.
    pub fn steps_from(&self, from: Time) -> impl Iterator<Item = (Time, &Step)> {
        self.steps.range(from..).map(|(t, s)| (*t, s))
    }

    /// The step in effect at `t`.
    pub fn step_at(&self, t: Time) -> &Step {
        self.steps
            .range(..=t)
            .next_back()
            .or_else(|| self.steps.first_key_value())
            .map(|(_, s)| s)
            .expect("a profile has a step")
    }

    /// Free processors at time `t`.
    pub fn at(&self, t: Time) -> &[u32] {
        &self.step_at(t).free
    }

    /// Free processors once every running job and every reservation has ended (the last
    /// step).
    pub fn last(&self) -> &[u32] {
        self.steps
            .last_key_value()
            .map(|(_, s)| s.free.as_slice())
            .unwrap_or(&[])
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Every step from `from` on as a start time of a job that runs for `len` (at least
    /// 1 ms), each with the fewest free processors per site over its window `[t, t + len)`
    /// (see [`Windows`]). A step that `ok` refuses ends every window that holds it.
    pub fn windows<F: Fn(&Step) -> bool>(&self, from: Time, len: Time, ok: F) -> Windows<'_, F> {
        let sites = self.steps.values().next().map_or(0, |s| s.free.len());
        Windows {
            len: len.max(1),
            ok,
            starts: self.steps.range(from..).peekable(),
            ends: self.steps.range(from..).peekable(),
            mins: vec![VecDeque::new(); sites],
            filled: false,
        }
    }

    /// Take `need` processors per site over `[from, to)`; `to = None` means forever. Never
    /// below zero.
    pub fn reserve(&mut self, from: Time, to: Option<Time>, need: &[u32]) {
        let upper = match to {
            Some(to) if to <= from => return,
            Some(to) => {
                self.split(to);
                Excluded(to)
            }
            None => Unbounded,
        };
        self.split(from);
        let usable = &self.usable;
        for (_, s) in self.steps.range_mut((Included(from), upper)) {
            for (f, n) in s.free.iter_mut().zip(need) {
                *f = f.saturating_sub(*n);
            }
            s.sum(usable);
        }
    }

    /// Make `t` a step of its own (with the value in effect at `t`).
    fn split(&mut self, t: Time) {
        if !self.steps.contains_key(&t) {
            let s = self.step_at(t).clone();
            self.steps.insert(t, s);
        }
    }
}

/// Running jobs in the order [`Profile::new`] takes them back: by estimated end (an end not
/// after `now` counts as `now`), then job number.
pub fn by_end(now: Time, running: &[RunningJob]) -> Vec<(Time, &RunningJob)> {
    let mut ends: Vec<(Time, &RunningJob)> = running.iter().map(|r| (r.end.max(now), r)).collect();
    ends.sort_by_key(|(end, r)| (*end, r.job));
    ends
}

/// The steps [`Profile::new`] would make, one at a time and without making them: `f` gets
/// each step's time and free processors per site, in time order, until it returns a value.
/// The running jobs come from [`PassCtx::visit_running_by_end`] (by estimated end; an end
/// not after `now` counts as `now`). One vector is updated in place, where a profile keeps
/// one per step, and only the jobs up to the step `f` takes are looked at: what a single
/// walk (EASY's shadow time) needs. A running job that holds no processors makes no step
/// (its step would offer what the step before it did).
///
/// `f` is not asked about a step with fewer than `need` free processors over all sites: a
/// caller that needs that many (a head of that size) would refuse it anyway, and most steps
/// of a busy profile are such (issue 34: the per-step check was a tenth of a replay's EASY
/// passes).
pub fn walk_steps<R>(
    now: Time,
    idle: &[u32],
    ctx: &dyn PassCtx,
    need: u64,
    mut f: impl FnMut(Time, &[u32]) -> Option<R>,
) -> Option<R> {
    let mut free = crate::placement::PerSite::<u32>::from_slice(idle);
    let mut total: u64 = idle.iter().map(|&n| u64::from(n)).sum();
    let mut t = now;
    let mut found = None;
    ctx.visit_running_by_end(&mut |end, site, n| {
        let end = end.max(now);
        if end != t {
            // Every job that ends by `t` has given its processors back: step `t` is whole.
            if total >= need {
                found = f(t, &free);
                if found.is_some() {
                    return false;
                }
            }
            t = end;
        }
        if let Some(x) = free.get_mut(site) {
            let was = *x;
            *x = x.saturating_add(n);
            total += u64::from(*x - was);
        }
        true
    });
    if found.is_some() {
        return found;
    }
    if total < need {
        return None;
    }
    f(t, &free)
}

/// The start times of a job in a profile, with the fewest free processors per site over
/// each one's window, from [`Profile::windows`]. Windows slide: every site keeps a monotonic
/// queue of the window's steps, so each step enters and leaves a window at most once per
/// job (`O(S)` each), however long the windows. A step the quick reject refuses makes the
/// next start time the step after it.
pub struct Windows<'a, F> {
    len: Time,
    ok: F,
    /// The steps still to try as start times.
    starts: Peekable<Range<'a, Time, Step>>,
    /// The steps not yet in a window.
    ends: Peekable<Range<'a, Time, Step>>,
    /// Per site: `(time, free)` of the window's steps, free increasing from the front.
    mins: Vec<VecDeque<(Time, u32)>>,
    /// Whether `mins` may hold anything.
    filled: bool,
}

impl<F: Fn(&Step) -> bool> Iterator for Windows<'_, F> {
    type Item = (Time, Vec<u32>);

    fn next(&mut self) -> Option<(Time, Vec<u32>)> {
        'start: loop {
            let (&t, _) = self.starts.next()?;
            let end = t.saturating_add(self.len);
            while let Some((&u, step)) = self.ends.next_if(|(&u, _)| u < end) {
                if !(self.ok)(step) {
                    // No window that holds `u` can do: start again after it.
                    self.starts = self.ends.clone();
                    if self.filled {
                        self.mins.iter_mut().for_each(VecDeque::clear);
                        self.filled = false;
                    }
                    continue 'start;
                }
                self.filled = true;
                for (m, &f) in self.mins.iter_mut().zip(&step.free) {
                    while m.back().is_some_and(|&(_, g)| g >= f) {
                        m.pop_back();
                    }
                    m.push_back((u, f));
                }
            }
            let min = self
                .mins
                .iter_mut()
                .map(|m| {
                    while m.front().is_some_and(|&(u, _)| u < t) {
                        m.pop_front();
                    }
                    m.front().map_or(0, |&(_, f)| f)
                })
                .collect();
            return Some((t, min));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(job: u64, end: Time, holds: &[(usize, u32)]) -> RunningJob {
        RunningJob {
            job,
            end,
            holds: holds.iter().copied().collect(),
        }
    }

    fn steps(p: &Profile) -> Vec<(Time, Vec<u32>)> {
        p.steps_from(Time::MIN)
            .map(|(t, s)| (t, s.free.clone()))
            .collect()
    }

    #[test]
    fn steps_come_from_ends_and_a_late_job_ends_now() {
        let r = [
            running(2, 100, &[(0, 3)]),
            running(1, 100, &[(1, 2)]),
            running(3, 5, &[(0, 1), (1, 1)]),
            running(4, 300, &[(1, 4)]),
        ];
        let p = Profile::new(10, vec![1, 0], &[true, false], &r);
        assert_eq!(
            steps(&p),
            [(10, vec![2, 1]), (100, vec![5, 3]), (300, vec![5, 7])]
        );
        assert_eq!(p.at(99), [2, 1]);
        assert_eq!(p.at(1000), [5, 7]);
        assert_eq!(p.last(), [5, 7]);
        assert_eq!((p.step_at(100).usable_total, p.step_at(100).total), (5, 8));
        assert_eq!(p.step_at(100).usable_max, 5);
    }

    #[test]
    fn reservations_split_steps_and_windows_take_the_minimum() {
        let r = [running(1, 100, &[(0, 6)])];
        let mut p = Profile::new(0, vec![4, 10], &[true, true], &r);
        p.reserve(50, Some(150), &[2, 5]);
        assert_eq!(
            steps(&p),
            [
                (0, vec![4, 10]),
                (50, vec![2, 5]),
                (100, vec![8, 5]),
                (150, vec![10, 10])
            ]
        );
        assert_eq!(p.step_at(50).usable_total, 7);
        let windows = |p: &Profile, from, len, ok: &dyn Fn(&Step) -> bool| {
            p.windows(from, len, ok).collect::<Vec<_>>()
        };
        assert_eq!(
            windows(&p, 0, 50, &|_| true),
            [
                (0, vec![4, 10]),
                (50, vec![2, 5]),
                (100, vec![8, 5]),
                (150, vec![10, 10])
            ]
        );
        assert_eq!(
            windows(&p, 0, 51, &|_| true),
            [
                (0, vec![2, 5]),
                (50, vec![2, 5]),
                (100, vec![8, 5]),
                (150, vec![10, 10])
            ]
        );
        assert_eq!(windows(&p, 100, 0, &|_| true)[0], (100, vec![8, 5]));
        assert_eq!(
            windows(&p, 0, 200, &|s| s.free[0] >= 3),
            [(100, vec![8, 5]), (150, vec![10, 10])]
        );
        p.reserve(120, None, &[9, 1]);
        assert_eq!(p.at(120), [0, 4]);
        assert_eq!(p.last(), [1, 9]);
        assert_eq!(p.at(110), [8, 5]);
    }
}
