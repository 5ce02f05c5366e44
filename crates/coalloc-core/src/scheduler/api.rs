//! What goes into the scheduler ([`Event`]) and what comes out ([`Command`], [`Notice`]):
//! the driver interface of DESIGN.md, shared by the simulator and the server.
//!
//! Components are started as *launches*: every start of a component gets a fresh
//! [`LaunchId`], and every report about it names that launch, so a late report about an
//! aborted start can never be mistaken for the current one.

use crate::model::{Component, Job, Millis, Time};
pub use crate::provisioning::VmId;
use std::fmt;

/// A job's number, given by the scheduler at submission (1, 2, 3, ...).
pub type JobId = u64;

/// A site's index in the scheduler's site list.
pub type SiteId = usize;

/// One start of one component.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct LaunchId(pub u64);

impl fmt::Display for LaunchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "L{}", self.0)
    }
}

/// One file transfer, so that a late report of an old run's transfer is never taken for a
/// new one.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct TransferId(pub u64);

/// One advance reservation asked of one site for one component (issue 31; see
/// [`super::reserve`]). Never given out twice.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ReservationId(pub u64);

impl fmt::Display for ReservationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "R{}", self.0)
    }
}

/// The reservation a component is started into ([`Start::reservation`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reservation {
    pub id: ReservationId,
    /// The name it was made under at the site (`coalloc-J<job>-c<i>-<generation>`).
    pub name: String,
    /// The common start of the job's components.
    pub start: Time,
    /// How long the processors are held from `start`.
    pub duration: Millis,
}

/// A change to a job's components before commit (seed 002 §3.2, interactive transactions).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Edit {
    /// Add a component.
    Add(Component),
    /// Delete component `i`.
    Delete(usize),
    /// Replace component `i` (a new request; the old start, if any, is cancelled).
    Substitute(usize, Component),
}

/// An input to the scheduler, stamped with the driver's time by [`super::Scheduler::handle`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Event {
    /// A new job. The scheduler numbers it; the reply says its number.
    Submit(Box<Job>),
    /// Cancel a job: every started component is cancelled.
    Cancel { job: JobId },
    /// Edit a job that has not committed yet.
    Edit { job: JobId, edit: Edit },
    /// The resource monitor's reading of a site (seed 003 §4.3.2): processors idle and in
    /// all, and whether the resource manager answers.
    SiteStatus {
        site: SiteId,
        idle: u32,
        total: u32,
        healthy: bool,
        /// Of the processors not idle, those other users' jobs hold (0: not known).
        #[serde(default)]
        other: u32,
    },
    /// An operator marks a site usable or unusable (seed 000 §3.4).
    SetUsable { site: SiteId, usable: bool },
    /// The owner of a job held at the barrier (`hold_at_barrier`) commits it: it is released
    /// once every required component is there (seed 002 §3.2).
    Commit { job: JobId },
    /// An operator drains, downs or resumes a site, with a reason.
    SiteControl {
        site: SiteId,
        control: super::sites::SiteControl,
        reason: String,
    },
    /// The resource manager accepted a launch; it waits in the site's queue.
    ComponentQueued { launch: LaunchId },
    /// The launch's processes run.
    ComponentStarted { launch: LaunchId },
    /// The launch reported a successful start and waits at the barrier (seed 002 §3.2). It
    /// implies [`Event::ComponentStarted`]: a driver that learns both at once may send this
    /// alone.
    ComponentReady { launch: LaunchId },
    /// The launch failed: it could not be submitted, did not start, or died; `fault` says
    /// whether it counts against the site ([`super::faults`]).
    ComponentFailed {
        launch: LaunchId,
        reason: String,
        fault: super::faults::Fault,
    },
    /// The launch's processes ended successfully.
    ComponentFinished { launch: LaunchId },
    /// A launch the core stopped after its job's commit ([`Command::CancelComponent`] of a
    /// committed run: a runtime-limit kill, a failure after commit, a preemption) is gone
    /// from its site: its cancel took effect, or it ended by itself. Until then the launch
    /// is *draining* ([`super::Scheduler::draining`]) and the job's next run is not
    /// committed. A report about a launch that is not draining changes nothing.
    CancelTaken { launch: LaunchId },
    /// A file transfer ended. A failed one counts as an error of the file's site, not of
    /// the execution site (the replica was unreadable or its link failed).
    TransferDone { transfer: TransferId, ok: bool },
    /// A transfer from `from` to `to` moved `bytes` in `millis`: the bandwidth model learns
    /// (an EWMA per site pair, see `scheduler::bandwidth`), and FTT estimates (seed 000
    /// §2.6, §3.2) use what it learned in place of the configured figure.
    TransferMeasured {
        from: SiteId,
        to: SiteId,
        bytes: u64,
        millis: u64,
    },
    /// A replica of logical file `file` appeared on `site` (registered by an operator or
    /// made by a transfer) or, with `present: false`, went away (seed 000 §2.3's replica
    /// manager: Close-to-Files looks at the sites holding one).
    Replica {
        site: SiteId,
        file: String,
        present: bool,
    },
    /// A VM asked for with [`Command::LeaseVm`] runs and may be used; billing starts now
    /// (seed 004 §III-B).
    VmLeased { vm: VmId },
    /// A VM asked for with [`Command::LeaseVm`] will not come.
    LeaseFailed { vm: VmId, reason: String },
    /// A VM given back with [`Command::ReleaseVm`] is gone; billing stops now.
    VmReleased { vm: VmId },
    /// The link to an agent site fell silent (DESIGN.md "Sites apart" habit 6): not "site
    /// down". No new placements there; its launches are left alone unless it stays silent
    /// past `grace`, when it is lost (see [`super::link`]).
    SiteDisconnected { site: SiteId, grace: Millis },
    /// The link to an agent site is back (after a disconnect, or after it was lost).
    SiteReconnected { site: SiteId },
    /// The answer to [`Command::ReserveQuery`]: the earliest time at or after the query's
    /// `not_before` at which the site can hold the processors for the duration, or why it
    /// cannot (for one, "this site may not reserve").
    ReserveOffer {
        reservation: ReservationId,
        earliest: Result<Time, String>,
    },
    /// The answer to [`Command::Reserve`]: made, or refused with the site's reason.
    Reserved {
        reservation: ReservationId,
        result: Result<(), String>,
    },
    /// After a restart: the reservations under coalloc's names (`coalloc-J…`) that `site`
    /// holds. The core keeps those of live jobs and asks ([`Command::Unreserve`]) to delete
    /// the others. `pending`: the names of the site's reservations that were asked for
    /// and not answered when the list was asked for (the others were asked for since, and
    /// their answers are still to come); `None`, every one.
    ReservationsFound {
        site: SiteId,
        names: Vec<String>,
        pending: Option<Vec<String>>,
    },
    /// Time passed; nothing else happened.
    Tick,
}

/// The configuration a started component receives (seed 002 §3.3): who it is in the job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ComponentConfig {
    pub job: JobId,
    /// This component's index.
    pub index: usize,
    /// Components in the job.
    pub count: usize,
    /// Every component's size, by index (inline up to four: no allocation per launch of a
    /// small job; serialized as a list, as a `Vec` is).
    pub sizes: smallvec::SmallVec<[u32; 4]>,
    /// The rank of this component's first process: the sum of the sizes before it.
    pub rank_offset: u64,
    /// The job's total size.
    pub total: u64,
}

/// Start one component on one site.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Start {
    pub launch: LaunchId,
    pub job: JobId,
    pub component: usize,
    pub site: SiteId,
    pub count: u32,
    /// Kill it after this long, if set.
    pub wall_time: Option<Millis>,
    /// The job's barrier timeout (its own or the scheduler's): a component's runtime gives
    /// up waiting at the barrier after it, so nothing waits for ever (seed 002 §3.2).
    pub barrier_timeout: Option<Millis>,
    pub config: ComponentConfig,
    /// The component as the job asks for it (executable, arguments, ...).
    pub spec: Component,
    /// Under reserve claiming (issue 31): the reservation made for it, to submit it into
    /// (`sbatch --reservation`, `qsub -ar`); it is not expected to run before its start.
    #[serde(default)]
    pub reservation: Option<Reservation>,
}

/// Something the driver must do or should know.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Command {
    /// Submit a component to a site's resource manager.
    StartComponent(Box<Start>),
    /// Cancel (kill) a launch. When the launch's run had committed, the core keeps it as
    /// draining until the driver answers with [`Event::CancelTaken`] (or its site is lost).
    CancelComponent {
        launch: LaunchId,
        job: JobId,
        component: usize,
        site: SiteId,
    },
    /// Every required component is at the barrier: let them all go (seed 002 §3.2's commit).
    /// Components that reach the barrier later pass at once.
    ReleaseBarrier { job: JobId },
    /// Move a job's input file (or chunk) from a file site to an execution site
    /// (seed 000 §2.5).
    StartTransfer {
        transfer: TransferId,
        job: JobId,
        component: usize,
        from: SiteId,
        to: SiteId,
        bytes: u64,
    },
    /// Kill local (non-coalloc) jobs on a site until this many processors are free
    /// (seed 001 §2.2, the GP policy).
    KillLocal { site: SiteId, processors: u32 },
    /// Lease one VM on a cloud site (seed 004 §III-B's On-Demand provisioning); answer with
    /// [`Event::VmLeased`] when it runs or [`Event::LeaseFailed`].
    LeaseVm { site: SiteId, vm: VmId },
    /// Give back an idle VM of a cloud site; answer with [`Event::VmReleased`] when it is
    /// gone. Nothing of coalloc's runs on it.
    ReleaseVm { site: SiteId, vm: VmId },
    /// Ask `site` for the earliest time, at or after `not_before`, at which it can hold
    /// `count` processors for `duration` for component `component` of job `job` (issue 31,
    /// reserve claiming); `count` is every processor the job's run places on that site
    /// (its components there start together). Answer with [`Event::ReserveOffer`]. Makes
    /// nothing at the site.
    ReserveQuery {
        reservation: ReservationId,
        job: JobId,
        component: usize,
        site: SiteId,
        count: u32,
        duration: Millis,
        not_before: Time,
    },
    /// Reserve `count` processors at `site` from `start` for `duration` under `name` (the
    /// prepare of reserve claiming). Answer with [`Event::Reserved`].
    Reserve {
        reservation: ReservationId,
        job: JobId,
        component: usize,
        site: SiteId,
        count: u32,
        start: Time,
        duration: Millis,
        name: String,
    },
    /// Delete the reservation `name` at `site` if it exists (roll back, job ended, or left
    /// over from before a restart). Idempotent; no answer.
    Unreserve { site: SiteId, name: String },
    /// A state change worth telling users about (seed 002 §3.4's monitoring callbacks).
    Notify(Notice),
    /// The job ended well.
    JobFinished { job: JobId, record: Box<JobRecord> },
    /// The job ended badly and will not be retried.
    JobFailed {
        job: JobId,
        reason: String,
        record: Box<JobRecord>,
    },
}

/// State changes of jobs, components and sites.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Notice {
    /// Placed: component `i` goes to `sites[i]`.
    Placed { job: JobId, sites: Vec<SiteId> },
    /// Committed: the barrier was released.
    Committed { job: JobId },
    /// Aborted before commit, or failed after it; the job goes back to its queue.
    Requeued { job: JobId, reason: String },
    /// An interactive component failed before commit (seed 002 §3.2): the agent may delete or
    /// substitute it; by default it is re-placed on another site.
    InteractiveFailed {
        job: JobId,
        component: usize,
        reason: String,
    },
    /// An optional component failed; the job goes on without it.
    OptionalFailed {
        job: JobId,
        component: usize,
        reason: String,
    },
    /// A low-priority job was preempted for a high-priority one (seed 000 §3.3).
    Preempted { job: JobId, by: JobId },
    /// A site's consecutive errors reached the threshold, or an operator said so.
    SiteUnusable { site: SiteId, reason: String },
    /// A site may be used again.
    SiteUsable { site: SiteId },
    /// A job held at the barrier has every required component there: it waits for its
    /// owner's commit (or edits).
    AwaitingCommit { job: JobId },
    /// A job was cancelled.
    Cancelled { job: JobId },
}

/// What the scheduler answers at once to an event.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Reply {
    /// The job was accepted under this number.
    Submitted(JobId),
    /// The event was taken.
    Done,
}

/// Why an event was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("no job {0}")]
    UnknownJob(JobId),
    #[error("no site {0}")]
    UnknownSite(SiteId),
    #[error("{0}")]
    Invalid(String),
    #[error("job {0} has committed; its components can no longer be edited")]
    Committed(JobId),
    #[error("job {0} has ended")]
    Ended(JobId),
    #[error("the queue is full ({0} jobs)")]
    QueueFull(usize),
}

/// Timestamps and counters of one job: everything the metrics of DESIGN.md need.
///
/// The placement counters are inline; the times of its runs and the counters of what can
/// only happen to a placed job ([`RunRecord`]) are boxed and made at the first placement, so
/// that a job that only waits stays small. Read them through the accessors
/// ([`JobRecord::start`], [`JobRecord::submit_failures`], ...), which answer `None` or 0
/// before the first run. The serialized form is the one the counters had inline
/// (`JobRecordForm`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobRecord {
    pub job: JobId,
    pub submit: Time,
    /// Placement tries, successful or not.
    pub placement_tries: u32,
    /// Placement failures (tries that found no fit).
    pub placement_failures: u32,
    /// When the first placement tries happened, as many as the configuration's
    /// `record_try_times` says (none by default: a job waiting through many passes keeps
    /// only the count).
    pub try_times: TryTimes,
    /// The times of its runs, from the first placement on.
    pub run: Option<Box<RunRecord>>,
}

/// [`JobRecord`]'s serialized form: every counter inline, in the order they were.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename = "JobRecord")]
struct JobRecordForm<T, R> {
    job: JobId,
    submit: Time,
    placement_tries: u32,
    placement_failures: u32,
    claim_tries: u32,
    claim_failures: u32,
    submit_failures: u32,
    completion_failures: u32,
    preemptions: u32,
    limit_kills: u32,
    try_times: T,
    run: R,
}

impl serde::Serialize for JobRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.run();
        JobRecordForm {
            job: self.job,
            submit: self.submit,
            placement_tries: self.placement_tries,
            placement_failures: self.placement_failures,
            claim_tries: r.claim_tries,
            claim_failures: r.claim_failures,
            submit_failures: r.submit_failures,
            completion_failures: r.completion_failures,
            preemptions: r.preemptions,
            limit_kills: r.limit_kills,
            try_times: &self.try_times,
            run: &self.run,
        }
        .serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for JobRecord {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<JobRecord, D::Error> {
        let f = JobRecordForm::<TryTimes, Option<Box<RunRecord>>>::deserialize(d)?;
        let mut record = JobRecord {
            job: f.job,
            submit: f.submit,
            placement_tries: f.placement_tries,
            placement_failures: f.placement_failures,
            try_times: f.try_times,
            run: f.run,
        };
        let counters = [
            f.claim_tries,
            f.claim_failures,
            f.submit_failures,
            f.completion_failures,
            f.preemptions,
            f.limit_kills,
        ];
        if counters != [0; 6] {
            let r = record.run_mut();
            r.claim_tries = f.claim_tries;
            r.claim_failures = f.claim_failures;
            r.submit_failures = f.submit_failures;
            r.completion_failures = f.completion_failures;
            r.preemptions = f.preemptions;
            r.limit_kills = f.limit_kills;
        }
        Ok(record)
    }
}

/// A record's placement-try times: a list, boxed only when it holds any (8 bytes in the
/// record, not a `Vec`'s 24: most configurations keep none). Serialized as the list.
#[derive(Clone, PartialEq, Eq, Default)]
// The box is the point: 8 bytes in every record instead of an empty `Vec`'s 24.
#[allow(clippy::box_collection)]
pub struct TryTimes(Option<Box<Vec<Time>>>);

impl TryTimes {
    pub fn push(&mut self, t: Time) {
        self.0.get_or_insert_with(Box::default).push(t);
    }

    /// Bytes held beside the record.
    pub fn capacity(&self) -> usize {
        self.0.as_ref().map_or(0, |v| v.capacity())
    }
}

impl std::ops::Deref for TryTimes {
    type Target = [Time];
    fn deref(&self) -> &[Time] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }
}

impl std::fmt::Debug for TryTimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl From<Vec<Time>> for TryTimes {
    fn from(v: Vec<Time>) -> TryTimes {
        TryTimes((!v.is_empty()).then(|| Box::new(v)))
    }
}

impl<const N: usize> PartialEq<[Time; N]> for TryTimes {
    fn eq(&self, o: &[Time; N]) -> bool {
        **self == o[..]
    }
}

impl PartialEq<Vec<Time>> for TryTimes {
    fn eq(&self, o: &Vec<Time>) -> bool {
        **self == o[..]
    }
}

impl serde::Serialize for TryTimes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for TryTimes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<TryTimes, D::Error> {
        Vec::<Time>::deserialize(d).map(TryTimes::from)
    }
}

/// The times of a job's runs.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct RunRecord {
    /// When the last successful placement happened (KOALA's JPT).
    pub placed: Option<Time>,
    /// The job start time first estimated, and the one it started at (seed 000 §3.2's start
    /// delay is their difference).
    pub first_jst: Option<Time>,
    pub last_jst: Option<Time>,
    /// When the barrier was released.
    pub barrier_release: Option<Time>,
    /// When the job started (= barrier release) and ended.
    pub start: Option<Time>,
    pub end: Option<Time>,
    /// Sites used by the run that ended, by component (but a component that never had
    /// one: deleted before it was placed). Inline for up to two components (no allocation
    /// per run for most jobs; serialized as the sequence it was as a `Vec`).
    pub sites: smallvec::SmallVec<[SiteId; 2]>,
    /// Processor-milliseconds held before the barrier released (seed 001's wasted time).
    pub wasted: u64,
    /// Claiming tries (ICP) and how many did not claim every component. These counters
    /// count what happens to a placed job only; they are written with the [`JobRecord`]'s
    /// (read them there).
    #[serde(skip)]
    pub claim_tries: u32,
    #[serde(skip)]
    pub claim_failures: u32,
    /// Failures before commit (aborts) and after (completion failures).
    #[serde(skip)]
    pub submit_failures: u32,
    #[serde(skip)]
    pub completion_failures: u32,
    /// Times preempted.
    #[serde(skip)]
    pub preemptions: u32,
    /// Times killed at a runtime limit and queued again (TAGS).
    #[serde(skip)]
    pub limit_kills: u32,
}

static NO_RUN: RunRecord = RunRecord {
    placed: None,
    first_jst: None,
    last_jst: None,
    barrier_release: None,
    start: None,
    end: None,
    sites: smallvec::SmallVec::new_const(),
    wasted: 0,
    claim_tries: 0,
    claim_failures: 0,
    submit_failures: 0,
    completion_failures: 0,
    preemptions: 0,
    limit_kills: 0,
};

impl JobRecord {
    /// Claiming tries (ICP).
    pub fn claim_tries(&self) -> u32 {
        self.run().claim_tries
    }

    /// Claiming tries that did not claim every component.
    pub fn claim_failures(&self) -> u32 {
        self.run().claim_failures
    }

    /// Failures before commit (aborts).
    pub fn submit_failures(&self) -> u32 {
        self.run().submit_failures
    }

    /// Failures after commit.
    pub fn completion_failures(&self) -> u32 {
        self.run().completion_failures
    }

    /// Times preempted.
    pub fn preemptions(&self) -> u32 {
        self.run().preemptions
    }

    /// Times killed at a runtime limit and queued again (TAGS).
    pub fn limit_kills(&self) -> u32 {
        self.run().limit_kills
    }

    /// The run times (all empty before the first placement).
    pub fn run(&self) -> &RunRecord {
        self.run.as_deref().unwrap_or(&NO_RUN)
    }

    /// The run times, to change them (made on first use).
    pub fn run_mut(&mut self) -> &mut RunRecord {
        self.run.get_or_insert_with(Box::default)
    }

    pub fn placed(&self) -> Option<Time> {
        self.run().placed
    }

    pub fn first_jst(&self) -> Option<Time> {
        self.run().first_jst
    }

    pub fn last_jst(&self) -> Option<Time> {
        self.run().last_jst
    }

    pub fn barrier_release(&self) -> Option<Time> {
        self.run().barrier_release
    }

    pub fn start(&self) -> Option<Time> {
        self.run().start
    }

    pub fn end(&self) -> Option<Time> {
        self.run().end
    }

    pub fn sites(&self) -> &[SiteId] {
        &self.run().sites
    }

    pub fn wasted(&self) -> u64 {
        self.run().wasted
    }

    pub fn wait(&self) -> Option<Millis> {
        self.start().map(|s| s - self.submit)
    }

    pub fn response(&self) -> Option<Millis> {
        self.end().map(|e| e - self.submit)
    }

    pub fn runtime(&self) -> Option<Millis> {
        Some(self.end()? - self.start()?)
    }

    /// Start delay: last JST minus first JST (seed 000 §3.2).
    pub fn start_delay(&self) -> Option<Millis> {
        Some(self.last_jst()? - self.first_jst()?)
    }
}

/// A record keeps the serialized form of its inline counters and list.
#[cfg(test)]
mod record_form_tests {
    use super::*;

    /// `JobRecord` as it was with every counter inline: the reference form, a frozen copy
    /// kept apart from `JobRecordForm` on purpose (a change to that form must fail here).
    #[derive(serde::Serialize)]
    struct InlineRecord<'a> {
        job: JobId,
        submit: Time,
        placement_tries: u32,
        placement_failures: u32,
        claim_tries: u32,
        claim_failures: u32,
        submit_failures: u32,
        completion_failures: u32,
        preemptions: u32,
        limit_kills: u32,
        try_times: Vec<Time>,
        run: Option<&'a RunRecord>,
    }

    #[test]
    fn a_record_is_written_as_its_counters_were_inline_and_read_back_equal() {
        for placed in [false, true] {
            let mut r = JobRecord {
                job: 4,
                submit: 10,
                placement_tries: 3,
                placement_failures: 2,
                ..JobRecord::default()
            };
            if placed {
                r.try_times.push(11);
                let run = r.run_mut();
                run.start = Some(12);
                run.claim_tries = 1;
                run.claim_failures = 2;
                run.submit_failures = 3;
                run.completion_failures = 4;
                run.preemptions = 5;
                run.limit_kills = 6;
            }
            let n = u32::from(placed);
            let inline = InlineRecord {
                job: 4,
                submit: 10,
                placement_tries: 3,
                placement_failures: 2,
                claim_tries: n,
                claim_failures: 2 * n,
                submit_failures: 3 * n,
                completion_failures: 4 * n,
                preemptions: 5 * n,
                limit_kills: 6 * n,
                try_times: if placed { vec![11] } else { vec![] },
                run: r.run.as_deref(),
            };
            let text = serde_json::to_string(&r).unwrap();
            assert_eq!(text, serde_json::to_string(&inline).unwrap());
            let back: JobRecord = serde_json::from_str(&text).unwrap();
            assert_eq!(back, r);
            assert_eq!((back.submit_failures(), back.limit_kills()), (3 * n, 6 * n));
            assert_eq!(
                back.run.is_some(),
                placed,
                "no run box for a job never placed"
            );
        }
        assert!(size_of::<JobRecord>() <= 40);
    }
}
