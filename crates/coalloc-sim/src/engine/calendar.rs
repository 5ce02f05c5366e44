//! A simulated site's calendar of advance reservations (issue 31; seed 000 §2.7 and seed 002
//! §2.2's reservation at the local managers): windows of processors promised to coalloc
//! from a start time for a duration. The site answers the core's "earliest start" from it
//! and from the known ends of what runs now; its local jobs start only when they leave
//! every window's processors free ([`Calendar::peak_unclaimed`]); a window's processors
//! that nobody uses yet are counted apart in the site's usage (reserved but idle).

use coalloc_core::model::{Millis, Time};

/// Processors promised from `start` to `end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub name: String,
    pub start: Time,
    pub end: Time,
    pub count: u32,
    /// Its component has taken the processors (they are then held, not reserved-idle).
    pub claimed: bool,
}

/// A site's reservations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Calendar {
    windows: Vec<Window>,
}

impl Calendar {
    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    pub fn add(&mut self, w: Window) {
        self.windows.push(w);
    }

    /// Delete window `name` (if it exists).
    pub fn remove(&mut self, name: &str) {
        self.windows.retain(|w| w.name != name);
    }

    /// Window `name`'s component takes its processors.
    pub fn claim(&mut self, name: &str) {
        if let Some(w) = self.windows.iter_mut().find(|w| w.name == name) {
            w.claimed = true;
        }
    }

    /// Window `name`'s component gave its processors back before the window was deleted:
    /// they stand reserved and idle again.
    pub fn unclaim(&mut self, name: &str) {
        if let Some(w) = self.windows.iter_mut().find(|w| w.name == name) {
            w.claimed = false;
        }
    }

    /// Forget windows over before `now`.
    pub fn prune(&mut self, now: Time) {
        self.windows.retain(|w| w.end > now);
    }

    /// Unclaimed processors promised at `t`.
    fn unclaimed_at(&self, t: Time) -> u32 {
        self.windows
            .iter()
            .filter(|w| !w.claimed && w.start <= t && t < w.end)
            .map(|w| w.count)
            .sum()
    }

    /// The most unclaimed processors promised at any time in `[from, to)`: what a local job
    /// running then must leave free.
    pub fn peak_unclaimed(&self, from: Time, to: Time) -> u32 {
        self.windows
            .iter()
            .map(|w| w.start)
            .filter(|&s| s > from && s < to)
            .chain([from])
            .map(|t| self.unclaimed_at(t))
            .max()
            .unwrap_or(0)
    }

    /// Processor-milliseconds of unclaimed windows in `[from, to)`.
    pub fn idle_integral(&self, from: Time, to: Time) -> u128 {
        self.windows
            .iter()
            .filter(|w| !w.claimed)
            .map(|w| {
                let (a, b) = (w.start.max(from), w.end.min(to));
                if b > a {
                    (b - a) as u128 * u128::from(w.count)
                } else {
                    0
                }
            })
            .sum()
    }

    /// Whether `count` more processors fit on `total` for `[at, at + duration)`, with
    /// `busy` (processors, until when) running now and every window (claimed or not) held
    /// for its own interval. Usage only grows at a window's start, so those are the
    /// instants to check.
    pub fn fits(
        &self,
        busy: &[(u32, Time)],
        total: u32,
        count: u32,
        at: Time,
        duration: Millis,
    ) -> bool {
        let end = at + duration.max(1);
        let used = |t: Time| -> u32 {
            let running: u32 = busy.iter().filter(|b| b.1 > t).map(|b| b.0).sum();
            let promised: u32 = self
                .windows
                .iter()
                .filter(|w| w.start <= t && t < w.end)
                .map(|w| w.count)
                .sum();
            running + promised
        };
        self.windows
            .iter()
            .map(|w| w.start)
            .filter(|&s| s > at && s < end)
            .chain([at])
            .all(|t| used(t) + count <= total)
    }

    /// The earliest time at or after `not_before` at which `count` processors fit for
    /// `duration` ([`Calendar::fits`]); `None` if they never do (more than the site has, or
    /// held by something that never ends).
    pub fn earliest(
        &self,
        busy: &[(u32, Time)],
        total: u32,
        count: u32,
        duration: Millis,
        not_before: Time,
    ) -> Option<Time> {
        if count > total {
            return None;
        }
        let mut candidates: Vec<Time> = busy
            .iter()
            .map(|b| b.1)
            .chain(self.windows.iter().map(|w| w.end))
            .filter(|&t| t > not_before && t < Time::MAX)
            .chain([not_before])
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        candidates
            .into_iter()
            .find(|&t| self.fits(busy, total, count, t, duration))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(name: &str, start: Time, end: Time, count: u32) -> Window {
        Window {
            name: name.into(),
            start,
            end,
            count,
            claimed: false,
        }
    }

    #[test]
    fn the_earliest_start_is_after_running_jobs_and_between_windows() {
        let mut c = Calendar::default();
        // 8 processors: 4 run until 100; a window of 6 from 200 to 300.
        c.add(window("a", 200, 300, 6));
        let busy = [(4, 100)];
        // 4 processors for 50: now (4 free until 100, then 8, then 2 from 200).
        assert_eq!(c.earliest(&busy, 8, 4, 50, 0), Some(0));
        // 6 for 50: from 100 (the running job's end), done before the window.
        assert_eq!(c.earliest(&busy, 8, 6, 50, 0), Some(100));
        // 6 for 150 would overlap the window: after it, at 300.
        assert_eq!(c.earliest(&busy, 8, 6, 150, 0), Some(300));
        assert_eq!(c.earliest(&busy, 8, 9, 1, 0), None);
        // Something that never ends holds its processors for ever.
        assert_eq!(c.earliest(&[(8, Time::MAX)], 8, 1, 1, 0), None);
    }

    #[test]
    fn unclaimed_windows_are_kept_free_and_counted_idle() {
        let mut c = Calendar::default();
        c.add(window("a", 100, 200, 3));
        c.add(window("b", 150, 250, 2));
        assert_eq!(c.peak_unclaimed(0, 120), 3);
        assert_eq!(c.peak_unclaimed(0, 160), 5);
        assert_eq!(c.peak_unclaimed(200, 300), 2);
        assert_eq!(c.peak_unclaimed(0, 100), 0);
        assert_eq!(c.idle_integral(0, 1_000), 100 * 3 + 100 * 2);
        c.claim("a");
        assert_eq!(c.peak_unclaimed(0, 160), 2);
        assert_eq!(c.idle_integral(0, 1_000), 200);
        c.remove("b");
        c.prune(250);
        assert!(c.windows().is_empty());
    }
}
