//! The Slurm backend: one site is one independent Slurm cluster, reached through the
//! ordinary client commands (`sbatch`, `squeue`, `scontrol`, `scancel`, `sinfo`). It plays
//! the GRAM role of seed 003 (§4.3: the co-allocator submits through it) and feeds the
//! resource monitor (seed 003 §4.3.2), which there read PBS's `qstat`; here the processor
//! counts come from `sinfo` and `squeue`.
//!
//! A cluster is selected by its `slurm.conf` (the `SLURM_CONF` environment variable of every
//! command) or by `-M cluster` (which needs a Slurm database shared by the clusters; the
//! test rig in scripts/slurm/ has none and uses `SLURM_CONF`). Job ids count from 1 on every
//! cluster, so the server must key jobs by (site, id); inside one backend the id is enough.
//!
//! Every command runs under [`SlurmConfig::command_timeout`] and is killed past it (see
//! `crate::run`), so a dead or hung controller costs one site at most that long per command; the
//! server calls each site's backend from its own worker, so calls to one cluster never hold
//! up another. Slurm 22.05 facts relied on here are in scripts/slurm/README.md: `squeue
//! --json` ignores `-j` (so `-o` formats are parsed instead), finished jobs vanish after
//! `MinJobAge`, `sacct` needs accounting (so `scontrol` is the fallback), and batch jobs are
//! submitted with `--no-requeue` so a node failure ends them as `NODE_FAIL` rather than
//! quietly requeueing them.
//!
//! A component is handed to Slurm in one of two ways ([`Launch`], the site's `launch`
//! setting): as a batch job (`sbatch`, the default), or as a resource allocation with one
//! step (`salloc` + `srun`, see [`alloc`]), which Slurm starts inside the request when the
//! CPUs are free instead of at its next scheduling pass.

pub(crate) mod advance;
pub mod alloc;
mod classify;
pub mod parse;
pub mod preempt;
mod query;
pub mod reserve;
pub mod script;
mod state;

use crate::run::{self, Output, RunError};
use crate::{Backend, BackendError, RemoteId, RemoteState, SiteLoad, SubmitRequest};
use classify::{invalid_job_id, unreachable};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// How long one Slurm command may take by default. A dead controller makes clients fail
/// after about `MessageTimeout` (10 s by Slurm's default, 5 s on the rig).
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// How components are handed to Slurm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Launch {
    /// A batch job (`sbatch`): started at the controller's next scheduling pass, up to
    /// about a second after the submission on Slurm 22.05. No process stays on the coalloc
    /// host.
    #[default]
    Batch,
    /// A resource allocation with one step (`salloc` + `srun`, detached): started inside
    /// the request when the CPUs are free; two client processes per component stay on the
    /// coalloc host while it runs ([`alloc`]).
    Allocation,
}

impl Launch {
    /// The setting's words.
    pub const NAMES: [&'static str; 2] = ["batch", "allocation"];

    /// `batch` or `allocation`.
    pub fn from_name(name: &str) -> Option<Launch> {
        match name {
            "batch" => Some(Launch::Batch),
            "allocation" => Some(Launch::Allocation),
            _ => None,
        }
    }
}

/// Where and how to reach one Slurm cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmConfig {
    /// The site's name (for messages).
    pub name: String,
    /// The cluster's `slurm.conf`, passed as `SLURM_CONF` to every command; `None` keeps the
    /// environment's (or `/etc/slurm/slurm.conf`).
    pub slurm_conf: Option<PathBuf>,
    /// `-M cluster` for every command (a multi-cluster Slurm with a shared database).
    pub cluster: Option<String>,
    /// `-p partition` for submissions, and the partition whose CPUs `load` reports.
    pub partition: Option<String>,
    /// The longest any one command may run before it is killed.
    pub command_timeout: Duration,
    /// The directory holding the Slurm commands; `None` searches `PATH`.
    pub bin_dir: Option<PathBuf>,
    /// Batch jobs or allocations.
    pub launch: Launch,
    /// Put in every job name (`coalloc-{tag}-J…`, [`script::name_of`]): the server's own tag,
    /// so that the launches of two coalloc servers on one cluster never share a name (a
    /// restart cancels unrecorded launches by name). `None`: no tag.
    pub name_tag: Option<String>,
    /// The local jobs a global job may preempt at its deadline (GP, seed 001 §2.2); `None`:
    /// none, and a server refuses GP with this site.
    pub preempt: Option<preempt::Preempt>,
    /// Whether coalloc may make advance reservations here (issue 31; the site's manager
    /// setting `reserve = true`, which says its user is an operator): without it every
    /// reservation call is refused with the reason ([`reserve`]).
    pub reserve: bool,
}

impl SlurmConfig {
    /// A configuration using the environment's Slurm, with the default timeout.
    pub fn new(name: impl Into<String>) -> SlurmConfig {
        SlurmConfig {
            name: name.into(),
            ..SlurmConfig::default()
        }
    }
}

impl Default for SlurmConfig {
    fn default() -> SlurmConfig {
        SlurmConfig {
            name: String::new(),
            slurm_conf: None,
            cluster: None,
            partition: None,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            bin_dir: None,
            launch: Launch::default(),
            name_tag: None,
            preempt: None,
            reserve: false,
        }
    }
}

/// One independent Slurm cluster as a [`Backend`].
#[derive(Debug, Clone)]
pub struct SlurmCluster {
    config: SlurmConfig,
    /// The allocation launch's client processes, until they are reaped.
    clients: alloc::Clients,
}

impl SlurmCluster {
    pub fn new(config: SlurmConfig) -> SlurmCluster {
        SlurmCluster {
            config,
            clients: alloc::Clients::default(),
        }
    }

    pub fn config(&self) -> &SlurmConfig {
        &self.config
    }

    /// `program` with the cluster selected (bin dir, `SLURM_CONF`, `-M`).
    fn command(&self, program: &str) -> Command {
        let mut c = match &self.config.bin_dir {
            Some(dir) => Command::new(dir.join(program)),
            None => Command::new(program),
        };
        if let Some(conf) = &self.config.slurm_conf {
            c.env("SLURM_CONF", conf);
        }
        if let Some(cluster) = &self.config.cluster {
            c.arg("-M").arg(cluster);
        }
        c
    }

    /// Runs `program args` under the timeout; a command that could not run or did not end
    /// in time is `Unavailable`. The exit status is the caller's to judge.
    fn call(
        &self,
        program: &str,
        args: &[&str],
        stdin: Option<Vec<u8>>,
    ) -> Result<Output, BackendError> {
        let mut c = self.command(program);
        c.args(args);
        run::run(c, stdin, self.config.command_timeout).map_err(|e| self.unavailable_run(e))
    }

    fn unavailable_run(&self, e: RunError) -> BackendError {
        BackendError::Unavailable(format!("{}: {e}", self.config.name))
    }

    fn unavailable(&self, program: &str, detail: impl std::fmt::Display) -> BackendError {
        BackendError::Unavailable(self.said(program, detail))
    }

    /// `site: program: detail`, without doubling the `program:` that Slurm's own messages
    /// start with.
    fn said(&self, program: &str, detail: impl std::fmt::Display) -> String {
        let detail = detail.to_string();
        if detail.starts_with(&format!("{program}:")) {
            format!("{}: {detail}", self.config.name)
        } else {
            format!("{}: {program}: {detail}", self.config.name)
        }
    }

    fn partition_args(&self) -> Vec<&str> {
        match &self.config.partition {
            Some(p) => vec!["-p", p],
            None => vec![],
        }
    }

    /// The Slurm job name of a launch ([`script::name_of`], with this cluster's tag).
    pub(crate) fn name_of(&self, job: u64, component: usize, launch: u64) -> String {
        script::name_of(self.config.name_tag.as_deref(), job, component, launch)
    }

    /// [`SlurmCluster::name_of`] the request's launch.
    pub(crate) fn job_name(&self, r: &SubmitRequest) -> String {
        self.name_of(r.job, r.component, r.launch)
    }

    /// `scancel --name=NAME`: every job of this launch's name, in any state, whether or not
    /// its id was read (the name is unique to one launch, [`script::name_of`]). No job of
    /// that name is not an error.
    pub(crate) fn cancel_named(&self, name: &str) -> Result<(), BackendError> {
        let out = self.call("scancel", &[&format!("--name={name}")], None)?;
        if out.status.success() {
            return Ok(());
        }
        let message = out.message();
        Err(if unreachable(&message) {
            self.unavailable("scancel", message)
        } else {
            BackendError::Rejected(self.said("scancel", message))
        })
    }

    fn submit_args(&self, r: &SubmitRequest) -> Result<Vec<String>, script::ScriptError> {
        let mut a: Vec<String> = [
            "--parsable",
            "--no-requeue",
            "--export=ALL",
            "--open-mode=append",
        ]
        .map(String::from)
        .into();
        a.extend(script::allocation_options(
            r,
            self.job_name(r),
            self.config.partition.as_deref(),
        ));
        if let Some(dir) = &r.directory {
            let dir = dir.to_str().ok_or_else(|| {
                script::ScriptError::NotUtf8("the directory", dir.display().to_string())
            })?;
            a.extend(["-D".into(), dir.to_string()]);
        }
        a.extend(["-o".into(), script::output_path(&r.stdout, "stdout")?]);
        a.extend(["-e".into(), script::output_path(&r.stderr, "stderr")?]);
        a.extend(script::owner_options(r));
        a.extend(self.reservation_option(r));
        Ok(a)
    }

    /// `--reservation=NAME` for a component submitted into a reservation (issue 31), its
    /// name at this cluster ([`advance::site_name`]).
    pub(crate) fn reservation_option(&self, r: &SubmitRequest) -> Option<String> {
        r.reservation
            .as_ref()
            .map(|name| format!("--reservation={}", self.site_reservation(name)))
    }
}

impl Backend for SlurmCluster {
    fn submit(&self, r: &SubmitRequest) -> Result<RemoteId, BackendError> {
        if r.count == 0 {
            return Err(BackendError::Rejected("count must be at least 1".into()));
        }
        if self.config.launch == Launch::Allocation {
            if let Some(owner) = &r.owner {
                return Err(BackendError::Rejected(format!(
                    "components run as their owner (`{owner}`) with launch = \"batch\" only: salloc has no --uid"
                )));
            }
            return alloc::submit(self, r);
        }
        let reject = |e: script::ScriptError| BackendError::Rejected(e.to_string());
        let body = script::batch_script(r).map_err(reject)?;
        let args = self.submit_args(r).map_err(reject)?;
        self.admit_owner(r)?;
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::run::make_output_dirs(r);
        let out = self.call("sbatch", &args, Some(body.into_bytes()))?;
        if !out.status.success() {
            let message = out.message();
            return Err(if unreachable(&message) {
                self.unavailable("sbatch", message)
            } else {
                BackendError::Rejected(self.said("sbatch", message))
            });
        }
        match parse::sbatch_job_id(&out.stdout) {
            Ok(id) => Ok(id),
            Err(e) => {
                // Accepted but unreadable: do not leave an orphan job behind (the name is
                // unique to this launch).
                let _ = self.cancel_named(&self.job_name(r));
                Err(self.unavailable("sbatch", e))
            }
        }
    }

    fn query(&self, ids: &[RemoteId]) -> Result<Vec<RemoteState>, BackendError> {
        self.clients.reap();
        query::query(self, ids)
    }

    fn cancel_unrecorded(
        &self,
        job: u64,
        component: usize,
        launch: u64,
    ) -> Result<(), BackendError> {
        self.cancel_named(&self.name_of(job, component, launch))
    }

    fn cancel(&self, id: &RemoteId) -> Result<(), BackendError> {
        if !parse::is_job_id(id) {
            return Err(BackendError::Rejected(format!(
                "{id:?} is not a Slurm job id"
            )));
        }
        let out = self.call("scancel", &[id], None)?;
        let message = out.message();
        // scancel of a purged id exits 0 silently; of an ended one it may complain.
        if out.status.success()
            || invalid_job_id(&message)
            || message.contains("already completing or completed")
        {
            Ok(())
        } else {
            Err(self.unavailable("scancel", message))
        }
    }

    fn kill_local(&self, processors: u32) -> Result<u32, BackendError> {
        preempt::kill_local(self, processors)
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
        self.delete_reservation(&self.site_reservation(name))
    }

    fn reservations(&self) -> Result<Vec<String>, BackendError> {
        self.our_reservations()
    }

    fn load(&self) -> Result<SiteLoad, BackendError> {
        self.clients.reap();
        let mut args = vec!["-h", "-N", "-o", "%N|%C"];
        args.extend(self.partition_args());
        let out = self.call("sinfo", &args, None)?;
        if !out.status.success() {
            return Err(self.unavailable("sinfo", out.message()));
        }
        let cpus = parse::sinfo_nodes(&out.stdout)
            .map_err(|e| self.unavailable("sinfo", e))?
            .ok_or_else(|| self.unavailable("sinfo", "no nodes (unknown partition?)"))?;

        let mut args = vec!["-h", "-t", "R", "-o", "%C|%j"];
        args.extend(self.partition_args());
        let out = self.call("squeue", &args, None)?;
        if !out.status.success() {
            return Err(self.unavailable("squeue", out.message()));
        }
        let foreign = parse::foreign_cpus(&out.stdout, script::NAME_PREFIX)
            .map_err(|e| self.unavailable("squeue", e))?;
        let total = cpus.total.saturating_sub(cpus.other);
        Ok(SiteLoad {
            idle: cpus.idle.min(total),
            total,
            other: foreign.min(total),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_slurm_is_unavailable_not_a_panic() {
        let c = SlurmCluster::new(SlurmConfig {
            bin_dir: Some("/nonexistent/slurm/bin".into()),
            ..SlurmConfig::new("nowhere")
        });
        crate::contract::assert_missing_manager_is_unavailable(&c);
    }
}
