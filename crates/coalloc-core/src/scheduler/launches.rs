//! The scheduler's index of live launches: which job and component a [`LaunchId`] belongs
//! to, for every report a driver sends about a launch.
//!
//! Launch numbers are given out in increasing order and a launch is indexed when it is
//! numbered, so the index is a deque of slots from the oldest live launch on: a look-up is
//! one subtraction, and slots at the front are dropped as soon as their launches end. Its
//! size is the span from the oldest live launch to the newest (24 bytes a launch), not the
//! number of launches ever made.

use super::api::{JobId, LaunchId};
use std::collections::VecDeque;

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Launches {
    /// The launch number of `slots[0]`.
    base: u64,
    slots: VecDeque<Option<(JobId, usize)>>,
}

impl Launches {
    /// Where launch `launch`'s slot is (it may be past the last one); `None` before the base.
    fn slot(&self, launch: LaunchId) -> Option<usize> {
        usize::try_from(launch.0.checked_sub(self.base)?).ok()
    }

    /// Index launch `launch` (the newest) as component `component` of job `job`.
    pub(super) fn insert(&mut self, launch: LaunchId, job: JobId, component: usize) {
        if self.slots.is_empty() {
            self.base = launch.0;
        }
        let Some(at) = self.slot(launch) else {
            debug_assert!(
                false,
                "launch {} numbered before the index's base",
                launch.0
            );
            return;
        };
        while self.slots.len() <= at {
            self.slots.push_back(None);
        }
        self.slots[at] = Some((job, component));
    }

    /// The job and component of a live launch.
    pub(super) fn get(&self, launch: LaunchId) -> Option<(JobId, usize)> {
        *self.slots.get(self.slot(launch)?)?
    }

    /// Every live launch, by number: `(launch, job, component)`.
    pub(super) fn live(&self) -> impl Iterator<Item = (LaunchId, JobId, usize)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(at, s)| s.map(|(j, c)| (LaunchId(self.base + at as u64), j, c)))
    }

    /// The launch has ended.
    pub(super) fn remove(&mut self, launch: LaunchId) {
        if let Some(slot) = self.slot(launch).and_then(|at| self.slots.get_mut(at)) {
            *slot = None;
        }
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.base += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_are_found_until_they_end_and_the_front_is_dropped() {
        let mut l = Launches::default();
        for n in 1..=4 {
            l.insert(LaunchId(n), 10 + n, 0);
        }
        assert_eq!(l.get(LaunchId(2)), Some((12, 0)));
        l.remove(LaunchId(2));
        assert_eq!(l.get(LaunchId(2)), None);
        assert_eq!(l.slots.len(), 4, "a hole in the middle stays");
        l.remove(LaunchId(1));
        assert_eq!(
            (l.base, l.slots.len()),
            (3, 2),
            "the front goes with its hole"
        );
        assert_eq!(l.get(LaunchId(3)), Some((13, 0)));
        assert_eq!(l.get(LaunchId(1)), None);
        assert_eq!(l.get(LaunchId(99)), None);
        l.remove(LaunchId(3));
        l.remove(LaunchId(4));
        assert!(l.slots.is_empty());
        l.insert(LaunchId(7), 5, 1);
        assert_eq!((l.base, l.get(LaunchId(7))), (7, Some((5, 1))));
    }
}
