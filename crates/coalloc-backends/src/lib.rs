//! Resource-manager adapters: what the server (never the core) calls to run components on a
//! site. This is the GRAM role of seed 003 §2.2 / §4.3: submit a component, ask for the states
//! of what was submitted, cancel, and report the site's idle and total processors and health
//! for the resource monitor (seed 003 §4.3.2).
//!
//! Every call is blocking and may be slow (a dead Slurm controller takes seconds to fail); the
//! server calls each site's backend from its own worker so that one site never holds up
//! another. A backend makes no scheduling decision: it does what it is told and reports.
//!
//! Backends:
//! - [`local`]: the embedded default, virtual clusters of processor slots on this machine;
//! - `slurm`: one independent Slurm cluster per site;
//! - `gridengine`: one Grid Engine cell per site.

pub mod accounts;
#[cfg(test)]
mod contract;
pub mod files;
pub mod gridengine;
pub mod kind;
pub mod local;
pub mod provider;
mod run;
pub mod site_vars;
pub mod slurm;

use std::path::PathBuf;

/// The prefix of every reservation coalloc makes at a site (the core's
/// `reservation_name`): what [`Backend::reservations`] lists.
pub const RESERVATION_PREFIX: &str = "coalloc-J";

/// Why a backend that cannot reserve refuses to.
pub const NOT_RESERVING: &str = "this site may not make advance reservations";

/// A backend's handle for one submitted component (a local launch's name, a Slurm or Grid
/// Engine job id). It is journaled by the server, so that after a restart the component is found again
/// ("adopted") by this handle.
pub type RemoteId = String;

/// One component to run: everything a resource manager needs.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct SubmitRequest {
    /// The scheduler's launch number (unique for the server's life, also across restarts).
    pub launch: u64,
    /// The job's number and the component's index in it (for names and logs).
    pub job: u64,
    pub component: usize,
    /// Processors.
    pub count: u32,
    /// Processes to start: `count` for job types `multiple` and `mpi`, 1 for `single`.
    pub processes: u32,
    pub executable: String,
    pub arguments: Vec<String>,
    /// The component's environment: the job's own variables, then the runtime's
    /// configuration (`COALLOC_*`, see coalloc-runtime). Per-process variables
    /// (`COALLOC_LOCAL_RANK`, `COALLOC_RANK`) are added by the backend for each process.
    pub environment: Vec<(String, String)>,
    /// Working directory; the backend's default when `None`.
    pub directory: Option<PathBuf>,
    /// Kill it after this many milliseconds.
    pub wall_time_ms: Option<i64>,
    /// Where the processes' standard output and error go (one file each for the component;
    /// processes of one component append to the same files).
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// Run the component as this user (the job's owner; issue 20 item 6), when the server
    /// runs as root with `run_as_owner = true`: the local backend sets the processes' uid
    /// and gid, Slurm's sbatch gets `--uid`/`--gid` (root-only options). `None`: as the
    /// server's own user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Start it inside this advance reservation (issue 31, reserve claiming): the name given
    /// to [`Backend::reserve`] (`sbatch --reservation`, `qsub -ar`). It is not expected to run
    /// before the reservation's start. `None`: an ordinary submission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
}

/// What a resource manager says of one submitted component.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RemoteState {
    /// Accepted, waiting in the site's queue.
    Queued,
    /// Its processes run.
    Running,
    /// Every process ended with exit code 0.
    Finished,
    /// It ended badly by the job's own doing (a process exited non-zero, was killed, hit its
    /// wall time, its command was not found); the reason says which. Counts against the job
    /// only ([`coalloc_core::scheduler::faults`]).
    Failed(String),
    /// The site lost it (a node died, the host stopped answering, someone else cancelled or
    /// preempted it, it could not be started for a reason of the site's); the reason says
    /// which. Counts against the site as well.
    Lost(String),
    /// The resource manager does not know it (any more).
    Unknown,
}

impl RemoteState {
    /// Whether the component has ended, one way or another.
    pub fn is_final(&self) -> bool {
        !matches!(self, RemoteState::Queued | RemoteState::Running)
    }
}

/// The resource monitor's reading of a site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct SiteLoad {
    /// Processors free now.
    pub idle: u32,
    /// Processors in all (up ones).
    pub total: u32,
    /// Processors held by jobs that did not come through coalloc (the "other users").
    pub other: u32,
}

/// Why a backend call failed.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The request cannot be run here at all (too many processors, no such executable...):
    /// the job's fault, not the site's.
    #[error("rejected: {0}")]
    Rejected(String),
    /// The resource manager did not answer or failed; the site may be down.
    #[error("resource manager unavailable: {0}")]
    Unavailable(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A resource-manager adapter for one site.
pub trait Backend: Send + Sync {
    /// Submit a component. Returns once the resource manager has accepted it (not when it
    /// runs).
    fn submit(&self, request: &SubmitRequest) -> Result<RemoteId, BackendError>;
    /// The states of these components, in the same order.
    fn query(&self, ids: &[RemoteId]) -> Result<Vec<RemoteState>, BackendError>;
    /// Cancel (kill) a component; cancelling one that has ended is not an error.
    fn cancel(&self, id: &RemoteId) -> Result<(), BackendError>;
    /// Idle, total and other users' processors; an error means the site is unhealthy.
    fn load(&self) -> Result<SiteLoad, BackendError>;
    /// Whether submissions gain from being made at the same time (a resource manager that
    /// answers slowly: each submission on a thread of its own). `false`: a burst of
    /// submissions is made one after another on one thread and reported together.
    fn submits_in_parallel(&self) -> bool {
        true
    }
    /// Submit a burst of components, in order (what the server does with a job's components
    /// on one site when [`Backend::submits_in_parallel`] is false); one result each, in
    /// the same order. The default submits them one after another; a remote site sends the
    /// burst in one message.
    fn submit_many(&self, requests: &[SubmitRequest]) -> Vec<Result<RemoteId, BackendError>> {
        requests.iter().map(|r| self.submit(r)).collect()
    }
    /// Whether [`Backend::query`] still answers, and at once, when [`Backend::load`] has
    /// failed. A resource manager that is down fails both slowly, so by default the monitor
    /// does not ask for states after a failed load; a remote site whose link is gone answers
    /// from what it knows (and, past its grace period, that its launches are lost).
    fn query_when_unhealthy(&self) -> bool {
        false
    }
    /// Preempt local jobs (other users' work, not coalloc's) until `processors` more are
    /// free, for a global job at its deadline (seed 001 §2.2, GP); returns how many were
    /// freed. The default cannot: a server refuses at startup to run GP with such a site.
    fn kill_local(&self, processors: u32) -> Result<u32, BackendError> {
        Err(BackendError::Rejected(format!(
            "this site cannot preempt local jobs (asked to free {processors} processors)"
        )))
    }
    /// Cancel whatever a submission of launch `launch` (component `component` of job `job`)
    /// left at the resource manager, for a submission whose answer the server never
    /// recorded: it stopped (a crash, `kill -9`) after sending it. A restart calls this for
    /// every such launch before it counts the launch as failed and places the component
    /// again, so that the old submission cannot run beside its replacement. Finding nothing
    /// is not an error. The default does nothing: for backends that cannot find a submission
    /// without its id.
    fn cancel_unrecorded(
        &self,
        job: u64,
        component: usize,
        launch: u64,
    ) -> Result<(), BackendError> {
        let _ = (job, component, launch);
        Ok(())
    }
    /// The site grew or shrank by this many processors: a cloud VM was leased or released
    /// (seed 004 §III-B). Resource managers that see their nodes come and go by themselves
    /// (Slurm with power saving) ignore it, which is the default.
    fn resize(&self, processors: i64) {
        let _ = processors;
    }
    /// The server journaled these launches' end and dropped their job: it will never ask
    /// about them again, and the backend may drop what it keeps of them (the local backend
    /// compacts its launch log, issue 23 item 4). The default keeps everything.
    fn discard(&self, ids: &[RemoteId]) {
        let _ = ids;
    }
    /// Whether this site may make advance reservations (issue 31, reserve claiming; seed 000
    /// §2.7): its manager supports them and coalloc has the rights (a Slurm operator, a Grid
    /// Engine `arusers` member). The core decides from the site's `reserve` setting; a
    /// backend that answers `false` here refuses every reservation call with a reason.
    fn may_reserve(&self) -> bool {
        false
    }
    /// The earliest time (ms since the Unix epoch), at or after `not_before_ms`, at which the
    /// site can hold `count` processors for `duration_ms` (Slurm: a test submission's
    /// estimated start; Grid Engine: `qrsub -a`; the local backend: its own calendar). Makes
    /// nothing at the site.
    fn reserve_earliest(
        &self,
        count: u32,
        duration_ms: i64,
        not_before_ms: i64,
    ) -> Result<i64, BackendError> {
        let _ = (count, duration_ms, not_before_ms);
        Err(BackendError::Rejected(NOT_RESERVING.to_owned()))
    }
    /// Reserve `count` processors from `start_ms` (ms since the Unix epoch) for `duration_ms`
    /// under `name` (`coalloc-J<job>-c<i>-<generation>`, so that it can be found again by
    /// [`Backend::reservations`]). A refusal (the processors are taken, the manager is down)
    /// is an error that says why.
    fn reserve(
        &self,
        name: &str,
        count: u32,
        start_ms: i64,
        duration_ms: i64,
    ) -> Result<(), BackendError> {
        let _ = (name, count, start_ms, duration_ms);
        Err(BackendError::Rejected(NOT_RESERVING.to_owned()))
    }
    /// Delete the reservation `name` if it exists; deleting one that does not is not an error.
    fn unreserve(&self, name: &str) -> Result<(), BackendError> {
        let _ = name;
        Ok(())
    }
    /// The names of the reservations this site holds under coalloc's names (those starting
    /// with [`RESERVATION_PREFIX`]): what a restart compares with its live jobs.
    fn reservations(&self) -> Result<Vec<String>, BackendError> {
        Ok(Vec::new())
    }
    /// An operation on the site's files (input-file transfers, outputs brought back). The
    /// default works on this machine's file system, relative paths under `base` (the
    /// server's state directory): right for every site that shares it; an agent's site
    /// sends it to its agent.
    fn file(
        &self,
        base: &std::path::Path,
        op: files::FileOp,
    ) -> Result<files::FileAnswer, BackendError> {
        files::local(base, op).map_err(BackendError::Rejected)
    }
}
