//! What a simulated run is made of besides the sites and the scheduler's configuration: the
//! workload ([`Workload`]), the behaviour of the simulated resource managers (start latency,
//! monitor period) and the faults injected into them ([`Failures`], seed 000 §4–5's
//! unreliable testbed).

use super::site::Local;
use crate::replay::TraceJob;
use crate::workload::trace::{sim_job, sizes, Split};
use coalloc_core::model::{Job, Millis, Priority, Time, SECOND};
use coalloc_core::scheduler::SiteId;
use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;

/// How many components a trace job of `processors` has under `split`.
fn trace_components(processors: u32, split: Split) -> usize {
    match split {
        Split::Whole => 1,
        _ => sizes(processors, split).len(),
    }
}

/// One job of the workload: the core's job (its `submit` is the arrival time) and how long it
/// really runs once its barrier is released.
#[derive(Debug, Clone, PartialEq)]
pub struct SimJob {
    /// The workload's own number for it (an SWF job number, or its index).
    pub tag: i64,
    pub job: Job,
    pub runtime: Millis,
}

/// What a replayed history says befell a job besides running to its end (`coalloc whatif`,
/// issue 22 item 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scripted {
    /// Its user cancels it this long after its arrival, whatever it is doing then (an
    /// ended job is left alone).
    CancelAfter(Millis),
    /// Its own program fails: every run of it ends in a failure of the job's own (not the
    /// site's, [`coalloc_core::scheduler::Fault::Job`]) after the job's runtime, with this
    /// reason; the core's limits decide whether it runs again.
    FailsAtEnd(String),
}

/// Everything that arrives during a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Workload {
    /// Coalloc's jobs, in arrival order (equal times keep this order).
    pub jobs: Vec<SimJob>,
    /// Local jobs of each site, by site index, in arrival order; missing = none.
    pub local: Vec<Vec<Local>>,
}

/// A workload the engine borrows, copying each job at its arrival, or owns, moving each job
/// out at its arrival (the core drops it when it ends), so that a long trace's jobs do not
/// all stay in memory to the end of the run; or a trace's jobs, each made into the core's
/// job only at its arrival ([`TraceWork`]).
#[derive(Debug, Clone)]
pub enum Jobs<'a> {
    Borrowed(&'a Workload),
    Owned(Workload),
    Trace(TraceWork<'a>),
}

/// Trace jobs as a workload (issue 22: a whole trace's jobs are not all built up front, as
/// the replay never did): job `i` is [`sim_job`] of `jobs[i]`, made when it arrives.
#[derive(Debug, Clone)]
pub struct TraceWork<'a> {
    pub jobs: TraceJobs<'a>,
    pub split: Split,
    /// The true runtime is the estimate (SJF-ideal, seed 004 §IV-A 3), not the requested time.
    pub true_runtimes: bool,
    /// Local jobs of each site, as [`Workload::local`].
    pub local: Vec<Vec<Local>>,
}

/// A trace's jobs, borrowed (a replay of the caller's jobs) or shared (an experiment's runs
/// of one trace share the jobs its trace cache read once: no copy per run, which was 13 MB
/// at every run of a sweep over SDSC-BLUE), or those a reader has passed on so far
/// ([`crate::engine::simulate_fed`]).
#[derive(Debug, Clone)]
pub enum TraceJobs<'a> {
    Borrowed(&'a [TraceJob]),
    Shared(Arc<[TraceJob]>),
    Fed(Vec<TraceJob>),
}

impl Deref for TraceJobs<'_> {
    type Target = [TraceJob];
    fn deref(&self) -> &[TraceJob] {
        match self {
            TraceJobs::Borrowed(jobs) => jobs,
            TraceJobs::Shared(jobs) => jobs,
            TraceJobs::Fed(jobs) => jobs,
        }
    }
}

impl TraceWork<'_> {
    fn sim_job(&self, i: usize) -> SimJob {
        let mut j = sim_job(&self.jobs[i], self.split);
        if self.true_runtimes {
            j.job.runtime_estimate = Some(j.runtime.max(1));
        }
        j
    }
}

impl<'a> From<&'a Workload> for Jobs<'a> {
    fn from(w: &'a Workload) -> Jobs<'a> {
        Jobs::Borrowed(w)
    }
}

impl From<Workload> for Jobs<'static> {
    fn from(w: Workload) -> Jobs<'static> {
        Jobs::Owned(w)
    }
}

impl<'a> From<TraceWork<'a>> for Jobs<'a> {
    fn from(w: TraceWork<'a>) -> Jobs<'a> {
        Jobs::Trace(w)
    }
}

impl Jobs<'_> {
    /// Trace jobs that arrived from a reader, after the ones before ([`TraceJobs::Fed`]).
    pub(crate) fn feed(&mut self, more: &[TraceJob]) {
        if let Jobs::Trace(TraceWork {
            jobs: TraceJobs::Fed(jobs),
            ..
        }) = self
        {
            jobs.extend_from_slice(more);
        }
    }

    /// The trace jobs fed so far, taken out ([`TraceJobs::Fed`]; none for other workloads).
    pub(crate) fn take_fed(&mut self) -> Vec<TraceJob> {
        match self {
            Jobs::Trace(TraceWork {
                jobs: TraceJobs::Fed(jobs),
                ..
            }) => std::mem::take(jobs),
            _ => Vec::new(),
        }
    }

    fn built(&self) -> Option<&Workload> {
        match self {
            Jobs::Borrowed(w) => Some(w),
            Jobs::Owned(w) => Some(w),
            Jobs::Trace(_) => None,
        }
    }

    /// How many jobs.
    pub fn len(&self) -> usize {
        match self {
            Jobs::Trace(t) => t.jobs.len(),
            _ => self.built().map_or(0, |w| w.jobs.len()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Local jobs of each site.
    pub fn local(&self) -> &[Vec<Local>] {
        match self {
            Jobs::Trace(t) => &t.local,
            _ => self.built().map_or(&[], |w| &w.local),
        }
    }

    /// Job `i`'s arrival time.
    pub fn submit(&self, i: usize) -> Option<Time> {
        match self {
            Jobs::Trace(t) => Some(t.jobs[i].submit * SECOND),
            _ => self.built().and_then(|w| w.jobs[i].job.submit),
        }
    }

    /// How long job `i` really runs.
    pub fn runtime(&self, i: usize) -> Millis {
        match self {
            Jobs::Trace(t) => t.jobs[i].runtime.max(0) * SECOND,
            _ => self.built().map_or(0, |w| w.jobs[i].runtime),
        }
    }

    /// Job `i` with what its outcome records of it: (tag, deadline, components, size,
    /// priority), without building a trace job's core job.
    pub(crate) fn summary(&self, i: usize) -> (i64, Option<Time>, usize, u64, Priority) {
        match self {
            Jobs::Trace(t) => {
                let j = &t.jobs[i];
                let parts = trace_components(j.processors, t.split);
                (
                    j.number,
                    None,
                    parts,
                    u64::from(j.processors),
                    Priority::default(),
                )
            }
            _ => {
                let j = &self.built().expect("a built workload").jobs[i];
                (
                    j.tag,
                    j.job.deadline(),
                    j.job.components.len(),
                    j.job.components.iter().map(|c| u64::from(c.count)).sum(),
                    j.job.priority,
                )
            }
        }
    }

    /// Job `i`'s core job, to submit: moved out of an owned workload when `take` (an empty
    /// job is left in its place), made from its trace job, else a copy.
    pub(crate) fn submission(&mut self, i: usize, take: bool) -> Job {
        match self {
            Jobs::Owned(w) if take => std::mem::replace(
                &mut w.jobs[i].job,
                Job::new(coalloc_core::model::JobKind::Total, Vec::new()),
            ),
            Jobs::Owned(w) => w.jobs[i].job.clone(),
            Jobs::Borrowed(w) => w.jobs[i].job.clone(),
            Jobs::Trace(t) => t.sim_job(i).job,
        }
    }
}

/// A window during which a site's resource manager is down: everything running there dies
/// at its start, and nothing can start there until its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    pub site: SiteId,
    pub from: Time,
    pub to: Time,
}

/// A window during which an agent site's link to the server is silent (issue 30): the site
/// itself runs on (its launches keep running, its reports wait at the agent), and the core
/// hears `SiteDisconnected` at `from` and `SiteReconnected` at `to`; past `grace` the core
/// counts the site lost and places its jobs again. When the link is back, the launches
/// the core no longer wants are cancelled (as the server does with the launches an agent
/// reports in its hello) and the reports held meanwhile arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkLoss {
    pub site: SiteId,
    pub from: Time,
    pub to: Time,
    pub grace: Millis,
}

/// Injected faults. Every draw comes from its own seeded stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Failures {
    /// Probability that a component's start fails (it never reaches the barrier).
    pub start: f64,
    /// Mean time between failures of one running component (exponential); `None` = never.
    pub mtbf: Option<Millis>,
    /// Probability that a file transfer fails.
    pub transfer: f64,
    /// Probability that a cloud VM lease fails (the VM never comes; the failure is reported
    /// after the lease latency).
    pub lease: f64,
    pub outages: Vec<Outage>,
    /// Agent links that fall silent and come back ([`LinkLoss`]).
    pub link_losses: Vec<LinkLoss>,
}

/// How the simulated sites behave.
#[derive(Debug, Clone, PartialEq)]
pub struct SimParams {
    /// Seed of the failure and transfer streams.
    pub seed: u64,
    /// From a component's start command to its report at the barrier (processors are held
    /// from the start command on, if free).
    pub start_latency: Millis,
    /// How often the resource monitor reads the sites (seed 003 §4.3.2); `None` = every
    /// change is reported at the instant it happens.
    pub monitor_interval: Option<Millis>,
    /// Bytes per second between two sites whose site list gives no figure.
    pub bandwidth: u64,
    pub failures: Failures,
    /// An operator marks a site usable again when its outage ends (seed 000 §3.4).
    pub reenable_after_outage: bool,
    /// Per-site load samples (the surveillance log) every this long; `None` = none.
    pub sample_interval: Option<Millis>,
    /// The load metrics are measured over [0, window_end]; `None` = until the last arrival.
    pub window_end: Option<Time>,
    /// Give up when the core still has work but nothing else can happen this long after the
    /// last arrival.
    pub give_up_after: Millis,
    /// Fates of some jobs, by index in the workload's jobs ([`Scripted`]).
    pub scripted: BTreeMap<usize, Scripted>,
    /// A site's own start latency, by site index, instead of `start_latency` (`coalloc
    /// whatif`: what the server observed there, or zero for a local site).
    pub site_start_latency: BTreeMap<SiteId, Millis>,
    /// A job's own start-up, from its start command to its report at the barrier, by index
    /// in the workload's jobs, instead of its site's for the start that is not aborted
    /// (`coalloc whatif`: a job whose history shows a component waiting at its site after
    /// placement, for processors another user's load took first).
    pub job_start_latency: BTreeMap<usize, Millis>,
    /// Aborted starts of some jobs, by index in the workload's jobs (`coalloc whatif`: the
    /// history's aborted starts): each of the job's first starts, one per reason, has one
    /// component fail before the barrier with that reason, as its own program's failure
    /// ([`coalloc_core::scheduler::Fault::Job`]); the core aborts the start, backs off and
    /// places the job again as its configuration says.
    pub aborted_starts: BTreeMap<usize, Vec<String>>,
    /// Each component's own run time after the barrier, by index in the workload's jobs
    /// (`coalloc whatif`: a component that ended before the others gave its processors back
    /// then); a job missing here, or a component past its list's end, runs for the job's
    /// runtime.
    pub component_runtimes: BTreeMap<usize, Vec<Millis>>,
    /// Keep each ended job's whole record in its [`JobOutcome`](super::JobOutcome) (the
    /// metrics and the JSONL need it). A replay, which needs only each job's start and end
    /// ([`Outcome::times`](super::Outcome::times)), turns it off: the records then go back
    /// to the allocator as jobs end, instead of holding about 200 bytes a job to the end of
    /// the run.
    pub keep_records: bool,
}

impl Default for SimParams {
    fn default() -> Self {
        SimParams {
            seed: 1,
            start_latency: 0,
            monitor_interval: None,
            bandwidth: 125_000_000, // 1 Gbit/s
            failures: Failures::default(),
            reenable_after_outage: true,
            sample_interval: None,
            window_end: None,
            give_up_after: 365 * 24 * 3_600_000,
            scripted: BTreeMap::new(),
            site_start_latency: BTreeMap::new(),
            job_start_latency: BTreeMap::new(),
            aborted_starts: BTreeMap::new(),
            component_runtimes: BTreeMap::new(),
            keep_records: true,
        }
    }
}
