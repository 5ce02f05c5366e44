//! Advance reservations in a Grid Engine cell (issue 31; seed 000 §2.7): the five
//! reservation calls of [`crate::Backend`] as `qrsub`, `qrstat` and `qrdel`, and the parsers
//! of their answers. Managers, operators and members of the `arusers` access list may make
//! them; a site grants that and says so with `reserve = true` in its manager table
//! ([`super::GridEngineConfig::reserve`]). Every command runs with `TZ=UTC0`
//! (`slurm::advance`): Grid Engine reads and prints wall-clock times in the client's zone.
//!
//! - **reserve**: `qrsub -N NAME -a CCYYMMDDhhmm.SS -d SECONDS [-pe PE COUNT] [-q QUEUE]`,
//!   the slots asked as a component's `qsub` asks for them (a parallel environment for more
//!   than one). Grid Engine allows several reservations of one name, so a name already
//!   listed is refused first. `advance_reservation: no suitable queues` is the refusal when
//!   the slots are taken in that window (running jobs count to their `h_rt` plus the
//!   scheduler's duration offset, 60 s by default; a job without `h_rt` for ever) or the
//!   cell has too few; `start time is in the past` for a late start (both rejected).
//! - **submit into it**: `qsub -ar ID`, the id of the reservation of that name
//!   (`qrstat`); the job waits `qw` until the start and starts about a second after it on
//!   the rig. A job whose `h_rt` is longer than the reservation is refused by `qsub`.
//! - **unreserve**: `qrdel NAME` (it takes names); `denied: advance_reservation "NAME" does
//!   not exist` is success. It also deletes the jobs running in it.
//! - **reservations**: `qrstat -u '*' -xml` (every user's; an empty `<qrstat>` when none).
//! - **reserve_earliest**: trial reservations (`slurm::advance::earliest`) at `not_before` and at
//!   the ends of running jobs (`qstat -r -s rs -u '*' -xml`: start plus `h_rt`, and that
//!   plus the 60 s offset) and of reservations.

use super::GridEngineCell;
use crate::run::Output;
use crate::slurm::advance::{self, UTC_ENV};
use crate::{BackendError, NOT_RESERVING};

/// Grid Engine's default `DURATION_OFFSET` (sched_conf `params`): the scheduler counts a
/// job as running this much past its `h_rt`.
const DURATION_OFFSET: i64 = 60;

/// One advance reservation of `qrstat -xml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ar {
    pub id: String,
    pub name: String,
    /// `w` waiting, `r` running, `d` deleted, `E` error...
    pub state: String,
    /// Seconds since the epoch.
    pub start: Option<i64>,
    pub end: Option<i64>,
}

fn text<'a>(node: roxmltree::Node<'a, '_>, tag: &str) -> Option<&'a str> {
    node.children()
        .find(|c| c.has_tag_name(tag))
        .and_then(|c| c.text())
        .map(str::trim)
}

/// Parses `qrstat -u '*' -xml` (run with `TZ=UTC0`).
pub fn qrstat(xml: &str) -> Result<Vec<Ar>, String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("qrstat -xml: {e}"))?;
    doc.descendants()
        .filter(|n| n.has_tag_name("ar_summary"))
        .map(|n| {
            let id = text(n, "id").filter(|i| super::parse::is_job_id(i));
            let id = id.ok_or("an ar_summary without a numeric <id>")?;
            Ok(Ar {
                id: id.to_owned(),
                name: text(n, "name").unwrap_or_default().to_owned(),
                state: text(n, "state").unwrap_or_default().to_owned(),
                start: text(n, "start_time").and_then(advance::parse_iso),
                end: text(n, "end_time").and_then(advance::parse_iso),
            })
        })
        .collect()
}

/// Seconds of a Grid Engine time value: `150` or `0:2:30`.
fn seconds(text: &str) -> Option<i64> {
    text.trim().split(':').try_fold(0i64, |acc, part| {
        let part = part.trim();
        (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse::<i64>().ok().map(|v| acc * 60 + v))?
    })
}

/// When the running jobs of `qstat -r -s rs -u '*' -xml` (run with `TZ=UTC0`) end, as the
/// scheduler counts them: start plus `h_rt`, and that plus `DURATION_OFFSET` (60 s). Jobs
/// without `h_rt` never end.
pub fn job_ends(xml: &str) -> Result<Vec<i64>, String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("qstat -xml: {e}"))?;
    let mut ends = Vec::new();
    for job in doc.descendants().filter(|n| n.has_tag_name("job_list")) {
        let start = text(job, "JAT_start_time").and_then(advance::parse_iso);
        let limit = job
            .children()
            .find(|c| c.has_tag_name("hard_request") && c.attribute("name") == Some("h_rt"))
            .and_then(|c| c.text())
            .and_then(seconds);
        if let (Some(start), Some(limit)) = (start, limit) {
            ends.extend([start + limit, start + limit + DURATION_OFFSET]);
        }
    }
    Ok(ends)
}

/// Whether a refused `qrsub` was refused for want of slots in the window (try later).
pub fn busy(message: &str) -> bool {
    message.contains("no suitable queues")
}

/// `qrdel`'s answer for a reservation the qmaster does not know.
fn no_such_ar(message: &str) -> bool {
    message.contains("does not exist")
}

/// `CCYYMMDDhhmm.SS` (`qrsub -a`) of `seconds` since the epoch (UTC).
pub fn qrsub_time(seconds: i64) -> String {
    let c = advance::civil(seconds);
    format!(
        "{:04}{:02}{:02}{:02}{:02}.{:02}",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

impl GridEngineCell {
    fn refuse_unless_reserving(&self) -> Result<(), BackendError> {
        if self.config.reserve {
            Ok(())
        } else {
            Err(BackendError::Rejected(format!(
                "{}: {NOT_RESERVING} (manager setting `reserve = true` allows it)",
                self.config.name
            )))
        }
    }

    /// The reservation's name in this cell ([`advance::site_name`]).
    fn site_reservation(&self, name: &str) -> String {
        advance::site_name(name, self.config.name_tag.as_deref())
    }

    /// `program args` with wall-clock times in UTC; a failure is judged by
    /// [`GridEngineCell::failure`].
    fn call_utc(&self, program: &str, args: &[&str]) -> Result<Output, BackendError> {
        let out = self.call_with(program, args, None, &[UTC_ENV])?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(self.failure(program, &out))
        }
    }

    /// Every reservation in the cell (`qrstat -u '*' -xml`).
    fn listed(&self) -> Result<Vec<Ar>, BackendError> {
        let out = self.call_utc("qrstat", &["-u", "*", "-xml"])?;
        qrstat(&out.stdout).map_err(|e| BackendError::Unavailable(self.said("qrstat", e)))
    }

    /// `qrsub` of `count` slots from `start` for `seconds`; `Ok(false)` when the slots are
    /// taken then.
    fn qrsub(
        &self,
        site_name: &str,
        count: u32,
        start: i64,
        seconds: i64,
    ) -> Result<bool, BackendError> {
        let (at, length) = (qrsub_time(start), seconds.to_string());
        let mut args = vec!["-N", site_name, "-a", &at, "-d", &length];
        let count_text = count.to_string();
        if count > 1 {
            let pe = self.config.pe.as_deref().ok_or_else(|| {
                BackendError::Rejected(format!(
                    "{count} slots need a parallel environment: set `pe` for site {}",
                    self.config.name
                ))
            })?;
            args.extend(["-pe", pe, &count_text]);
        }
        if let Some(q) = &self.config.queue {
            args.extend(["-q", q]);
        }
        let out = self.call_with("qrsub", &args, None, &[UTC_ENV])?;
        if out.status.success() {
            Ok(true)
        } else if busy(&out.message()) {
            Ok(false)
        } else {
            Err(self.failure("qrsub", &out))
        }
    }

    /// `qrdel SITE_NAME`; none of that name is success.
    fn qrdel(&self, site_name: &str) -> Result<(), BackendError> {
        let out = self.call_with("qrdel", &[site_name], None, &[UTC_ENV])?;
        if out.status.success() || no_such_ar(&out.message()) {
            Ok(())
        } else {
            Err(self.failure("qrdel", &out))
        }
    }

    /// The id of the reservation `name` (the core's name), for `qsub -ar`.
    pub(super) fn reservation_id(&self, name: &str) -> Result<String, BackendError> {
        let site_name = self.site_reservation(name);
        self.listed()?
            .into_iter()
            .find(|ar| ar.name == site_name)
            .map(|ar| ar.id)
            .ok_or_else(|| {
                BackendError::Rejected(self.said(
                    "qrstat",
                    format!("no advance reservation named {site_name}"),
                ))
            })
    }

    pub(super) fn earliest_start(
        &self,
        count: u32,
        duration_ms: i64,
        not_before_ms: i64,
    ) -> Result<i64, BackendError> {
        self.refuse_unless_reserving()?;
        let total = crate::Backend::load(self)?.total;
        if count == 0 || count > total {
            return Err(BackendError::Rejected(format!(
                "{}: {count} slots can never be reserved here ({total} usable)",
                self.config.name
            )));
        }
        let out = self.call_utc("qstat", &["-r", "-s", "rs", "-u", "*", "-xml"])?;
        let mut ends =
            job_ends(&out.stdout).map_err(|e| BackendError::Unavailable(self.said("qstat", e)))?;
        ends.extend(self.listed()?.iter().filter_map(|ar| ar.end));
        let seconds = advance::duration_seconds(duration_ms);
        let probe = self.site_reservation(&advance::probe_name());
        let found = advance::earliest(not_before_ms, advance::now_ms(), ends, |at| {
            let made = self.qrsub(&probe, count, at, seconds)?;
            if made {
                self.qrdel(&probe)?;
            }
            Ok(made)
        })?;
        found.ok_or_else(|| {
            BackendError::Rejected(format!(
                "{}: no start for {count} slots found in {} tries (no suitable queues)",
                self.config.name,
                advance::MAX_TRIALS
            ))
        })
    }

    pub(super) fn reserve_at(
        &self,
        name: &str,
        count: u32,
        start_ms: i64,
        duration_ms: i64,
    ) -> Result<(), BackendError> {
        self.refuse_unless_reserving()?;
        if count == 0 {
            return Err(BackendError::Rejected("count must be at least 1".into()));
        }
        let site_name = self.site_reservation(name);
        if self.listed()?.iter().any(|ar| ar.name == site_name) {
            return Err(BackendError::Rejected(self.said(
                "qrsub",
                format!("a reservation named {site_name} exists already"),
            )));
        }
        let start = advance::ceil_seconds(start_ms);
        let seconds = advance::duration_seconds(duration_ms);
        if self.qrsub(&site_name, count, start, seconds)? {
            Ok(())
        } else {
            Err(BackendError::Rejected(self.said(
                "qrsub",
                format!(
                    "cannot reserve {count} slots from {} UTC for {seconds} s: no suitable queues",
                    advance::iso_text(start)
                ),
            )))
        }
    }

    pub(super) fn delete_reservation(&self, name: &str) -> Result<(), BackendError> {
        self.qrdel(&self.site_reservation(name))
    }

    pub(super) fn our_reservations(&self) -> Result<Vec<String>, BackendError> {
        let tag = self.config.name_tag.as_deref();
        let mut names: Vec<String> = self
            .listed()?
            .iter()
            .filter_map(|ar| advance::core_name(&ar.name, tag))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }
}

#[cfg(test)]
#[path = "reserve_tests.rs"]
mod tests;
