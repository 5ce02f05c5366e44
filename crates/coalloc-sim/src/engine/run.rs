//! The event loop of one simulated run ([`simulate`]) and what it returns ([`Outcome`]).

mod feed;
mod links;
mod rare;
mod reserve;
mod setup;
mod site_set;

pub use feed::FedJobs;

use super::params::{Jobs, Scripted, SimParams, TraceJobs, TraceWork};
use super::site::{LocalFate, Sites, Usage};
use crate::replay::TraceJob;
use coalloc_core::model::{Millis, Priority, Site, Time};
use coalloc_core::paged::Paged;
use coalloc_core::provisioning::{billed_hours, Bill};
use coalloc_core::scheduler::{
    Command, Event, Fault, JobId, JobRecord, LaunchId, Notice, Rejected, Reply, Scheduler,
    SchedulerConfig, SiteId, Start, TransferId, VmId,
};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use site_set::SiteSet;
use smallvec::SmallVec;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// How a workload job ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobFate {
    Finished,
    /// The scheduler gave up on it (e.g. a deadline missed under LP, too many failures).
    Failed(String),
    /// Refused at submission (e.g. larger than every site).
    Refused(String),
    /// Still waiting when nothing more could happen.
    Unfinished,
}

/// One workload job's result.
#[derive(Debug, Clone, PartialEq)]
pub struct JobOutcome {
    pub tag: i64,
    pub submit: Time,
    pub deadline: Option<Time>,
    pub components: usize,
    pub size: u64,
    pub priority: Priority,
    pub runtime: Millis,
    pub fate: JobFate,
    /// The core's record, for a job that ended (finished or failed), when
    /// [`SimParams::keep_records`] says so (else [`Outcome::times`] has its start and end).
    /// Inline, not in the box the core hands it over in: boxed, an outcome without one
    /// (every job of a replay) is 32 bytes smaller, but `coalloc sim` EASY SDSC-BLUE, which
    /// keeps every record, took 4 % more CPU time and 5 MB more memory.
    pub record: Option<JobRecord>,
}

/// When a job ended, as [`Sim::ended`] keeps it ([`Time::MIN`]: none).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ended {
    start: Time,
    end: Time,
    /// 0: not ended, 1: finished, 2: failed (its fate is in its outcome).
    state: u8,
}

impl Ended {
    const NOT: Ended = Ended {
        start: Time::MIN,
        end: Time::MIN,
        state: 0,
    };

    fn of(record: &JobRecord, finished: bool) -> Ended {
        Ended {
            start: record.start().unwrap_or(Time::MIN),
            end: record.end().unwrap_or(Time::MIN),
            state: if finished { 1 } else { 2 },
        }
    }

    fn times(&self) -> (Option<Time>, Option<Time>) {
        let time = |t: Time| (t != Time::MIN).then_some(t);
        (time(self.start), time(self.end))
    }
}

/// One reading of one site's load (seed 003 appendix A.5's surveillance log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SiteSample {
    pub time: Time,
    pub site: SiteId,
    /// Processors held by coalloc (before and after the barrier).
    pub coalloc: u32,
    /// Processors held by local jobs (the "other users").
    pub others: u32,
    pub idle: u32,
}

/// What one cloud site leased and what it cost, from the simulated provider's own records
/// (seed 004 §V-A's cost): every VM billed per started hour from when it ran until it was
/// gone, or until the end of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct CloudUsage {
    pub leases: u64,
    pub lease_failures: u64,
    /// Most VMs running at one time.
    pub peak_vms: u32,
    pub bill: BillRow,
}

/// [`Bill`] as a plain row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct BillRow {
    pub vm_hours: u64,
    pub cost_micros: u64,
}

impl From<Bill> for BillRow {
    fn from(b: Bill) -> BillRow {
        BillRow {
            vm_hours: b.vm_hours,
            cost_micros: b.cost_micros,
        }
    }
}

/// One VM's life in the simulated provider's records.
#[derive(Debug, Clone, Copy)]
struct VmLife {
    site: SiteId,
    up: Option<Time>,
    down: Option<Time>,
}

impl VmLife {
    /// Up and not released.
    fn running(&self) -> bool {
        self.up.is_some() && self.down.is_none()
    }
}

/// Everything a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub jobs: Vec<JobOutcome>,
    /// Per site: processor-time used inside the window, and the local jobs' fates.
    pub usage: Vec<Usage>,
    pub local: Vec<Vec<LocalFate>>,
    pub local_submits: Vec<Vec<Time>>,
    pub processors: Vec<u32>,
    pub samples: Vec<SiteSample>,
    /// The measurement window of the load metrics, ms.
    pub window_end: Time,
    /// When the last event happened.
    pub end: Time,
    /// Per site: what it leased and cost (all zero for clusters and static clouds).
    pub clouds: Vec<CloudUsage>,
    /// When each job ended, when the records were not kept (empty when they were).
    ends: Vec<Ended>,
    /// A fed run's fates but finished ones ([`simulate_fed`]: its `jobs` are left empty).
    fates: BTreeMap<usize, JobFate>,
}

impl Outcome {
    /// When workload job `i`'s last run started and ended (`None` before it did): from its
    /// record, or, when [`SimParams::keep_records`] was off, from the engine's own table.
    pub fn times(&self, i: usize) -> (Option<Time>, Option<Time>) {
        match (
            self.jobs.get(i).and_then(|j| j.record.as_ref()),
            self.ends.get(i),
        ) {
            (Some(r), _) => (r.start(), r.end()),
            (None, Some(e)) => e.times(),
            (None, None) => (None, None),
        }
    }

    /// How workload job `i` ended: from its outcome, or, in a fed run (which makes none),
    /// from the engine's own tables.
    pub fn fate(&self, i: usize) -> &JobFate {
        const FINISHED: &JobFate = &JobFate::Finished;
        const UNFINISHED: &JobFate = &JobFate::Unfinished;
        if let Some(o) = self.jobs.get(i) {
            return &o.fate;
        }
        match (self.fates.get(&i), self.ends.get(i)) {
            (Some(f), _) => f,
            (None, Some(e)) if e.state == 1 => FINISHED,
            _ => UNFINISHED,
        }
    }
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SimError {
    #[error("the workload has local jobs for site {0}, but there are only {1} sites")]
    LocalSite(usize, usize),
    #[error("outage {0}: site {1} does not exist")]
    OutageSite(usize, usize),
    #[error("outage {0} ends before it starts")]
    OutageWindow(usize),
    #[error("link loss {0}: site {1} does not exist")]
    LinkLossSite(usize, usize),
    #[error("link loss {0} ends before it starts, or has a negative grace")]
    LinkLossWindow(usize),
    #[error("{0} must be a probability in [0, 1]")]
    Probability(&'static str),
    #[error("the trace's jobs are not in the order of their submit times")]
    Unsorted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    LocalEnd(usize, usize),
    Ready(LaunchId),
    End(LaunchId),
    Crash(LaunchId),
    WallKill(LaunchId),
    Transfer(TransferId, bool),
    OutageStart(usize),
    OutageEnd(usize),
    /// Link loss `k` begins / ends ([`super::LinkLoss`]).
    LinkDown(usize),
    LinkUp(usize),
    LocalArrive(usize, usize),
    Monitor,
    Sample,
    /// A leased VM runs (true) or its lease failed (false).
    VmUp(VmId, bool),
    /// The user cancels core job `JobId` ([`Scripted::CancelAfter`]).
    Cancel(JobId),
    /// A launch's reservation begins: it starts now (issue 31).
    ReservedStart(LaunchId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LState {
    /// Waiting in the site's queue for processors.
    Queued,
    /// Holding processors, starting up.
    Starting,
    /// At the barrier.
    Ready,
    Running,
}

#[derive(Debug, Clone, Copy)]
struct Launch {
    job: JobId,
    /// Its component's index in the job.
    component: usize,
    site: SiteId,
    count: u32,
    state: LState,
    wall: Option<Millis>,
    /// Its start fails instead of reaching the barrier (drawn at the start command).
    doomed: bool,
    /// Started into a reservation: its site's calendar counts its processors.
    window: bool,
    /// When it ends, once it computes.
    until: Option<Time>,
}

/// A job's launches, every start's (requeued ones too, in order), and whether the core
/// released its barrier (until it requeues the job).
#[derive(Debug, Default)]
struct JobLaunches {
    launches: SmallVec<[LaunchId; 2]>,
    released: bool,
}

struct Sim<'a> {
    core: Scheduler,
    params: &'a SimParams,
    work: Jobs<'a>,
    /// Jobs are moved out of an owned workload at their arrival (not when a full queue may
    /// refuse them: they are submitted again later).
    take_jobs: bool,
    sites: Sites,
    site_names: Vec<String>,
    /// How far ahead each site takes a reservation (its manager's `reserve_ahead`).
    reserve_ahead: Vec<Option<Millis>>,
    bandwidth: Vec<BTreeMap<String, u64>>,
    heap: BinaryHeap<Reverse<(Time, u64, Ev)>>,
    /// Monitor and sample events in the heap.
    periodic: usize,
    seq: u64,
    now: Time,
    /// Live launches by number, and each job's launches by job number (the core numbers both
    /// densely: a paged table finds one without a search).
    launches: Paged<Launch>,
    by_job: Paged<JobLaunches>,
    /// Starts into reservations that begin later (issue 31).
    deferred: BTreeMap<LaunchId, Start>,
    /// The reservation each launch started into holds (issue 31).
    window_of: BTreeMap<LaunchId, String>,
    /// The reason of every live doomed launch that plays one of
    /// [`SimParams::aborted_starts`], and how many of each job's (by workload index) have
    /// been dealt out.
    abort_reasons: BTreeMap<LaunchId, String>,
    aborts_dealt: BTreeMap<usize, usize>,
    /// The workload index of every job the core accepted, by core job number (from 1: the
    /// core numbers accepted jobs densely).
    index_of: Vec<usize>,
    /// Workload jobs by arrival time, then workload order, and the next to arrive (arrivals
    /// are known in advance: a sorted list, not events in the heap).
    /// Each with its arrival time: the loop reads it at every instant, without a look into
    /// the workload.
    arrivals: Vec<(Time, usize)>,
    next_arrival: usize,
    /// Empty in a fed run ([`simulate_fed`]), which keeps its jobs' ends and the sparse
    /// `fates` instead: a replay's caller needs no more, and an outcome per job is over
    /// 100 bytes written and read back once, in memory the run would touch first.
    outcomes: Vec<JobOutcome>,
    fates: BTreeMap<usize, JobFate>,
    /// When each workload job ended, when the records are not kept: every job's end writes
    /// here, a table of 24 bytes a job that stays in the caches, where the outcomes (over
    /// 100 bytes a job, untouched since the job arrived) would cost a miss each. The
    /// [`Outcome`] keeps it ([`Outcome::times`]); [`Sim::finish`] marks the finished jobs'
    /// outcomes. Empty when the records are kept (the outcome is written then anyway).
    ends: Vec<Ended>,
    /// Core events caused by carrying out commands at the current instant, and an empty
    /// buffer to swap with it.
    follow: Vec<Event>,
    spare: Vec<Event>,
    /// The confirmations of cancels of draining launches (`Event::CancelTaken`; the core's
    /// `draining` module): a simulated cancel takes effect at once. They go to the core
    /// first among the next events it takes (at this instant, or the next one), never on
    /// their own: a handling of its own would run a scheduling pass the core did not run
    /// before it kept draining launches (a pass that an ICP preemption left due), and the
    /// schedules would change. Nothing is delayed by it: the next run of a job whose launch
    /// drains commits on a report about its own launches, an event that carries them.
    cancels_taken: Vec<Event>,
    /// The core's replies (a buffer).
    replies: Vec<Result<Reply, Rejected>>,
    /// Sites whose holdings changed at the current instant.
    dirty: SiteSet,
    reported: Vec<(u32, bool)>,
    /// Per site: while its link is silent, when it comes back (its reports wait till then).
    link_up_at: Vec<Option<Time>>,
    starts: ChaCha8Rng,
    crashes: ChaCha8Rng,
    transfers: ChaCha8Rng,
    samples: Vec<super::SiteSample>,
    /// Periodic events taken at this instant, to schedule again after it (and whether a
    /// monitor reading changed something).
    due: Vec<(Ev, bool)>,
    /// Workload jobs held back while the scheduler's queue is full, in arrival order.
    held: std::collections::VecDeque<usize>,
    /// Per site: processors per VM (0: not a provisioned cloud), lease latency, price.
    vm_processors: Vec<u32>,
    lease_latency: Vec<Millis>,
    price: Vec<u64>,
    /// Processors per site as configured (a cloud's most).
    configured: Vec<u32>,
    vms: BTreeMap<VmId, VmLife>,
    /// Per site: the VMs running now (up and not yet released), kept as they come and go
    /// instead of counted over `vms`, which holds every VM of the run (the count made each
    /// lease cost time in the number of leases so far).
    running_vms: Vec<u32>,
    cloud_usage: Vec<CloudUsage>,
    leases: ChaCha8Rng,
    /// The last arrival of the workload (a fed run's is known when its reader is done: it
    /// is read only when no more jobs can come), and the end of the load metrics' window.
    last_arrival: Time,
    window_end: Time,
    /// Trace jobs still coming from a reader on another thread ([`simulate_fed`]).
    feed: Option<feed::Feed>,
}

/// Run `workload` on `sites` under `config`. The workload is borrowed (`&Workload`) or
/// given (`Workload`: each job is moved into the scheduler at its arrival, see [`Jobs`]).
pub fn simulate<'a>(
    sites: Vec<Site>,
    config: SchedulerConfig,
    workload: impl Into<Jobs<'a>>,
    params: &SimParams,
) -> Result<Outcome, SimError> {
    let mut sim = Sim::new(sites, config, workload.into(), params, None)?;
    sim.run();
    Ok(sim.finish())
}

/// [`simulate`] on trace jobs that a reader on another thread passes on while the run goes
/// (`coalloc replay`: the trace is read meanwhile, [`crate::replay::replay_file`]), in
/// chunks, until it drops its end of the channel. The run takes a chunk when it needs the
/// next arrival, so it must get the jobs in the order of their submit times (SWF's order,
/// which every archive trace keeps): a job that arrives before one already passed on stops
/// the run with [`SimError::Unsorted`], for the caller to read the whole trace and use
/// [`simulate`]. `work` says how the fed jobs become the core's (its own jobs are not
/// looked at). The outcome is [`simulate`]'s on the same jobs without records, which come
/// back with it, but for its [`Outcome::jobs`], left empty: [`Outcome::times`] and
/// [`Outcome::fate`] tell each job's end (a replay needs no more).
pub fn simulate_fed(
    sites: Vec<Site>,
    config: SchedulerConfig,
    work: TraceWork<'_>,
    fed: FedJobs,
    params: &SimParams,
) -> Result<(Outcome, Vec<TraceJob>), SimError> {
    let capacity = fed.capacity;
    let work = TraceWork {
        jobs: TraceJobs::Fed(Vec::with_capacity(capacity)),
        ..work
    };
    // A fed run keeps every job's end in its own table, never a record.
    let params = &SimParams {
        keep_records: false,
        ..params.clone()
    };
    let mut sim = Sim::new(sites, config, Jobs::Trace(work), params, Some(fed))?;
    sim.arrivals.reserve(capacity);
    sim.index_of.reserve(capacity);
    sim.ends.reserve(capacity);
    sim.run();
    if sim.feed.as_ref().is_some_and(|f| f.unsorted) {
        return Err(SimError::Unsorted);
    }
    let jobs = sim.work.take_fed();
    Ok((sim.finish(), jobs))
}

/// The earlier of two times, either of which may be absent.
fn earliest(a: Option<Time>, b: Option<Time>) -> Option<Time> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn outcome_of(work: &Jobs, i: usize) -> JobOutcome {
    let (tag, deadline, components, size, priority) = work.summary(i);
    JobOutcome {
        tag,
        submit: work.submit(i).unwrap_or(0),
        deadline,
        components,
        size,
        priority,
        runtime: work.runtime(i),
        fate: JobFate::Unfinished,
        record: None,
    }
}

impl Sim<'_> {
    /// When workload job `i` arrives.
    fn arrival_time(&self, i: usize) -> Time {
        self.work.submit(i).unwrap_or(0)
    }

    /// The core accepted workload job `i` as job `id`.
    fn accepted(&mut self, id: JobId, i: usize) {
        debug_assert_eq!(
            id,
            self.index_of.len() as JobId + 1,
            "jobs numbered densely"
        );
        self.index_of.push(i);
        if let Some(Scripted::CancelAfter(d)) = self.params.scripted.get(&i) {
            let at = (self.arrival_time(i) + d.max(&0)).max(self.now);
            self.push(at, Ev::Cancel(id));
        }
    }

    /// The workload index of core job `job`.
    fn index(&self, job: JobId) -> Option<usize> {
        let k = usize::try_from(job.checked_sub(1)?).ok()?;
        self.index_of.get(k).copied()
    }

    /// Something besides the periodic readings can still happen.
    fn busy(&self) -> bool {
        self.heap.len() > self.periodic
            || !self.launches.is_empty()
            || self.next_arrival < self.arrivals.len()
            || self.feed.as_ref().is_some_and(feed::Feed::open)
    }

    /// When the next workload job arrives, if one still does (taking more fed jobs when
    /// those passed on are all in).
    fn next_arrival_time(&mut self) -> Option<Time> {
        if self.next_arrival == self.arrivals.len()
            && self.feed.as_ref().is_some_and(feed::Feed::open)
        {
            self.take_fed();
        }
        self.arrivals.get(self.next_arrival).map(|&(t, _)| t)
    }

    fn push(&mut self, at: Time, ev: Ev) {
        if matches!(ev, Ev::Monitor | Ev::Sample) {
            self.periodic += 1;
        }
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    fn seed_events(&mut self) {
        let mut arrivals: Vec<(Time, usize)> = (0..self.work.len())
            .map(|i| (self.arrival_time(i), i))
            .collect();
        arrivals.sort_unstable();
        self.arrivals = arrivals;
        let locals: Vec<(Time, usize, usize)> = (self.work.local().iter().enumerate())
            .flat_map(|(s, ls)| ls.iter().enumerate().map(move |(i, l)| (l.submit, s, i)))
            .collect();
        for (t, s, i) in locals {
            self.push(t, Ev::LocalArrive(s, i));
        }
        for (k, o) in self.params.failures.outages.clone().iter().enumerate() {
            self.push(o.from, Ev::OutageStart(k));
            self.push(o.to, Ev::OutageEnd(k));
        }
        for (k, o) in self.params.failures.link_losses.clone().iter().enumerate() {
            self.push(o.from, Ev::LinkDown(k));
            self.push(o.to, Ev::LinkUp(k));
        }
        if let Some(iv) = self.params.monitor_interval {
            self.push(iv.max(1), Ev::Monitor);
        }
        if self.params.sample_interval.is_some() {
            self.push(0, Ev::Sample);
        }
    }

    fn run(&mut self) {
        let mut batch = Vec::new();
        let mut arrivals = Vec::new();
        loop {
            let next_event = earliest(
                self.heap.peek().map(|Reverse((t, _, _))| *t),
                self.next_arrival_time(),
            );
            if self.feed.as_ref().is_some_and(|f| f.unsorted) {
                return;
            }
            let last_arrival = self.last_arrival;
            let now = match (next_event, self.core.next_wakeup()) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) if b <= last_arrival + self.params.give_up_after => b,
                _ => break,
            };
            self.now = now;
            self.sites.reach(now);
            batch.clear();
            arrivals.clear();
            while let Some(&Reverse((t, _, ev))) = self.heap.peek() {
                if t != now {
                    break;
                }
                self.heap.pop();
                if matches!(ev, Ev::Monitor | Ev::Sample) {
                    self.periodic -= 1;
                }
                self.take(ev, &mut batch);
            }
            while self.next_arrival_time() == Some(now) {
                arrivals.push(self.arrivals[self.next_arrival].1);
                self.next_arrival += 1;
            }
            self.settle_sites();
            if !self.cancels_taken.is_empty() {
                batch.splice(0..0, self.cancels_taken.drain(..));
            }
            batch.append(&mut self.follow);
            let ends = batch.len();
            for &i in &arrivals {
                let job = self.work.submission(i, self.take_jobs);
                batch.push(Event::Submit(Box::new(job)));
            }
            if batch.is_empty() {
                batch.push(Event::Tick);
            }
            let mut replies = std::mem::take(&mut self.replies);
            self.core
                .handle_all_into(now, batch.drain(..), &mut replies);
            for (reply, &i) in replies.drain(..).skip(ends).zip(&arrivals) {
                match reply {
                    Ok(Reply::Submitted(id)) => self.accepted(id, i),
                    Ok(Reply::Done) => {}
                    Err(Rejected::QueueFull(_)) => self.held.push_back(i),
                    Err(e) => self.set_fate(i, JobFate::Refused(e.to_string())),
                }
            }
            self.replies = replies;
            self.quiesce();
            self.resubmit_held();
            if self.due.is_empty() {
                continue;
            }
            // Periodic readings go on while anything can still happen: decided after the
            // instant, so jobs that arrived at it count.
            let alive = self.busy()
                || !self.held.is_empty()
                || (self.core.queued() > 0
                    && self.core.next_wakeup().is_some()
                    && now <= last_arrival + self.params.give_up_after);
            for (ev, changed) in std::mem::take(&mut self.due) {
                let iv = match ev {
                    Ev::Monitor => self.params.monitor_interval,
                    _ => self.params.sample_interval,
                };
                if alive || changed {
                    self.push(now + iv.unwrap_or(1).max(1), ev);
                }
            }
        }
    }

    /// Jobs refused because the queue was full are submitted again, in order, as soon as
    /// there is room (the workload's users hold them back, seed 000 §4.2's "at most 100").
    fn resubmit_held(&mut self) {
        while let Some(&i) = self.held.front() {
            let mut job = self.work.submission(i, false);
            job.submit = Some(self.now);
            let reply = self.core.handle(self.now, Event::Submit(Box::new(job)));
            let full = matches!(reply, Err(Rejected::QueueFull(_)));
            if !full {
                self.held.pop_front();
            }
            match reply {
                Ok(Reply::Submitted(id)) => {
                    self.accepted(id, i);
                    if let Some(o) = self.outcomes.get_mut(i) {
                        o.submit = self.now;
                    }
                }
                Err(e) if !full => self.set_fate(i, JobFate::Refused(e.to_string())),
                _ => {}
            }
            self.quiesce();
            if full {
                break;
            }
        }
    }

    /// Carry out the core's commands and hand back what they cause at this instant, until
    /// the instant is quiet.
    fn quiesce(&mut self) {
        loop {
            while let Some(cmd) = self.core.poll_command() {
                self.carry_out(cmd);
            }
            self.settle_sites();
            if self.follow.is_empty() {
                break;
            }
            // The buffers are kept: no allocation per instant.
            let mut events = std::mem::replace(&mut self.follow, std::mem::take(&mut self.spare));
            if !self.cancels_taken.is_empty() {
                events.splice(0..0, self.cancels_taken.drain(..));
            }
            self.core
                .handle_all_into(self.now, events.drain(..), &mut self.replies);
            self.spare = events;
        }
    }

    /// A heap event: change the simulated world, and queue what the core must hear.
    fn take(&mut self, ev: Ev, batch: &mut Vec<Event>) {
        let now = self.now;
        match ev {
            Ev::LocalArrive(s, i) => {
                self.sites.at(s, self.now).local_arrives(i);
                self.dirty.insert(s);
            }
            Ev::LocalEnd(s, i) => {
                if self.sites.at(s, now).local_ends(i, now) {
                    self.dirty.insert(s);
                }
            }
            Ev::Ready(launch) | Ev::End(launch) | Ev::Crash(launch) | Ev::WallKill(launch)
                if self.held_back(launch, ev) => {}
            Ev::Ready(launch) => self.ready(launch, batch),
            Ev::End(launch) | Ev::Crash(launch) | Ev::WallKill(launch) => {
                if !matches!(self.launches.get(launch.0), Some(l) if l.state == LState::Running) {
                    return;
                }
                let own = if self.params.scripted.is_empty() {
                    None
                } else {
                    self.fails_at_end(launch)
                };
                self.drop_launch(launch);
                batch.push(match (ev, own) {
                    (Ev::End(_), None) => Event::ComponentFinished { launch },
                    (ev, own) => rare::ended_badly(ev, launch, own),
                });
            }
            _ => self.take_rare(ev, batch),
        }
    }

    /// Carry out one command of the core.
    fn carry_out(&mut self, cmd: Command) {
        match cmd {
            Command::StartComponent(st) => self.start(&st),
            Command::ReleaseBarrier { job } => {
                let entry = match self.by_job.get_mut(job) {
                    Some(entry) => entry,
                    None => {
                        self.by_job.insert(job, JobLaunches::default());
                        self.by_job.get_mut(job).expect("just inserted")
                    }
                };
                entry.released = true;
                // A copy (inline for up to two launches): running one changes the tables.
                let launches = entry.launches.clone();
                for launch in launches {
                    if matches!(self.launches.get(launch.0), Some(x) if x.state == LState::Ready) {
                        self.run_launch(launch);
                    }
                }
            }
            Command::Notify(Notice::Requeued { job, .. }) => {
                if let Some(entry) = self.by_job.get_mut(job) {
                    entry.released = false;
                }
            }
            Command::Notify(_) => {}
            Command::JobFinished { job, record } => self.ended(job, JobFate::Finished, record),
            Command::JobFailed {
                job,
                reason,
                record,
            } => self.ended(job, JobFate::Failed(reason), record),
            cmd => self.carry_out_rare(cmd),
        }
    }

    fn ended(&mut self, job: JobId, fate: JobFate, record: Box<JobRecord>) {
        if !self.deferred.is_empty() {
            self.deferred.retain(|_, st| st.job != job);
        }
        let launches = self.by_job.remove(job).map(|e| e.launches);
        for launch in launches.into_iter().flatten() {
            if self.launches.get(launch.0).is_some() {
                self.drop_launch(launch);
            }
        }
        if let Some(i) = self.index(job) {
            let finished = fate == JobFate::Finished;
            if let Some(e) = self.ends.get_mut(i) {
                *e = Ended::of(&record, finished);
                if finished {
                    return;
                }
            } else {
                self.outcomes[i].record = Some(*record);
            }
            self.set_fate(i, fate);
        }
    }

    /// Workload job `i` ended other than finished (or was refused): in its outcome, or in
    /// a fed run's `fates`.
    fn set_fate(&mut self, i: usize, fate: JobFate) {
        match self.outcomes.get_mut(i) {
            Some(o) => o.fate = fate,
            None => {
                self.fates.insert(i, fate);
            }
        }
    }

    fn start(&mut self, st: &Start) {
        if self.defer(st) {
            return;
        }
        let site = st.site;
        // No draw when starts never fail (the stream serves nothing else).
        let p = self.params.failures.start;
        let mut doomed = p > 0.0 && self.starts.random_bool(p);
        if !self.params.aborted_starts.is_empty() {
            if let Some(reason) = self.scripted_abort(st.job) {
                doomed = true;
                self.abort_reasons.insert(st.launch, reason);
            }
        }
        let mut l = Launch {
            job: st.job,
            component: st.component,
            site,
            count: st.count,
            state: LState::Queued,
            wall: st.wall_time,
            doomed,
            window: st.reservation.is_some(),
            until: None,
        };
        match self.by_job.get_mut(st.job) {
            Some(entry) => entry.launches.push(st.launch),
            None => {
                let launches = SmallVec::from_elem(st.launch, 1);
                self.by_job.insert(
                    st.job,
                    JobLaunches {
                        launches,
                        released: false,
                    },
                );
            }
        }
        if !self.sites[site].up {
            self.start_at_down_site(st);
            return;
        }
        if st.reservation.is_some() {
            self.claim_window(st);
        }
        if self.sites.at(site, self.now).claim(st.launch, st.count) {
            l.state = LState::Starting;
            self.launches.insert(st.launch.0, l);
            self.begin(st.launch);
        } else {
            self.launches.insert(st.launch.0, l);
            self.follow
                .push(Event::ComponentQueued { launch: st.launch });
        }
        self.dirty.insert(site);
    }

    /// The reason of the job's next scripted aborted start ([`SimParams::aborted_starts`]),
    /// dealt to the first launch of a start (one per start: none while another launch of
    /// the job is doomed).
    fn scripted_abort(&mut self, job: JobId) -> Option<String> {
        let i = self.index(job)?;
        let reasons = self.params.aborted_starts.get(&i)?;
        let dealt = self.aborts_dealt.get(&i).copied().unwrap_or(0);
        let reason = reasons.get(dealt)?.clone();
        let live_doomed = self.by_job.get(job).is_some_and(|e| {
            e.launches
                .iter()
                .any(|l| self.launches.get(l.0).is_some_and(|l| l.doomed))
        });
        if live_doomed {
            return None;
        }
        self.aborts_dealt.insert(i, dealt + 1);
        Some(reason)
    }

    /// A launch got its processors: it runs its start-up and reports at the barrier. With no
    /// start latency a launch that does not fail to start is ready at once, told to the
    /// core with its start (no event through the heap: a trace replay's every start).
    fn begin(&mut self, launch: LaunchId) {
        let now = self.now;
        let Some(l) = self.launches.get_mut(launch.0) else {
            return;
        };
        l.state = LState::Starting;
        let (site, job, doomed) = (l.site, l.job, l.doomed);
        let p = self.params;
        let latency = if p.site_start_latency.is_empty() && p.job_start_latency.is_empty() {
            p.start_latency
        } else {
            self.latency_of(site, job, doomed)
        };
        let at_once = latency <= 0 && !doomed;
        if at_once {
            // `ComponentReady` alone: the core's ready passes the start first, so a
            // `ComponentStarted` just before it would change nothing (one event less per
            // launch of an ideal site).
            let mut out = std::mem::take(&mut self.follow);
            self.ready(launch, &mut out);
            self.follow = out;
        } else {
            self.follow.push(Event::ComponentStarted { launch });
            self.push(now + latency.max(0), Ev::Ready(launch));
        }
    }

    /// A starting launch reports at the barrier, or fails to start (injected); a launch of
    /// a job whose barrier is released already computes at once.
    fn ready(&mut self, launch: LaunchId, out: &mut Vec<Event>) {
        let Some(l) = self.launches.get_mut(launch.0) else {
            return;
        };
        if l.state != LState::Starting {
            return;
        }
        if l.doomed {
            let scripted = self.abort_reasons.remove(&launch);
            self.drop_launch(launch);
            let (reason, fault) = match scripted {
                Some(reason) => (reason, Fault::Job),
                None => (
                    "the component failed to start (injected)".into(),
                    Fault::Site,
                ),
            };
            out.push(Event::ComponentFailed {
                launch,
                reason,
                fault,
            });
        } else {
            l.state = LState::Ready;
            let job = l.job;
            out.push(Event::ComponentReady { launch });
            if self.by_job.get(job).is_some_and(|e| e.released) {
                self.run_launch(launch);
            }
        }
    }

    /// A launch at the barrier whose job committed: it computes for the job's runtime,
    /// unless it crashes or hits its wall time first.
    fn run_launch(&mut self, launch: LaunchId) {
        let now = self.now;
        let Some(l) = self.launches.get_mut(launch.0) else {
            return;
        };
        l.state = LState::Running;
        let (job, component, site, count, wall) = (l.job, l.component, l.site, l.count, l.wall);
        self.sites.at(site, self.now).run(count);
        self.dirty.insert(site);
        let runtime = self
            .index(job)
            .map_or(0, |i| {
                (self.params.component_runtimes.get(&i))
                    .and_then(|r| r.get(component).copied())
                    .unwrap_or_else(|| self.work.runtime(i))
            })
            .max(0);
        let crash = self.params.failures.mtbf.map(|m| self.draw_crash(m));
        let mut end = (runtime, Ev::End(launch));
        if let Some(w) = wall {
            if w < end.0 {
                end = (w, Ev::WallKill(launch));
            }
        }
        if let Some(c) = crash {
            if c < end.0 {
                end = (c, Ev::Crash(launch));
            }
        }
        if let Some(l) = self.launches.get_mut(launch.0) {
            l.until = Some(now + end.0);
        }
        self.push(now + end.0, end.1);
    }

    /// Forget a launch and give its processors back.
    fn drop_launch(&mut self, launch: LaunchId) {
        let Some(l) = self.launches.remove(launch.0) else {
            return;
        };
        if !self.window_of.is_empty() || !self.abort_reasons.is_empty() {
            self.drop_extras(launch, &l);
        }
        let s = self.sites.at(l.site, self.now);
        match l.state {
            LState::Queued => {
                s.withdraw(launch);
            }
            LState::Running => s.release(l.count, true),
            LState::Starting | LState::Ready => s.release(l.count, false),
        }
        self.dirty.insert(l.site);
    }

    /// Start what now fits on changed sites, and tell the core what the monitor sees.
    fn settle_sites(&mut self) {
        let now = self.now;
        while let Some(site) = self.dirty.pop_first() {
            // Most changed sites have nothing waiting (every site of a replay): no dispatch.
            if self.sites[site].may_dispatch() {
                let (launches, locals) = self.sites.at(site, now).dispatch(now);
                for launch in launches {
                    self.begin(launch);
                }
                for i in locals {
                    let runtime = self.sites[site].locals[i].runtime;
                    self.push(now + runtime, Ev::LocalEnd(site, i));
                }
            }
            if self.params.monitor_interval.is_none() {
                if let Some(reading) = self.reading(site) {
                    self.follow.push(reading);
                }
            }
        }
    }

    fn report_sites(&mut self, out: &mut Vec<Event>) -> bool {
        let before = out.len();
        out.extend((0..self.sites.len()).filter_map(|site| self.reading(site)));
        out.len() > before
    }

    /// A monitor reading of one site, if it changed since the last one.
    fn reading(&mut self, site: SiteId) -> Option<Event> {
        if self.link_up_at[site].is_some() {
            // Its monitor's readings cannot reach the server while its link is silent.
            return None;
        }
        let s = &self.sites[site];
        let reading = (s.free(), s.up);
        if self.reported[site] == reading {
            return None;
        }
        self.reported[site] = reading;
        Some(Event::SiteStatus {
            site,
            idle: reading.0,
            total: s.total,
            healthy: reading.1,
            other: 0,
        })
    }

    /// Transfer time in ms: bytes over the two sites' bandwidth (either direction's figure,
    /// else the default); nothing to move within a site.
    fn transfer_time(&self, from: SiteId, to: SiteId, bytes: u64) -> Millis {
        if from == to {
            return 0;
        }
        let bw = self.bandwidth[from]
            .get(&self.site_names[to])
            .or_else(|| self.bandwidth[to].get(&self.site_names[from]))
            .copied()
            .unwrap_or(self.params.bandwidth)
            .max(1);
        (u128::from(bytes) * 1000).div_ceil(u128::from(bw)) as Millis
    }

    fn finish(mut self) -> Outcome {
        let window_end = self.window_end;
        // The provider's bill: every VM that ran, until it was gone or the run ended.
        for life in self.vms.values() {
            if let Some(up) = life.up {
                let hours = billed_hours(up, life.down.unwrap_or(self.now));
                let bill = Bill::of(hours, self.price[life.site]);
                let u = &mut self.cloud_usage[life.site];
                u.bill = Bill::of(u.bill.vm_hours, 0)
                    .plus(Bill {
                        vm_hours: 0,
                        cost_micros: u.bill.cost_micros,
                    })
                    .plus(bill)
                    .into();
            }
        }
        for (o, e) in self.outcomes.iter_mut().zip(&self.ends) {
            if e.state == 1 {
                o.fate = JobFate::Finished;
            }
        }
        let sites = self.sites.finish(window_end);
        Outcome {
            jobs: self.outcomes,
            usage: sites.iter().map(|s| s.usage).collect(),
            local_submits: sites
                .iter()
                .map(|s| s.locals.iter().map(|l| l.submit).collect())
                .collect(),
            local: sites.iter().map(|s| s.fates.clone()).collect(),
            processors: self.configured,
            samples: self.samples,
            window_end,
            end: self.now,
            clouds: self.cloud_usage,
            ends: self.ends,
            fates: self.fates,
        }
    }
}
