//! What a simulated run is made of besides the sites and the scheduler's configuration: the
//! workload ([`Workload`]), the behaviour of the simulated resource managers (start latency,
//! monitor period) and the faults injected into them ([`Failures`], seed 000 §4–5's
//! unreliable testbed).

use super::site::Local;
use coalloc_core::model::{Job, Millis, Time};
use coalloc_core::scheduler::SiteId;
use std::collections::BTreeMap;

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
/// all stay in memory to the end of the run.
#[derive(Debug)]
pub enum Jobs<'a> {
    Borrowed(&'a Workload),
    Owned(Workload),
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

impl std::ops::Deref for Jobs<'_> {
    type Target = Workload;
    fn deref(&self) -> &Workload {
        match self {
            Jobs::Borrowed(w) => w,
            Jobs::Owned(w) => w,
        }
    }
}

impl Jobs<'_> {
    /// Job `i`'s core job, to submit: moved out of an owned workload when `take` (an empty
    /// job is left in its place), else a copy.
    pub(crate) fn submission(&mut self, i: usize, take: bool) -> Job {
        match self {
            Jobs::Owned(w) if take => std::mem::replace(
                &mut w.jobs[i].job,
                Job::new(coalloc_core::model::JobKind::Total, Vec::new()),
            ),
            _ => self.jobs[i].job.clone(),
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
        }
    }
}
