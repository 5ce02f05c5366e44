//! The local cluster's advance reservations (issue 31; seed 000 §2.7, what KOALA would have
//! done had its managers allowed it): a calendar of processor slots over time. What holds
//! slots is a running launch (from now until its wall time ends, for ever without one) and
//! a reservation (over its window); the other users' slots are taken off the capacity.
//! An ordinary launch starts only if its slots stay free until its wall time ends, so it
//! never runs into a reservation's window; a launch submitted into a reservation takes the
//! reservation's slots, and not before its start. Queued ordinary launches do not count: a
//! reservation goes ahead of the queue, as in Slurm and Grid Engine.
//!
//! Reservations are kept in the launch log (`Reserved` / `Unreserved` records), so that a
//! new cluster object on the same directory (a restarted server) holds them still. One whose
//! window has passed is deleted.

use super::process::{Log, Record};
use super::{Inner, Phase};

/// One reservation: `count` slots over `[start_ms, end_ms)` (ms since the Unix epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Resv {
    pub count: u32,
    pub start_ms: i64,
    pub end_ms: i64,
}

/// Something that holds `count` slots from `from` until `until` (`None`: for ever).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hold {
    count: u32,
    from: i64,
    until: Option<i64>,
}

impl Hold {
    fn covers(&self, t: i64) -> bool {
        self.from <= t && self.until.is_none_or(|u| t < u)
    }
}

/// The slots the calendar can give: those usable now less the other users'.
fn capacity(inner: &Inner) -> u32 {
    inner.slots.saturating_sub(inner.background)
}

/// What holds slots from `now` on: running launches (one inside a reservation that still
/// exists is the reservation's) and the reservations.
fn holds(inner: &Inner, now: i64) -> Vec<Hold> {
    let mut out = Vec::new();
    for launch in inner.launches.values() {
        let Phase::Running(running) = &launch.phase else {
            continue;
        };
        let r = &launch.request;
        if r.reservation
            .as_ref()
            .is_some_and(|n| inner.reservations.contains_key(n))
        {
            continue;
        }
        out.push(Hold {
            count: r.count,
            from: now,
            until: running.until_ms(),
        });
    }
    out.extend(inner.reservations.values().map(|r| Hold {
        count: r.count,
        from: r.start_ms,
        until: Some(r.end_ms),
    }));
    out
}

fn used(holds: &[Hold], t: i64) -> u32 {
    holds.iter().filter(|h| h.covers(t)).map(|h| h.count).sum()
}

/// Whether `count` more slots are free over `[from, until)`. The use of slots only rises
/// where a hold begins, so it is checked there and at `from`.
fn fits_in(holds: &[Hold], capacity: u32, count: u32, from: i64, until: Option<i64>) -> bool {
    std::iter::once(from)
        .chain(
            holds
                .iter()
                .map(|h| h.from)
                .filter(|&t| t > from && until.is_none_or(|u| t < u)),
        )
        .all(|t| used(holds, t) + count <= capacity)
}

/// Whether `count` slots are free over `[from, until)` on the cluster now.
pub(super) fn fits(inner: &Inner, now: i64, count: u32, from: i64, until: Option<i64>) -> bool {
    fits_in(&holds(inner, now), capacity(inner), count, from, until)
}

/// The earliest time at or after `not_before` (and now) at which `count` slots are free for
/// `duration_ms`: now or when something holding slots ends. `None` if never (launches
/// without a wall time hold too many slots).
pub(super) fn earliest(
    inner: &Inner,
    now: i64,
    count: u32,
    duration_ms: i64,
    not_before: i64,
) -> Option<i64> {
    let holds = holds(inner, now);
    let from = not_before.max(now);
    let mut candidates: Vec<i64> = std::iter::once(from)
        .chain(holds.iter().filter_map(|h| h.until).filter(|&u| u > from))
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    let capacity = capacity(inner);
    candidates
        .into_iter()
        .find(|&t| fits_in(&holds, capacity, count, t, Some(t + duration_ms.max(1))))
}

/// Slots held now by reservations and not used by their launches (for the load reading).
pub(super) fn held_idle(inner: &Inner, now: i64) -> u32 {
    inner
        .reservations
        .iter()
        .filter(|(_, r)| r.start_ms <= now && now < r.end_ms)
        .map(|(name, r)| r.count.saturating_sub(used_by(inner, name)))
        .sum()
}

/// Slots the running launches of reservation `name` take.
pub(super) fn used_by(inner: &Inner, name: &str) -> u32 {
    inner
        .launches
        .values()
        .filter(|l| matches!(l.phase, Phase::Running(_)))
        .filter(|l| l.request.reservation.as_deref() == Some(name))
        .map(|l| l.request.count)
        .sum()
}

/// Delete the reservations whose window has passed.
pub(super) fn expire(inner: &mut Inner, log: &Log, now: i64) {
    let over: Vec<String> = inner
        .reservations
        .iter()
        .filter(|(_, r)| r.end_ms <= now)
        .map(|(n, _)| n.clone())
        .collect();
    for name in over {
        remove(inner, log, &name);
    }
}

/// Delete reservation `name`, if it exists, and log it.
pub(super) fn remove(inner: &mut Inner, log: &Log, name: &str) -> bool {
    if inner.reservations.remove(name).is_none() {
        return false;
    }
    let _ = log.append(&Record::Unreserved {
        name: name.to_owned(),
    });
    true
}

/// The next time something in the calendar begins or ends after `now` (the reaper wakes
/// then to start a reservation's launches, or ordinary ones a window held back).
pub(super) fn next_change(inner: &Inner, now: i64) -> Option<i64> {
    inner
        .reservations
        .values()
        .flat_map(|r| [r.start_ms, r.end_ms])
        .filter(|&t| t > now)
        .min()
}

/// The log's records of the reservations kept (for compaction).
pub(super) fn records(inner: &Inner) -> Vec<Record> {
    inner
        .reservations
        .iter()
        .map(|(name, r)| Record::Reserved {
            name: name.clone(),
            count: r.count,
            start_ms: r.start_ms,
            duration_ms: r.end_ms - r.start_ms,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(count: u32, from: i64, until: Option<i64>) -> Hold {
        Hold { count, from, until }
    }

    #[test]
    fn a_window_is_free_only_if_no_hold_that_begins_inside_it_overflows() {
        // 4 slots; a reservation of 3 over [100, 200).
        let holds = [h(3, 100, Some(200))];
        assert!(fits_in(&holds, 4, 4, 0, Some(100)));
        assert!(!fits_in(&holds, 4, 2, 0, Some(101)));
        assert!(fits_in(&holds, 4, 1, 0, None));
        assert!(!fits_in(&holds, 4, 2, 0, None));
        assert!(fits_in(&holds, 4, 4, 200, Some(300)));
    }

    #[test]
    fn the_earliest_start_is_when_enough_holds_have_ended() {
        let mut inner = Inner {
            slots: 4,
            ..Inner::default()
        };
        inner.reservations.insert(
            "a".into(),
            Resv {
                count: 3,
                start_ms: 100,
                end_ms: 200,
            },
        );
        // 2 slots for 50 ms: before the reservation there is room from 0 to 50.
        assert_eq!(earliest(&inner, 0, 2, 50, 0), Some(0));
        // For 150 ms they would run into it: after it ends.
        assert_eq!(earliest(&inner, 0, 2, 150, 0), Some(200));
        assert_eq!(earliest(&inner, 0, 1, 500, 0), Some(0));
        inner.background = 2;
        assert_eq!(earliest(&inner, 0, 2, 10, 120), Some(200));
        assert_eq!(earliest(&inner, 0, 3, 10, 0), None);
    }
}
