//! What the Slurm and Grid Engine backends share for advance reservations (issue 31; seed
//! 000 §2.7): instants in the managers' wall-clock formats, the names reservations carry at
//! a site, and the search for the earliest start by trial.
//!
//! **Times.** Both managers read and print wall-clock times in the client's local time zone
//! (Slurm's `starttime=2026-11-28T09:30:37` and `scontrol show reservation`; Grid Engine's
//! `qrsub -a 202611280930.37` and `qrstat`). Every reservation command therefore runs with
//! `TZ=UTC0` in its environment ([`UTC_ENV`]), so that the times written and read here are
//! UTC whatever the host's zone, and are converted to and from ms since the Unix epoch by
//! plain calendar arithmetic ([`civil`], [`from_civil`]). Seconds are the managers'
//! granularity: a start is rounded up to the next whole second (never before the promised
//! instant), a duration up to whole seconds.
//!
//! **Names.** The core names a reservation `coalloc-J<job>-c<i>-<generation>`
//! ([`crate::RESERVATION_PREFIX`]); at the site it carries the server's tag as well,
//! `coalloc-J<job>-c<i>-<generation>-<tag>` ([`site_name`]), as job names do
//! ([`super::script::name_of`]): two coalloc servers on one cluster then never take each
//! other's reservations for their own, and [`core_name`] lists only this server's.
//!
//! **Earliest start** ([`earliest`]). Free processors only grow when something ends (a job
//! reaches its time limit, a reservation its end), so the earliest window of `d` seconds in
//! which `count` processors are free starts either at `not_before` or at one of those ends.
//! Each candidate, in order, is tried by making a real reservation under a probe name and
//! deleting it at once (what the manager accepts is what it would accept a moment later);
//! the first one accepted is the answer. Probes are named like reservations
//! (`coalloc-Jprobe<pid>x<n>-c0-0-<tag>`), so one left behind by a crash is listed by
//! `reservations` and deleted by the server's restart like any reservation of no live job.

use crate::{BackendError, RESERVATION_PREFIX};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The environment of every reservation command: wall-clock times in UTC.
pub const UTC_ENV: (&str, &str) = ("TZ", "UTC0");

/// The most candidate starts [`earliest`] tries before it gives up.
pub const MAX_TRIALS: usize = 24;

/// How far ahead of now the earliest start is at least: a reservation must not start in the
/// past by the time the manager reads it.
pub const LEAD_MS: i64 = 2_000;

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `ms` rounded up to a whole second, in seconds since the epoch.
pub fn ceil_seconds(ms: i64) -> i64 {
    ms.div_euclid(1000) + i64::from(ms.rem_euclid(1000) != 0)
}

/// A duration in whole seconds, rounded up, at least 1.
pub fn duration_seconds(ms: i64) -> i64 {
    ceil_seconds(ms).max(1)
}

/// A UTC calendar instant, to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

/// The UTC calendar instant of `seconds` since the epoch (H. Hinnant's `civil_from_days`).
pub fn civil(seconds: i64) -> Civil {
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400) as u32;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    Civil {
        year,
        month,
        day,
        hour: rest / 3600,
        minute: rest / 60 % 60,
        second: rest % 60,
    }
}

/// Seconds since the epoch of a UTC calendar instant (`days_from_civil`); `None` for a
/// field out of range.
pub fn from_civil(c: Civil) -> Option<i64> {
    if !(1..=12).contains(&c.month) || !(1..=31).contains(&c.day) || c.hour > 23 {
        return None;
    }
    if c.minute > 59 || c.second > 60 {
        return None;
    }
    let y = c.year - i64::from(c.month <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(c.month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(c.day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + i64::from(c.hour * 3600 + c.minute * 60 + c.second))
}

/// `YYYY-MM-DDTHH:MM:SS` (Slurm's and `qrstat -xml`'s form) of `seconds` since the epoch.
pub fn iso_text(seconds: i64) -> String {
    let c = civil(seconds);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SS` (UTC); `None` for anything else
/// (`Unknown`, `N/A`, `NONE`...).
pub fn parse_iso(text: &str) -> Option<i64> {
    let b = text.trim().as_bytes();
    if b.len() != 19 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let n = |from: usize, to: usize| -> Option<u32> {
        let s = std::str::from_utf8(&b[from..to]).ok()?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    from_civil(Civil {
        year: i64::from(n(0, 4)?),
        month: n(5, 7)?,
        day: n(8, 10)?,
        hour: n(11, 13)?,
        minute: n(14, 16)?,
        second: n(17, 19)?,
    })
}

/// A reservation's name at a site: the core's `name` with the server's tag.
pub fn site_name(name: &str, tag: Option<&str>) -> String {
    match tag {
        Some(tag) => format!("{name}-{tag}"),
        None => name.to_owned(),
    }
}

/// The core's name of a reservation the site lists as `listed`, if it is this server's
/// (coalloc's prefix, and this server's tag when it has one).
pub fn core_name(listed: &str, tag: Option<&str>) -> Option<String> {
    if !listed.starts_with(RESERVATION_PREFIX) {
        return None;
    }
    match tag {
        Some(tag) => listed
            .strip_suffix(tag)
            .and_then(|n| n.strip_suffix('-'))
            .map(str::to_owned),
        None => Some(listed.to_owned()),
    }
}

/// A fresh probe name for [`earliest`] (the core's form, so that a restart deletes a probe
/// left behind).
pub fn probe_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{RESERVATION_PREFIX}probe{}x{n}-c0-0", std::process::id())
}

/// The earliest start, in ms since the epoch, at which `try_at` succeeds: tried at
/// `not_before` (no earlier than now + [`LEAD_MS`]), then at each of `ends` after it, in
/// order, whole seconds, at most [`MAX_TRIALS`] in all. `try_at(seconds)` answers
/// `Ok(true)` when a reservation could be made then, `Ok(false)` when the manager refused
/// for want of processors, an error for anything else (which ends the search). `Ok(None)`:
/// no candidate was accepted.
pub fn earliest(
    not_before_ms: i64,
    now_ms: i64,
    ends: impl IntoIterator<Item = i64>,
    mut try_at: impl FnMut(i64) -> Result<bool, BackendError>,
) -> Result<Option<i64>, BackendError> {
    let first = ceil_seconds(not_before_ms.max(now_ms + LEAD_MS));
    let mut candidates: Vec<i64> = ends.into_iter().filter(|s| *s > first).collect();
    candidates.push(first);
    candidates.sort_unstable();
    candidates.dedup();
    for &at in candidates.iter().take(MAX_TRIALS) {
        if try_at(at)? {
            return Ok(Some(at * 1000));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_instants_round_trip() {
        // 2026-11-28T09:30:37Z, as `date -u -d @1795858237` prints it.
        assert_eq!(iso_text(1_795_858_237), "2026-11-28T09:30:37");
        assert_eq!(parse_iso("2026-11-28T09:30:37"), Some(1_795_858_237));
        assert_eq!(iso_text(0), "1970-01-01T00:00:00");
        assert_eq!(iso_text(951_782_400), "2000-02-29T00:00:00");
        assert_eq!(parse_iso("2024-02-29T23:59:59"), Some(1_709_251_199));
        for s in [0, 59, 86_399, 951_782_400, 1_709_251_199, 4_102_444_800] {
            assert_eq!(parse_iso(&iso_text(s)), Some(s), "{s}");
        }
        for bad in [
            "Unknown",
            "N/A",
            "2026-13-01T00:00:00",
            "2026-11-28 09:30:37",
            "",
        ] {
            assert_eq!(parse_iso(bad), None, "{bad}");
        }
    }

    #[test]
    fn starts_round_up_to_whole_seconds() {
        assert_eq!(ceil_seconds(1_795_858_237_000), 1_795_858_237);
        assert_eq!(ceil_seconds(1_795_858_237_001), 1_795_858_238);
        assert_eq!(duration_seconds(0), 1);
        assert_eq!(duration_seconds(60_500), 61);
    }

    #[test]
    fn names_carry_the_tag_and_only_ours_are_listed() {
        let n = "coalloc-J12-c1-3";
        assert_eq!(site_name(n, Some("ab12cd34")), "coalloc-J12-c1-3-ab12cd34");
        assert_eq!(
            core_name("coalloc-J12-c1-3-ab12cd34", Some("ab12cd34")).as_deref(),
            Some(n)
        );
        assert_eq!(
            core_name("coalloc-J12-c1-3-ffffffff", Some("ab12cd34")),
            None
        );
        assert_eq!(core_name("maint", Some("ab12cd34")), None);
        assert_eq!(core_name(n, None).as_deref(), Some(n));
        assert_eq!(core_name("maint", None), None);
        assert!(probe_name().starts_with("coalloc-Jprobe"));
        assert_ne!(probe_name(), probe_name());
    }

    #[test]
    fn the_earliest_start_is_the_first_accepted_candidate() {
        let now = 1_000_000_000;
        let mut tried = Vec::new();
        let got = earliest(now + 10_500, now, [999_000, 1_000_020, 1_000_015], |s| {
            tried.push(s);
            Ok(s >= 1_000_020)
        })
        .unwrap();
        assert_eq!(got, Some(1_000_020_000));
        assert_eq!(tried, vec![1_000_011, 1_000_015, 1_000_020]);
        // Never earlier than now + the lead.
        let got = earliest(0, now, [], |_| Ok(true)).unwrap();
        assert_eq!(got, Some(now + LEAD_MS));
        assert_eq!(earliest(0, now, [], |_| Ok(false)).unwrap(), None);
        let e = earliest(0, now, [], |_| {
            Err(BackendError::Unavailable("down".into()))
        });
        assert!(matches!(e, Err(BackendError::Unavailable(m)) if m == "down"));
    }
}
