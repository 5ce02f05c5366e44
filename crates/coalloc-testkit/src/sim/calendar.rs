//! A fake manager's advance reservations (issue 31), as the local backend's calendar
//! (`coalloc-backends`' `local/calendar.rs`) keeps them: processor slots over time. What
//! holds slots is a running launch (from now until its wall time ends; one inside a
//! reservation whose window is on is the window's) and a reservation (over its window);
//! the other users' processors are off the capacity. The earliest start for a reservation
//! is now or when something holding slots ends; a reservation is refused when its window's
//! slots are taken (by other reservations, or by running launches that will not end before
//! it, by their wall times); an ordinary launch starts only where its slots stay free for
//! its wall time ([`Rm::schedule`]); deleting a reservation ends the launches still in it.
//! A manager whose plan does not let it reserve refuses to, as a backend that may not does
//! (`coalloc_backends::NOT_RESERVING`). Calls to a manager that does not answer fail.

use super::rm::{Rm, St};
use coalloc_backends::{BackendError, NOT_RESERVING};
use coalloc_core::model::Time;

/// One reservation: `count` processors over `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub count: u32,
    pub start: Time,
    pub end: Time,
}

/// Something that holds `count` slots over `[from, until)`.
#[derive(Debug, Clone, Copy)]
struct Hold {
    count: u32,
    from: Time,
    until: Time,
}

fn used(holds: &[Hold], t: Time) -> u32 {
    holds
        .iter()
        .filter(|h| h.from <= t && t < h.until)
        .map(|h| h.count)
        .sum()
}

impl Rm {
    /// The slots the calendar can give: the site's less the other users'.
    fn capacity(&self) -> u32 {
        self.plan.processors - self.plan.other
    }

    /// What holds slots from `now` on. A launch past its wall time holds a moment more
    /// (it still runs).
    fn holds(&self, now: Time) -> Vec<Hold> {
        let mut out: Vec<Hold> = self
            .windows
            .values()
            .map(|w| Hold {
                count: w.count,
                from: w.start,
                until: w.end,
            })
            .collect();
        for l in self.launches.values() {
            let St::Running { since } = l.state else {
                continue;
            };
            let until = (since + l.wall).max(now + 1);
            // Inside its window, the window holds its slots; past it, the launch.
            let from = match l
                .reservation
                .as_ref()
                .and_then(|(n, _)| self.windows.get(n))
            {
                Some(w) => w.end.max(now),
                None => now,
            };
            if from < until {
                out.push(Hold {
                    count: l.count,
                    from,
                    until,
                });
            }
        }
        out
    }

    /// Whether `count` more slots are free over `[from, until)` (the use of slots only
    /// rises where a hold begins: checked there and at `from`).
    pub(super) fn fits(&self, now: Time, count: u32, from: Time, until: Time) -> bool {
        if self.windows.is_empty() && from <= now {
            // No window: what runs now is all that holds (the plans without reservations).
            return self.used() + count <= self.capacity();
        }
        let holds = self.holds(now);
        let cap = self.capacity();
        std::iter::once(from)
            .chain(
                holds
                    .iter()
                    .map(|h| h.from)
                    .filter(|&t| t > from && t < until),
            )
            .all(|t| used(&holds, t) + count <= cap)
    }

    /// Slots the running launches of reservation `name` take.
    pub(super) fn used_by(&self, name: &str) -> u32 {
        self.launches
            .values()
            .filter(|l| l.running())
            .filter(|l| l.reservation.as_ref().is_some_and(|(n, _)| n == name))
            .map(|l| l.count)
            .sum()
    }

    /// Slots held now by reservations and not used by their launches (off the load's idle).
    pub(super) fn held_idle(&self, now: Time) -> u32 {
        self.windows
            .iter()
            .filter(|(_, w)| w.start <= now && now < w.end)
            .map(|(name, w)| w.count.saturating_sub(self.used_by(name)))
            .sum()
    }

    /// Up, and allowed to reserve.
    fn reserving(&self, now: Time) -> Result<(), BackendError> {
        if !self.up(now) {
            return Err(Rm::down_error());
        }
        if self.plan.reserve.is_none() {
            return Err(BackendError::Rejected(NOT_RESERVING.to_owned()));
        }
        Ok(())
    }

    /// The earliest time at or after `not_before` (and now) at which `count` slots are free
    /// for `duration`.
    pub fn reserve_earliest(
        &self,
        now: Time,
        count: u32,
        duration: Time,
        not_before: Time,
    ) -> Result<Time, BackendError> {
        self.reserving(now)?;
        let from = not_before.max(now);
        let mut candidates: Vec<Time> = std::iter::once(from)
            .chain(
                self.holds(now)
                    .iter()
                    .map(|h| h.until)
                    .filter(|&u| u > from),
            )
            .collect();
        candidates.sort_unstable();
        candidates
            .into_iter()
            .find(|&t| self.fits(now, count, t, t + duration.max(1)))
            .ok_or_else(|| {
                BackendError::Unavailable(format!("{count} processors are never free here"))
            })
    }

    /// Reserve `count` slots over `[start, start + duration)` under `name`; `refuse` says the
    /// manager fails it (drawn by the caller). The same name again is the same reservation.
    pub fn reserve(
        &mut self,
        now: Time,
        name: &str,
        count: u32,
        start: Time,
        duration: Time,
        refuse: bool,
    ) -> Result<(), BackendError> {
        self.reserving(now)?;
        if refuse {
            return Err(BackendError::Unavailable(
                "scontrol: slurmctld refused".into(),
            ));
        }
        if self.windows.contains_key(name) {
            return Ok(());
        }
        let end = start + duration.max(1);
        if !self.fits(now, count, start.max(now), end) {
            return Err(BackendError::Unavailable(format!(
                "the {count} processors are taken over the window"
            )));
        }
        let w = Window { count, start, end };
        self.windows.insert(name.to_owned(), w);
        self.made += 1;
        Ok(())
    }

    /// Delete reservation `name` if it exists, ending the launches still in it; taken only
    /// when cancels are (a busy controller fails both).
    pub fn unreserve(&mut self, now: Time, name: &str) -> Result<(), BackendError> {
        self.cancels_taken(now)?;
        if self.windows.remove(name).is_some() {
            for l in self.launches.values_mut() {
                let inside = l.reservation.as_ref().is_some_and(|(n, _)| n == name);
                if inside && !l.ended() {
                    l.state = St::Cancelled;
                }
            }
        }
        Ok(())
    }

    /// The names of the reservations held (all coalloc's: no one else reserves here).
    pub fn reservations(&self, now: Time) -> Result<Vec<String>, BackendError> {
        if !self.up(now) {
            return Err(Rm::down_error());
        }
        Ok(self.windows.keys().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::{ReservePlan, SitePlan};
    use super::*;
    use coalloc_backends::SubmitRequest;

    fn rm() -> Rm {
        Rm::new(SitePlan {
            name: "s0".into(),
            processors: 4,
            other: 0,
            pending: (0, 0),
            refuse: 0,
            lose: 0,
            lost_answer: 0,
            agent: None,
            reserve: Some(ReservePlan::default()),
        })
    }

    fn req(launch: u64, count: u32, wall: i64, reservation: Option<&str>) -> SubmitRequest {
        SubmitRequest {
            launch,
            count,
            processes: 1,
            arguments: vec!["100".into()],
            wall_time_ms: Some(wall),
            reservation: reservation.map(str::to_owned),
            ..SubmitRequest::default()
        }
    }

    #[test]
    fn a_reservation_waits_for_running_launches_and_holds_its_window() {
        let mut rm = rm();
        rm.submit(0, &req(1, 3, 1_000, None), 0, false, false)
            .unwrap();
        assert_eq!(rm.schedule(0), vec![1]);
        // 3 of 4 run until 1000: two slots only then.
        assert_eq!(rm.reserve_earliest(0, 2, 500, 0).unwrap(), 1_000);
        assert_eq!(rm.reserve_earliest(0, 1, 500, 0).unwrap(), 0);
        assert!(rm.reserve(0, "a", 2, 500, 500, false).is_err(), "taken");
        rm.reserve(0, "a", 2, 1_000, 500, false).unwrap();
        // An ordinary launch that would run into the window waits, even once the running
        // one ended.
        rm.submit(0, &req(2, 3, 2_000, None), 0, false, false)
            .unwrap();
        assert_eq!(rm.schedule(0), Vec::<u64>::new());
        // One into the window waits for its start, then runs on its slots.
        rm.submit(0, &req(3, 2, 500, Some("a")), 0, false, false)
            .unwrap();
        rm.exit(1, true);
        assert_eq!(rm.schedule(999), Vec::<u64>::new());
        assert_eq!(rm.next_ready(999), Some(1_000));
        assert_eq!(rm.schedule(1_000), vec![3]);
        assert_eq!(rm.reservations(1_000).unwrap(), vec!["a".to_string()]);
        assert_eq!(rm.load(1_000).unwrap().idle, 2);
        // Deleting it ends the launch in it.
        rm.unreserve(1_100, "a").unwrap();
        assert_eq!(rm.launches[&3].state, St::Cancelled);
        assert!(rm.reservations(1_100).unwrap().is_empty());
        // The window gone, the ordinary launch runs.
        assert_eq!(rm.schedule(1_100), vec![2]);
        assert!(rm
            .submit(1_100, &req(4, 1, 10, Some("a")), 0, false, false)
            .is_err());
    }

    #[test]
    fn a_manager_that_may_not_reserve_or_is_down_refuses() {
        let mut rm = rm();
        rm.down_until = 10;
        assert!(rm.reserve_earliest(0, 1, 10, 0).is_err());
        assert!(rm.reservations(0).is_err());
        assert!(rm.unreserve(0, "x").is_err());
        rm.plan.reserve = None;
        assert!(matches!(
            rm.reserve(10, "a", 1, 10, 10, false),
            Err(BackendError::Rejected(_))
        ));
        assert_eq!(rm.reservations(10).unwrap(), Vec::<String>::new());
    }
}
