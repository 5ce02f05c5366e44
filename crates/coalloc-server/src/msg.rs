//! What crosses the driver's edge, below it so that nothing imports up into the driver:
//! the requests of the HTTP API (each with a one-shot reply) and the reports of the sites
//! (both come in as [`Msg`]s), and [`SiteLink`], the small trait the driver's calls to a
//! site go out through (DESIGN.md, "Sites apart", habit 3): [`crate::sites::SiteWorker`]
//! carries them to a resource manager on threads, [`crate::link::remote::AgentLink`] puts
//! them in an agent site's link for the hub's pump; the simulation harness takes them as
//! they are sent.

pub use crate::views::BarrierAnswer;
use crate::views::{JobList, JobView, SitesView};
use coalloc_backends::{BackendError, RemoteState, SiteLoad};
use coalloc_core::model::{Component, Job};
use tokio::sync::oneshot;

/// A reply channel.
pub type Reply<T> = oneshot::Sender<T>;

/// A request from the API.
pub enum Request {
    /// Submit jobs; one answer per job (its number, or why it was refused).
    Submit {
        jobs: Vec<Job>,
        /// Each job's number and whether it waits for admission (the queue was full).
        reply: Reply<Vec<Result<(u64, bool), String>>>,
    },
    /// Submit one job as an array: a copy per index of `indexes` (inclusive); the first
    /// copy's number.
    SubmitArray {
        job: Box<Job>,
        indexes: (u32, u32),
        reply: Reply<Result<u64, String>>,
    },
    Cancel {
        job: u64,
        reply: Reply<Result<(), ApiError>>,
    },
    /// Cancel the elements of an array (those with indexes in `indexes`, else all); the
    /// jobs cancelled.
    CancelArray {
        first: u64,
        indexes: Option<(u32, u32)>,
        reply: Reply<Result<Vec<u64>, ApiError>>,
    },
    /// The owner's commit of a job held at the barrier.
    Commit {
        job: u64,
        reply: Reply<Result<(), ApiError>>,
    },
    Edit {
        job: u64,
        edit: EditRequest,
        reply: Reply<Result<(), ApiError>>,
    },
    /// A page of the jobs in memory.
    Jobs {
        filter: crate::listing::JobFilter,
        reply: Reply<JobList>,
    },
    Job {
        job: u64,
        reply: Reply<Option<JobView>>,
    },
    Sites {
        reply: Reply<SitesView>,
    },
    /// Is this the job's secret?
    Secret {
        job: u64,
        secret: String,
        reply: Reply<Result<(), ApiError>>,
    },
    /// A process checks in at the barrier (or, `ok: false`, reports a failed start);
    /// `hold`: a closed barrier's answer waits for the job to commit or abort.
    Barrier {
        job: u64,
        /// The job's secret the caller presented, checked first (`None`: the server's
        /// token, checked by the API).
        secret: Option<String>,
        launch: u64,
        local_rank: u32,
        ok: bool,
        reason: Option<String>,
        hold: bool,
        reply: Reply<Result<BarrierAnswer, ApiError>>,
    },
    KvPut {
        job: u64,
        key: String,
        value: String,
        reply: Reply<Result<(), ApiError>>,
    },
    /// A value of the job's store; `wait`: a key not yet put is answered by its put.
    KvGet {
        job: u64,
        key: String,
        wait: bool,
        reply: Reply<Result<Option<String>, ApiError>>,
    },
    SetUsable {
        site: String,
        usable: bool,
        reply: Reply<Result<(), ApiError>>,
    },
    SiteControl {
        site: String,
        control: coalloc_core::scheduler::sites::SiteControl,
        reason: String,
        reply: Reply<Result<(), ApiError>>,
    },
    /// Register a replica (seed 000 §2.3); `stat` is the file's size and checksum when the
    /// caller knows them (the API reads a file it can see), `read_here` whether it read
    /// them on this machine.
    FileRegister {
        site: String,
        name: String,
        path: String,
        stat: Option<crate::transfer::FileStat>,
        read_here: bool,
        reply: Reply<Result<crate::views::ReplicaView, ApiError>>,
    },
    /// Remove the replicas of `name` (on `site` only, when given).
    FileRemove {
        name: String,
        site: Option<String>,
        reply: Reply<Result<Vec<crate::views::ReplicaView>, ApiError>>,
    },
    /// The catalog (of `name` only, when given).
    Files {
        name: Option<String>,
        reply: Reply<Vec<crate::views::ReplicaView>>,
    },
    /// Bring the metrics that are states up to date (before a scrape).
    RefreshMetrics {
        reply: Reply<()>,
    },
}

/// An edit as the API takes it.
pub enum EditRequest {
    Add(Component),
    Delete(usize),
    Substitute(usize, Component),
}

/// A refused request: an HTTP status and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(404, message)
    }
    pub fn bad(message: impl Into<String>) -> ApiError {
        ApiError::new(400, message)
    }
}

/// A report from a site worker.
pub enum Report {
    /// Site `site`'s resource manager took (or refused) a launch.
    Submitted {
        site: usize,
        launch: u64,
        result: Result<String, BackendError>,
    },
    /// Several launches submitted one after another (in that order), reported at once so
    /// that the driver journals them in one turn.
    /// The site's number first.
    SubmittedMany(usize, Vec<(u64, Result<String, BackendError>)>),
    /// A provider leased a VM (its node's name) or failed to.
    Leased {
        site: usize,
        vm: u64,
        result: Result<String, String>,
    },
    /// A provider released a VM (a failed release is retried by the worker).
    Released { site: usize, vm: u64 },
    /// A site's agent link went silent or closed (and no newer connection is up): the core
    /// hears "site disconnected", and "lost" past the site's grace.
    AgentGone { site: usize },
    /// A site's agent connected; it holds these launches at its resource manager.
    AgentBack {
        site: usize,
        held: Vec<crate::link::proto::HeldLaunch>,
    },
    /// A launch's stage-in ended (`driver/staging.rs`): submit it, or fail it.
    Staged {
        launch: u64,
        request: Box<coalloc_backends::SubmitRequest>,
        result: Result<(), String>,
    },
    /// An agent read a file it is to register (size and checksum), or could not.
    Statted {
        site: String,
        name: String,
        path: String,
        result: Result<crate::transfer::FileStat, String>,
        reply: Reply<Result<crate::views::ReplicaView, ApiError>>,
    },
    /// A transfer's progress or end.
    Transfer(crate::transfer::TransferReport),
    /// What came of a reservation call ([`SiteCall::Reserve`]).
    Reservation(ReserveReport),
    /// A poll of the site: its load, and the states of the launches asked about.
    Polled {
        site: usize,
        load: Result<SiteLoad, String>,
        states: Vec<(u64, RemoteState)>,
    },
}

/// Everything the driver thread receives.
pub enum Msg {
    Api(Request),
    Site(Report),
    Stop,
}

/// A call of the driver to one site; what comes of it comes back later as a [`Report`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiteCall {
    /// Submit a launch ([`Report::Submitted`] or [`Report::SubmittedMany`]).
    Submit(Box<coalloc_backends::SubmitRequest>),
    /// Cancel a launch the resource manager took.
    Cancel(String),
    /// Cancel whatever a submission of this launch left at the resource manager, when the
    /// server does not know whether it took it (it stopped, or heard no answer).
    CancelUnrecorded {
        job: u64,
        component: usize,
        launch: u64,
    },
    /// Report this launch's state with every poll from now on.
    Watch { launch: u64, remote: String },
    /// Stop reporting this launch's state.
    Forget(u64),
    /// Preempt local jobs until this many more processors are free (GP, seed 001 §2.2).
    KillLocal(u32),
    /// The launch's job is gone: the site may drop what it keeps of the launch.
    Discard(String),
    /// Lease a VM through the site's provider ([`Report::Leased`]).
    Lease(u64),
    /// Release a VM through the site's provider ([`Report::Released`]).
    Release { vm: u64, node: String },
    /// An advance-reservation call (issue 31, reserve claiming): [`Report::Reservation`].
    Reserve(ReserveCall),
}

/// An advance-reservation call to a site's backend (issue 31; the core's
/// `Command::ReserveQuery`, `Reserve` and `Unreserve`, and the restart's look for what the
/// site holds). Times are ms since the Unix epoch, the server core's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReserveCall {
    /// The earliest start for `count` processors for `duration_ms` at or after
    /// `not_before_ms`: [`ReserveReport::Offer`].
    Earliest {
        reservation: u64,
        count: u32,
        duration_ms: i64,
        not_before_ms: i64,
    },
    /// Make reservation `name`: [`ReserveReport::Made`].
    Make {
        reservation: u64,
        name: String,
        count: u32,
        start_ms: i64,
        duration_ms: i64,
    },
    /// Delete reservation `name` (tried again while the manager cannot be reached); no
    /// report.
    Delete(String),
    /// The reservations the site holds under coalloc's names: [`ReserveReport::Found`].
    List,
}

/// What a site said to a [`ReserveCall`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReserveReport {
    Offer {
        reservation: u64,
        earliest: Result<i64, String>,
    },
    Made {
        reservation: u64,
        result: Result<(), String>,
    },
    Found {
        site: usize,
        names: Result<Vec<String>, String>,
    },
}

/// The driver's link to one site: [`SiteLink::send`] returns at once. The other methods
/// are shorthands for its calls.
pub trait SiteLink: Send {
    fn send(&self, call: SiteCall);

    fn submit(&self, request: coalloc_backends::SubmitRequest) {
        self.send(SiteCall::Submit(Box::new(request)));
    }
    fn cancel(&self, remote: String) {
        self.send(SiteCall::Cancel(remote));
    }
    fn cancel_unrecorded(&self, job: u64, component: usize, launch: u64) {
        self.send(SiteCall::CancelUnrecorded {
            job,
            component,
            launch,
        });
    }
    fn watch(&self, launch: u64, remote: String) {
        self.send(SiteCall::Watch { launch, remote });
    }
    fn forget(&self, launch: u64) {
        self.send(SiteCall::Forget(launch));
    }
    fn kill_local(&self, processors: u32) {
        self.send(SiteCall::KillLocal(processors));
    }
    fn discard(&self, remote: String) {
        self.send(SiteCall::Discard(remote));
    }
    fn lease(&self, vm: u64) {
        self.send(SiteCall::Lease(vm));
    }
    fn release(&self, vm: u64, node: String) {
        self.send(SiteCall::Release { vm, node });
    }
}
