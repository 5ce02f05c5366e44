//! The Grid Engine backend: one site is one Grid Engine cell (Son of Grid Engine 8.1.9, as
//! Debian packages it), reached through the ordinary client commands (`qsub`, `qstat`,
//! `qdel`, `qacct`). KOALA-C's clusters spoke Sun Grid Engine (seed 004 §I); like the Slurm
//! backend this plays the GRAM role of seed 003 §4.3 and feeds the resource monitor (seed
//! 003 §4.3.2, which read PBS's `qstat` there).
//!
//! A cell is selected by `SGE_ROOT`, `SGE_CELL` and the qmaster's and execds' ports, given
//! one by one or read from the cell's `settings.sh` ([`GridEngineConfig`]); they are passed
//! in the environment of every command. Job ids count from 1 in every cell, so the server
//! keys jobs by (site, id).
//!
//! - **submit**: `qsub -terse` with the batch script of [`crate::slurm::script`] on standard
//!   input (the component's environment, configuration and barrier URL exported in it, then
//!   its processes), `-pe PE COUNT` for more than one slot, `-l h_rt=SECONDS`, `-wd`, `-o`,
//!   `-e`, `-r n` (a job of a lost host is not rerun behind coalloc's back) and `-w e`, which
//!   makes the qmaster refuse at once a job that could never run in the cell (too many
//!   slots, an unknown parallel environment or queue). Job names carry the server's tag,
//!   `coalloc-{tag}-J..-c..-L..`, as on Slurm.
//! - **query**: one `qstat -f -u '*' -s prsz -xml` for all jobs (pending, running,
//!   suspended, error and finished "zombie" jobs, each running one in its queue instance);
//!   finished jobs and jobs no longer listed are looked up with `qacct -j ID`, which reads
//!   the cell's accounting file (SGE's default `accounting=true`) for the exit status and
//!   the `failed` code: `qstat` keeps no exit status. A finished job whose record is not
//!   written yet (the accounting file is flushed every `accounting_flush_time`) is reported
//!   running until it is. A job in error (`Eqw`) never runs without an operator: it is
//!   reported failed and deleted. A running job on a queue instance in state `u` (its execd
//!   silent for `max_unheard`) is reported failed, since Grid Engine keeps it `r` for ever.
//! - **cancel**: `qdel`, by id, or by the launch's unique name for a launch whose id was
//!   never recorded. Not `qdel -f`: a forced deletion is written to the accounting file as
//!   `failed 0`, `exit_status 0`, a clean end. A job of a host in state `u` stays listed
//!   (`dr`) until its execd answers again and reports it gone; it is reported failed.
//! - **load**: the same `qstat -f -xml`: slots of queue instances without a state flag,
//!   their free slots, and the slots of running jobs not named `coalloc-`.
//!
//! - **reservations** (issue 31): `qrsub`, `qsub -ar`, `qrdel`, `qrstat`, see [`reserve`].
//!
//! Every command runs under [`GridEngineConfig::command_timeout`] and is killed past it
//! (`crate::run`): a stopped qmaster makes `qstat` wait for minutes. The server calls each
//! site's backend from its own worker, so one cell never holds up another.

mod config;
mod parse;
pub mod reserve;
mod state;

pub use config::{settings_env, GridEngineConfig, DEFAULT_COMMAND_TIMEOUT};

use crate::run::{self, Output};
use crate::slurm::script;
use crate::{Backend, BackendError, RemoteId, RemoteState, SiteLoad, SubmitRequest};
use parse::{is_job_id, Qstat};
use state::{no_record, no_such_job, unreachable, Seen};
use std::collections::HashMap;
use std::process::Command;

/// One Grid Engine cell as a [`Backend`].
#[derive(Debug, Clone)]
pub struct GridEngineCell {
    config: GridEngineConfig,
}

impl GridEngineCell {
    pub fn new(config: GridEngineConfig) -> GridEngineCell {
        GridEngineCell { config }
    }

    pub fn config(&self) -> &GridEngineConfig {
        &self.config
    }

    /// The environment selecting the cell: the settings file's, then the fields'.
    fn environment(&self) -> Result<Vec<(String, String)>, BackendError> {
        let c = &self.config;
        let mut env = match &c.settings {
            Some(path) => settings_env(&std::fs::read_to_string(path).map_err(|e| {
                BackendError::Unavailable(format!(
                    "{}: cannot read the cell's settings {}: {e}",
                    c.name,
                    path.display()
                ))
            })?),
            None => Vec::new(),
        };
        let mut set = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                env.push((k.to_string(), v));
            }
        };
        set(
            "SGE_ROOT",
            c.sge_root.as_ref().map(|p| p.display().to_string()),
        );
        set("SGE_CELL", c.cell.clone());
        set("SGE_QMASTER_PORT", c.qmaster_port.map(|p| p.to_string()));
        set("SGE_EXECD_PORT", c.execd_port.map(|p| p.to_string()));
        Ok(env)
    }

    /// Runs `program args` in the cell under the timeout; a command that could not run or
    /// did not end in time is `Unavailable`. The exit status is the caller's to judge.
    fn call(
        &self,
        program: &str,
        args: &[&str],
        stdin: Option<Vec<u8>>,
    ) -> Result<Output, BackendError> {
        self.call_with(program, args, stdin, &[])
    }

    /// [`GridEngineCell::call`] with more environment variables (`TZ` for reservations).
    fn call_with(
        &self,
        program: &str,
        args: &[&str],
        stdin: Option<Vec<u8>>,
        env: &[(&str, &str)],
    ) -> Result<Output, BackendError> {
        let mut c = match &self.config.bin_dir {
            Some(dir) => Command::new(dir.join(program)),
            None => Command::new(program),
        };
        c.args(args)
            .envs(self.environment()?)
            .envs(env.iter().copied())
            .current_dir("/");
        run::run(c, stdin, self.config.command_timeout)
            .map_err(|e| BackendError::Unavailable(format!("{}: {e}", self.config.name)))
    }

    /// `site: program: detail`.
    fn said(&self, program: &str, detail: impl std::fmt::Display) -> String {
        format!("{}: {program}: {detail}", self.config.name)
    }

    /// A failed command's error: unavailable when the qmaster could not be reached,
    /// rejected when it answered "no".
    fn failure(&self, program: &str, out: &Output) -> BackendError {
        let message = out.message();
        if unreachable(&message) || state::site_setting_refused(&message) {
            BackendError::Unavailable(self.said(program, message))
        } else {
            BackendError::Rejected(self.said(program, message))
        }
    }

    fn name_of(&self, job: u64, component: usize, launch: u64) -> String {
        script::name_of(self.config.name_tag.as_deref(), job, component, launch)
    }

    /// `qsub`'s options for a request.
    fn submit_args(&self, r: &SubmitRequest) -> Result<Vec<String>, String> {
        let name = self.name_of(r.job, r.component, r.launch);
        let mut a: Vec<String> = vec![
            "-terse".into(),
            "-N".into(),
            name,
            "-r".into(),
            "n".into(),
            "-w".into(),
            "e".into(),
            "-S".into(),
            "/bin/sh".into(),
            "-j".into(),
            "n".into(),
        ];
        if r.count > 1 {
            let pe = self.config.pe.as_ref().ok_or_else(|| {
                format!(
                    "{} slots need a parallel environment: set `pe` for site {}",
                    r.count, self.config.name
                )
            })?;
            a.extend(["-pe".into(), pe.clone(), r.count.to_string()]);
        }
        if let Some(ms) = r.wall_time_ms {
            let seconds = (ms.max(0) + 999) / 1000;
            a.extend(["-l".into(), format!("h_rt={}", seconds.max(1))]);
        }
        if let Some(q) = &self.config.queue {
            a.extend(["-q".into(), q.clone()]);
        }
        if let Some(dir) = &r.directory {
            a.extend(["-wd".into(), path_arg(dir, "the directory")?]);
        }
        a.extend(["-o".into(), path_arg(&r.stdout, "stdout")?]);
        a.extend(["-e".into(), path_arg(&r.stderr, "stderr")?]);
        Ok(a)
    }

    /// `qdel TARGET` (an id or a job name); a job it does not know is not an error.
    fn delete(&self, target: &str) -> Result<(), BackendError> {
        let out = self.call("qdel", &[target], None)?;
        if out.status.success() || no_such_job(&out.message()) {
            Ok(())
        } else {
            Err(self.failure("qdel", &out))
        }
    }

    /// One `qstat -f -u '*' -s prsz -xml` (`-q QUEUE` when `queue_only`).
    fn qstat(&self, queue_only: bool) -> Result<Qstat, BackendError> {
        let mut args = vec!["-f", "-u", "*", "-s", "prsz", "-xml"];
        if let (true, Some(q)) = (queue_only, &self.config.queue) {
            args.extend(["-q", q]);
        }
        let out = self.call("qstat", &args, None)?;
        if !out.status.success() {
            return Err(self.failure("qstat", &out));
        }
        parse::qstat(&out.stdout).map_err(|e| BackendError::Unavailable(self.said("qstat", e)))
    }

    /// `qacct -j ID`: the job's end, `None` without a record.
    fn accounting(&self, id: &str) -> Result<Option<RemoteState>, BackendError> {
        let out = self.call("qacct", &["-j", id], None)?;
        if !out.status.success() {
            return if no_record(&out.message()) {
                Ok(None)
            } else {
                Err(self.failure("qacct", &out))
            };
        }
        let a = parse::qacct(&out.stdout)
            .map_err(|e| BackendError::Unavailable(self.said("qacct", e)))?;
        Ok(Some(state::finished(&a.failed, a.exit_status)))
    }

    /// The `error reason` lines of `qstat -j ID`, best effort.
    fn error_reason(&self, id: &str) -> String {
        self.call("qstat", &["-j", id], None)
            .ok()
            .map(|out| {
                out.stdout
                    .lines()
                    .filter(|l| l.starts_with("error reason"))
                    .map(|l| l.split_once(':').map_or(l, |(_, r)| r).trim().to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "no reason given".into())
    }
}

/// A path for `qsub -o/-e/-wd`: `[host:]path` lists, so `:` and `,` cannot be written, and
/// `$` would be expanded as a pseudo variable (`$JOB_ID`...).
fn path_arg(path: &std::path::Path, what: &str) -> Result<String, String> {
    let text = path
        .to_str()
        .ok_or_else(|| format!("{what} is not valid UTF-8: {}", path.display()))?;
    if let Some(c) = text.chars().find(|c| matches!(c, ':' | ',' | '$' | '\0')) {
        return Err(format!(
            "{what} {text:?} holds {c:?}, which Grid Engine reads as syntax"
        ));
    }
    Ok(text.to_string())
}

impl Backend for GridEngineCell {
    fn submit(&self, r: &SubmitRequest) -> Result<RemoteId, BackendError> {
        if r.count == 0 {
            return Err(BackendError::Rejected("count must be at least 1".into()));
        }
        let body = script::batch_script(r).map_err(|e| BackendError::Rejected(e.to_string()))?;
        let mut args = self.submit_args(r).map_err(BackendError::Rejected)?;
        if let Some(name) = &r.reservation {
            args.extend(["-ar".into(), self.reservation_id(name)?]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::run::make_output_dirs(r);
        let out = self.call("qsub", &args, Some(body.into_bytes()))?;
        if !out.status.success() {
            return Err(self.failure("qsub", &out));
        }
        parse::qsub_job_id(&out.stdout).map_err(|e| {
            // Accepted but unreadable: leave no orphan behind (the name is the launch's).
            let _ = self.delete(&self.name_of(r.job, r.component, r.launch));
            BackendError::Unavailable(self.said("qsub", e))
        })
    }

    fn query(&self, ids: &[RemoteId]) -> Result<Vec<RemoteState>, BackendError> {
        if !ids.iter().any(|id| is_job_id(id)) {
            return Ok(vec![RemoteState::Unknown; ids.len()]);
        }
        let listed = self.qstat(false)?;
        let by_id: HashMap<&str, &parse::QstatJob> =
            listed.jobs.iter().map(|j| (j.id.as_str(), j)).collect();
        let mut known: HashMap<&str, RemoteState> = HashMap::new();
        for id in ids.iter().map(String::as_str).filter(|id| is_job_id(id)) {
            if known.contains_key(id) {
                continue;
            }
            let state = match by_id.get(id).map(|j| state::seen(&j.state, &j.queue_state)) {
                Some(Seen::State(s)) => s,
                Some(Seen::Error) => {
                    let reason = self.error_reason(id);
                    self.delete(id)?;
                    RemoteState::Lost(format!("Grid Engine put the job in error: {reason}"))
                }
                // Finished: its record, or running until the record is written.
                Some(Seen::Finished) => self.accounting(id)?.unwrap_or(RemoteState::Running),
                None => self.accounting(id)?.unwrap_or(RemoteState::Unknown),
            };
            known.insert(id, state);
        }
        Ok(crate::run::in_order(ids, &known))
    }

    fn cancel(&self, id: &RemoteId) -> Result<(), BackendError> {
        if !is_job_id(id) {
            return Err(BackendError::Rejected(format!(
                "{id:?} is not a Grid Engine job id"
            )));
        }
        self.delete(id)
    }

    fn cancel_unrecorded(
        &self,
        job: u64,
        component: usize,
        launch: u64,
    ) -> Result<(), BackendError> {
        self.delete(&self.name_of(job, component, launch))
    }

    fn may_reserve(&self) -> bool {
        self.config.reserve
    }

    fn reserve_earliest(
        &self,
        count: u32,
        duration_ms: i64,
        not_before_ms: i64,
    ) -> Result<i64, BackendError> {
        self.earliest_start(count, duration_ms, not_before_ms)
    }

    fn reserve(
        &self,
        name: &str,
        count: u32,
        start_ms: i64,
        duration_ms: i64,
    ) -> Result<(), BackendError> {
        self.reserve_at(name, count, start_ms, duration_ms)
    }

    fn unreserve(&self, name: &str) -> Result<(), BackendError> {
        self.delete_reservation(name)
    }

    fn reservations(&self) -> Result<Vec<String>, BackendError> {
        self.our_reservations()
    }

    fn load(&self) -> Result<SiteLoad, BackendError> {
        let q = self.qstat(true)?;
        if q.queues.is_empty() {
            return Err(BackendError::Unavailable(
                self.said("qstat", "no queue instances (unknown queue?)"),
            ));
        }
        // A flag (unknown, alarm, disabled, error, suspended, orphaned...) keeps new jobs
        // out of an instance: its slots are not usable.
        let usable = |state: &str| state.is_empty();
        let mut load = SiteLoad::default();
        for i in q.queues.iter().filter(|i| usable(&i.state)) {
            load.total += i.total;
            load.idle += i.total.saturating_sub(i.used + i.reserved);
        }
        load.other = q
            .jobs
            .iter()
            .filter(|j| j.queue.is_some() && usable(&j.queue_state))
            .filter(|j| !j.name.starts_with(script::NAME_PREFIX))
            .map(|j| j.slots)
            .sum::<u32>()
            .min(load.total);
        Ok(load)
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
