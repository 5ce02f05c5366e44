//! Advance reservations on a Slurm cluster (issue 31; seed 000 §2.7): the five reservation
//! calls of [`crate::Backend`] as `scontrol` commands, and the parser of their answers. Only
//! root, the `SlurmUser` or an operator may create reservations; a site grants that and says
//! so with `reserve = true` in its manager table ([`super::SlurmConfig::reserve`]).
//!
//! - **reserve**: `scontrol create reservation reservationname=NAME
//!   starttime=YYYY-MM-DDTHH:MM:SS endtime=YYYY-MM-DDTHH:MM:SS users=USER corecnt=COUNT
//!   [partitionname=PARTITION]`, times in UTC (`TZ=UTC0`, `slurm::advance`). `endtime` rather
//!   than `duration`, which Slurm keeps in whole minutes (`duration=1-00:00:05` became
//!   `1-00:01:00` on 22.05). `USER` is the backend's own user (the one that runs `sbatch`);
//!   `corecnt` counts cores, which are CPUs on clusters without hyper-threads (the rig's).
//!   Slurm refuses with `Error creating the reservation: Requested nodes are busy` when the
//!   cores are held in that window by running jobs (to their time limits) or other
//!   reservations, or when the cluster has fewer (rejected); a start in the past is
//!   `Invalid time specified`, a name in use `Duplicate reservation name` (rejected).
//! - **submit into it**: `sbatch --reservation=NAME` (or `salloc --reservation=NAME`);
//!   a component run as its owner (`--uid`) first has the owner added to the reservation's
//!   users (`scontrol update reservationname=NAME users+=OWNER`), since it is made for
//!   coalloc's own user; the
//!   job waits `PENDING` with reason `Reservation` until the start and is started by the
//!   next scheduling pass (about 1 s after the start on the rig).
//! - **unreserve**: `scontrol delete reservationname=NAME`; `Requested reservation is
//!   invalid` (none of that name, or it ended: Slurm drops reservations at their end) is
//!   success. A reservation with a job in it is `Requested reservation is in use`: its
//!   jobs are cancelled and the deletion tried again, for up to 10 s.
//! - **reservations**: `scontrol show reservation -o` (`No reservations in the system`
//!   when empty; no `--json` in 22.05's scontrol), the names of this server's.
//! - **reserve_earliest**: trial reservations (`slurm::advance::earliest`) at `not_before` and at
//!   the ends of running jobs (`squeue -h -t R,S -o %e`, their time limits) and of
//!   reservations. `sbatch --test-only` was tried and not used: on 22.05 it answers
//!   `Requested node configuration is not available` for a job that would fit only after a
//!   future reservation ends, instead of a later start.

use super::advance::{self, UTC_ENV};
use super::classify::unreachable;
use super::parse::ParseError;
use super::SlurmCluster;
use crate::run::{self, Output};
use crate::{BackendError, NOT_RESERVING};

/// How long a deletion waits for the jobs in its reservation to end.
const IN_USE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What `scontrol show reservation -o` says of one reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub name: String,
    /// Seconds since the epoch (`None`: not a time Slurm printed as one).
    pub start: Option<i64>,
    pub end: Option<i64>,
}

/// Parses `scontrol show reservation -o` (run with `TZ=UTC0`): one line per reservation,
/// `ReservationName=NAME StartTime=... EndTime=... ...`; `No reservations in the system`
/// is none.
pub fn show_reservations(text: &str) -> Result<Vec<Reservation>, ParseError> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("No reservations") || line.starts_with("CLUSTER:") {
            continue;
        }
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|tok| tok.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        };
        let name = field("ReservationName")
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ParseError {
                what: "scontrol show reservation",
                detail: line.chars().take(200).collect(),
            })?;
        out.push(Reservation {
            name: name.to_owned(),
            start: field("StartTime").and_then(advance::parse_iso),
            end: field("EndTime").and_then(advance::parse_iso),
        });
    }
    Ok(out)
}

/// The end times in `squeue -h -o %e` (run with `TZ=UTC0`), seconds since the epoch;
/// lines that are no time (`Unknown`, `N/A`) are left out.
pub fn squeue_ends(text: &str) -> Vec<i64> {
    text.lines().filter_map(advance::parse_iso).collect()
}

/// Whether a refused `scontrol create reservation` was refused for want of cores in the
/// window (try later) rather than for a reason a later start does not change.
pub fn busy(message: &str) -> bool {
    message.contains("Requested nodes are busy")
}

impl SlurmCluster {
    /// `program ARGS` with wall-clock times in UTC.
    fn call_utc(&self, program: &str, args: &[&str]) -> Result<Output, BackendError> {
        let mut c = self.command(program);
        c.args(args).env(UTC_ENV.0, UTC_ENV.1);
        run::run(c, None, self.config.command_timeout).map_err(|e| self.unavailable_run(e))
    }

    fn scontrol_utc(&self, args: &[&str]) -> Result<Output, BackendError> {
        self.call_utc("scontrol", args)
    }

    /// A refused `scontrol`: unavailable when the controller was not reached, else
    /// rejected with Slurm's first line (its "Note, unless nodes..." lines left out).
    fn scontrol_refused(&self, out: &Output) -> BackendError {
        let message = out.message();
        if unreachable(&message) {
            return self.unavailable("scontrol", message);
        }
        let first = message
            .lines()
            .find(|l| !l.starts_with("Note, ") && !l.starts_with("If no partition"))
            .unwrap_or(&message);
        BackendError::Rejected(self.said("scontrol", first))
    }

    pub(super) fn refuse_unless_reserving(&self) -> Result<(), BackendError> {
        if self.config.reserve {
            Ok(())
        } else {
            Err(BackendError::Rejected(format!(
                "{}: {NOT_RESERVING} (manager setting `reserve = true` allows it)",
                self.config.name
            )))
        }
    }

    /// The reservation's name at this cluster ([`advance::site_name`]).
    pub(super) fn site_reservation(&self, name: &str) -> String {
        advance::site_name(name, self.config.name_tag.as_deref())
    }

    /// `scontrol create reservation` of `count` cores from `start` to `end` (seconds since
    /// the epoch); `Ok(false)` when Slurm answered that the cores are busy.
    fn create(
        &self,
        site_name: &str,
        count: u32,
        start: i64,
        end: i64,
    ) -> Result<bool, BackendError> {
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let user = crate::accounts::user_name(uid).ok_or_else(|| {
            BackendError::Rejected(format!(
                "{}: this process's user has no name to reserve for",
                self.config.name
            ))
        })?;
        let mut args = vec![
            "create".to_owned(),
            "reservation".to_owned(),
            format!("reservationname={site_name}"),
            format!("starttime={}", advance::iso_text(start)),
            format!("endtime={}", advance::iso_text(end)),
            format!("users={user}"),
            format!("corecnt={count}"),
        ];
        if let Some(p) = &self.config.partition {
            args.push(format!("partitionname={p}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.scontrol_utc(&args)?;
        if out.status.success() {
            Ok(true)
        } else if busy(&out.message()) {
            Ok(false)
        } else {
            Err(self.scontrol_refused(&out))
        }
    }

    /// `scontrol show reservation -o`.
    fn listed(&self) -> Result<Vec<Reservation>, BackendError> {
        let out = self.scontrol_utc(&["show", "reservation", "-o"])?;
        if !out.status.success() {
            return Err(self.unavailable("scontrol", out.message()));
        }
        show_reservations(&out.stdout).map_err(|e| self.unavailable("scontrol", e))
    }

    /// When running jobs reach their time limits (`squeue -h -t R,S -o %e`).
    fn job_ends(&self) -> Result<Vec<i64>, BackendError> {
        let mut args = vec!["-h", "-t", "R,S", "-o", "%e"];
        args.extend(self.partition_args());
        let out = self.call_utc("squeue", &args)?;
        if !out.status.success() {
            return Err(self.unavailable("squeue", out.message()));
        }
        Ok(squeue_ends(&out.stdout))
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
                "{}: {count} processors can never be reserved here ({total} up)",
                self.config.name
            )));
        }
        let mut ends = self.job_ends()?;
        ends.extend(self.listed()?.iter().filter_map(|r| r.end));
        let seconds = advance::duration_seconds(duration_ms);
        let probe = self.site_reservation(&advance::probe_name());
        let found = advance::earliest(not_before_ms, advance::now_ms(), ends, |at| {
            let made = self.create(&probe, count, at, at + seconds)?;
            if made {
                self.delete_reservation(&probe)?;
            }
            Ok(made)
        })?;
        found.ok_or_else(|| {
            BackendError::Rejected(format!(
                "{}: no start for {count} processors found in {} tries (the cores are busy)",
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
        let start = advance::ceil_seconds(start_ms);
        let end = advance::ceil_seconds(start_ms + duration_ms.max(1));
        let site_name = self.site_reservation(name);
        if self.create(&site_name, count, start, end.max(start + 1))? {
            Ok(())
        } else {
            Err(BackendError::Rejected(self.said(
                "scontrol",
                format!(
                    "cannot reserve {count} processors from {} to {} UTC: Requested nodes are busy",
                    advance::iso_text(start),
                    advance::iso_text(end)
                ),
            )))
        }
    }

    /// `scontrol delete reservationname=SITE_NAME`; none of that name is success. A
    /// reservation still in use (its component was cancelled a moment ago and has not
    /// ended yet, or a cancel was lost) has every job in it cancelled (only coalloc's run
    /// in its reservations, and a reservation is deleted only once its run is over) and is
    /// deleted again, for up to [`IN_USE_WAIT`].
    pub(super) fn delete_reservation(&self, site_name: &str) -> Result<(), BackendError> {
        let t0 = std::time::Instant::now();
        loop {
            let out = self.scontrol_utc(&["delete", &format!("reservationname={site_name}")])?;
            let message = out.message();
            if out.status.success() || message.contains("Requested reservation is invalid") {
                return Ok(());
            }
            if !message.contains("in use") || t0.elapsed() > IN_USE_WAIT {
                return Err(self.scontrol_refused(&out));
            }
            let jobs = self.call("squeue", &["-h", "-R", site_name, "-o", "%i"], None)?;
            let ids: Vec<&str> = jobs.stdout.split_whitespace().collect();
            if !ids.is_empty() {
                let _ = self.call("scancel", &ids, None)?;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// A component run as its owner (`sbatch --uid`) may use a reservation made for
    /// coalloc's own user only once the owner is among its users: `scontrol update
    /// reservationname=NAME users+=OWNER`, before the component is submitted into it.
    pub(super) fn admit_owner(&self, r: &crate::SubmitRequest) -> Result<(), BackendError> {
        let (Some(name), Some(owner)) = (&r.reservation, &r.owner) else {
            return Ok(());
        };
        let out = self.scontrol_utc(&[
            "update",
            &format!("reservationname={}", self.site_reservation(name)),
            &format!("users+={owner}"),
        ])?;
        if out.status.success() {
            Ok(())
        } else {
            Err(self.scontrol_refused(&out))
        }
    }

    pub(super) fn our_reservations(&self) -> Result<Vec<String>, BackendError> {
        let tag = self.config.name_tag.as_deref();
        let mut names: Vec<String> = self
            .listed()?
            .iter()
            .filter_map(|r| advance::core_name(&r.name, tag))
            .collect();
        names.sort();
        Ok(names)
    }
}

#[cfg(test)]
#[path = "reserve_tests.rs"]
mod tests;
