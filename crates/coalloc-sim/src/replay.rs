//! Trace replay: the scheduling core on virtual time, fed the jobs of an SWF trace
//! (issue "Simulator", part 5: `coalloc replay`).
//!
//! Every trace job becomes a one-component total job of its processors, submitted at its SWF
//! submit time; it runs for its SWF runtime (field 4) once the barrier is released, and its
//! requested time (field 9, or the runtime when absent) is only the estimate backfilling and
//! the predictors see: no job is killed at it. Sites start a component the instant they are
//! told to and report it ready at once.
//!
//! Same-instant order: all ends at an instant are handed to the core before any submission
//! of that instant, and submissions keep their file order; the core decides once per instant
//! ([`Scheduler::handle_all`]). Time is integer milliseconds; trace seconds are multiplied by
//! 1,000, so a schedule written back in seconds is exact.
//!
//! Cloud sites provisioned On-Demand lease VMs, which take time to come and cost money:
//! this loop does not model that, so such runs go through [`crate::engine`] on ideal sites
//! (no start latency, no faults, every change reported at once), which gives this loop's
//! schedule where both apply ([`needs_engine`], [`replay_on_engine`]).

use crate::engine::{simulate, JobFate, SimError, SimParams, Workload};
use crate::workload::trace::{sim_jobs, Split};
use coalloc_core::model::{Component, Job, JobKind, Site, Time, SECOND};
use coalloc_core::provisioning::Provisioning;
use coalloc_core::scheduler::{Command, Event, JobId, LaunchId, Reply, Scheduler, SchedulerConfig};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One job of the workload, as the replay needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceJob {
    /// The trace's job number.
    pub number: i64,
    /// Submit time, seconds on the trace's clock.
    pub submit: i64,
    /// Real runtime, seconds.
    pub runtime: i64,
    /// Requested time, seconds (the estimate the scheduler sees).
    pub requested: i64,
    pub processors: u32,
    /// The user, if the trace says.
    pub user: Option<i64>,
}

/// What happened to one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduled {
    pub number: i64,
    pub submit: i64,
    /// Start and end, seconds on the trace's clock; `None` for a job the scheduler refused or
    /// failed.
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub processors: u32,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    pub jobs: Vec<Scheduled>,
    /// Jobs the scheduler refused at submission (e.g. larger than every site), with why.
    pub refused: Vec<(i64, String)>,
}

/// Errors of a replay: only a misconfiguration can stop one.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("the scheduler stopped with {0} job(s) still waiting and nothing left to happen")]
    Stuck(usize),
    #[error(transparent)]
    Engine(#[from] SimError),
}

/// Whether `sites` under `config` need [`replay_on_engine`]: some site is a cloud that the
/// scheduler provisions On-Demand (VM leases, which this module's loop does not model).
pub fn needs_engine(sites: &[Site], config: &SchedulerConfig) -> bool {
    matches!(config.provisioning, Provisioning::OnDemand(_))
        && sites.iter().any(|s| s.cloud.is_some())
}

/// [`replay`] on the engine: the trace jobs as one-component jobs ([`Split::Whole`]) on
/// ideal sites ([`SimParams::default`]). Start and end are in whole seconds (rounded down:
/// a VM's lease latency need not be whole seconds).
pub fn replay_on_engine(
    jobs: &[TraceJob],
    sites: Vec<Site>,
    config: SchedulerConfig,
) -> Result<Replay, ReplayError> {
    let work = Workload {
        jobs: sim_jobs(jobs, Split::Whole),
        local: Vec::new(),
    };
    let out = simulate(sites, config, work, &SimParams::default())?;
    let seconds = |t: Option<Time>| t.map(|t| t.div_euclid(SECOND));
    let mut refused = Vec::new();
    let mut waiting = 0;
    let mut scheduled = Vec::with_capacity(jobs.len());
    for (t, o) in jobs.iter().zip(&out.jobs) {
        let record = o.record.as_ref();
        let finished = o.fate == JobFate::Finished;
        match &o.fate {
            JobFate::Failed(why) | JobFate::Refused(why) => refused.push((t.number, why.clone())),
            JobFate::Unfinished => waiting += 1,
            JobFate::Finished => {}
        }
        scheduled.push(Scheduled {
            number: t.number,
            submit: t.submit,
            start: seconds(record.and_then(|r| r.start())),
            end: seconds(record.and_then(|r| r.end()).filter(|_| finished)),
            processors: t.processors,
        });
    }
    if waiting > 0 {
        return Err(ReplayError::Stuck(waiting));
    }
    Ok(Replay {
        jobs: scheduled,
        refused,
    })
}

/// Replay `jobs` (in file order) on `sites` under `config`.
pub fn replay(
    jobs: &[TraceJob],
    sites: Vec<Site>,
    config: SchedulerConfig,
) -> Result<Replay, ReplayError> {
    replay_keeping(jobs, sites, config).map(|(r, _)| r)
}

/// [`replay`], also giving back the scheduler as the run left it, so that a caller who
/// times the replay can stop the clock before the scheduler's memory is freed (`None` for a
/// run on the engine, see [`needs_engine`]).
pub fn replay_keeping(
    jobs: &[TraceJob],
    sites: Vec<Site>,
    config: SchedulerConfig,
) -> Result<(Replay, Option<Scheduler>), ReplayError> {
    if needs_engine(&sites, &config) {
        return replay_on_engine(jobs, sites, config).map(|r| (r, None));
    }
    // The replay keeps each job's start and end itself, from the commands, and ignores
    // notices.
    let config = SchedulerConfig {
        forget_ended: true,
        notices: false,
        ..config
    };
    let mut s = Scheduler::new(config, sites);
    s.reserve_jobs(jobs.len());
    // Arrivals by submit time, then file order; ends (by time, then launch) in a heap. At an
    // instant the ends go first.
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| (jobs[i].submit, i));
    let mut next_arrival = order.into_iter().peekable();
    let arrival_time = |i: usize| jobs[i].submit * SECOND;
    let mut heap: BinaryHeap<Reverse<(Time, LaunchId)>> = BinaryHeap::new();
    let mut out: Vec<Scheduled> = jobs
        .iter()
        .map(|j| Scheduled {
            number: j.number,
            submit: j.submit,
            start: None,
            end: None,
            processors: j.processors,
        })
        .collect();
    let mut refused = Vec::new();
    // The accepted jobs, by core job number (the core numbers them 1, 2, ...).
    let mut accepted: Vec<Accepted> = Vec::with_capacity(jobs.len());
    let mut batch: Vec<Event> = Vec::new();
    let mut arrivals: Vec<usize> = Vec::new();
    let mut ready = Vec::new();
    let mut replies = Vec::new();
    loop {
        let next_end = heap.peek().map(|Reverse((t, _))| *t);
        let next_arrival_time = next_arrival.peek().map(|&i| arrival_time(i));
        let Some(now) = earliest(earliest(next_end, next_arrival_time), s.next_wakeup()) else {
            break;
        };
        batch.clear();
        arrivals.clear();
        while let Some(&Reverse((t, launch))) = heap.peek() {
            if t != now {
                break;
            }
            heap.pop();
            batch.push(Event::ComponentFinished { launch });
        }
        while let Some(i) = next_arrival.next_if(|&i| arrival_time(i) == now) {
            arrivals.push(i);
        }
        let ends = batch.len();
        for &i in &arrivals {
            batch.push(Event::Submit(Box::new(job_of(&jobs[i], now))));
        }
        if batch.is_empty() {
            batch.push(Event::Tick);
        }
        s.handle_all_into(now, batch.drain(..), &mut replies);
        for (reply, &i) in replies.drain(..).skip(ends).zip(&arrivals) {
            match reply {
                Ok(Reply::Submitted(id)) => {
                    debug_assert_eq!(id, accepted.len() as JobId + 1, "jobs numbered densely");
                    accepted.push(Accepted {
                        index: i,
                        launches: Launches::default(),
                    });
                }
                Ok(Reply::Done) => {}
                Err(e) => refused.push((jobs[i].number, e.to_string())),
            }
        }
        // Carry out what the core decided; a start is ready at once.
        loop {
            while let Some(cmd) = s.poll_command() {
                match cmd {
                    Command::StartComponent(st) => {
                        if let Some(a) = Accepted::of(&mut accepted, st.job) {
                            a.launches.add(st.launch);
                        }
                        ready.push(Event::ComponentReady { launch: st.launch });
                    }
                    Command::ReleaseBarrier { job } => {
                        if let Some(a) = Accepted::of(&mut accepted, job) {
                            let i = a.index;
                            out[i].start = Some(now / SECOND);
                            let end = now + jobs[i].runtime.max(0) * SECOND;
                            for launch in a.launches.iter() {
                                heap.push(Reverse((end, launch)));
                            }
                        }
                    }
                    Command::JobFinished { job, .. } => {
                        if let Some(a) = Accepted::of(&mut accepted, job) {
                            out[a.index].end = Some(now / SECOND);
                            a.launches = Launches::default();
                        }
                    }
                    Command::JobFailed { job, reason, .. } => {
                        if let Some(a) = Accepted::of(&mut accepted, job) {
                            refused.push((jobs[a.index].number, reason));
                            a.launches = Launches::default();
                        }
                    }
                    Command::CancelComponent { job, launch, .. } => {
                        if let Some(a) = Accepted::of(&mut accepted, job) {
                            a.launches.drop_launch(launch);
                        }
                    }
                    _ => {}
                }
            }
            if ready.is_empty() {
                break;
            }
            s.handle_all_into(now, ready.drain(..), &mut replies);
        }
    }
    if s.queued() > 0 {
        return Err(ReplayError::Stuck(s.queued()));
    }
    Ok((Replay { jobs: out, refused }, Some(s)))
}

/// The earlier of two times, either of which may be absent.
pub(crate) fn earliest(a: Option<Time>, b: Option<Time>) -> Option<Time> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// What the replay keeps of a job the core accepted.
#[derive(Debug)]
struct Accepted {
    /// Its index in the workload.
    index: usize,
    launches: Launches,
}

impl Accepted {
    /// Core job `job` in `accepted` (numbered from 1).
    fn of(accepted: &mut [Accepted], job: JobId) -> Option<&mut Accepted> {
        accepted.get_mut(usize::try_from(job.checked_sub(1)?).ok()?)
    }
}

/// A job's current launches: the first inline (most trace jobs have one component).
#[derive(Debug, Default)]
struct Launches {
    first: Option<LaunchId>,
    more: Vec<LaunchId>,
}

impl Launches {
    fn add(&mut self, launch: LaunchId) {
        match self.first {
            None => self.first = Some(launch),
            Some(_) => self.more.push(launch),
        }
    }

    fn drop_launch(&mut self, launch: LaunchId) {
        if self.first == Some(launch) {
            self.first = None;
        }
        self.more.retain(|&x| x != launch);
    }

    fn iter(&self) -> impl Iterator<Item = LaunchId> + '_ {
        self.first.into_iter().chain(self.more.iter().copied())
    }
}

/// The jobs of a trace that can be replayed (known runtime and processors), in file order.
pub fn trace_jobs(trace: &crate::swf::Trace) -> Vec<TraceJob> {
    let mut out = Vec::with_capacity(trace.jobs.len());
    out.extend(trace.jobs.iter().filter_map(|j| {
        Some(TraceJob {
            number: j.job_number,
            submit: j.submit_time,
            runtime: j.run_time()?,
            requested: j.requested_time_or_run_time()?,
            processors: u32::try_from(j.processors()?).ok()?,
            user: j.user_id(),
        })
    }));
    out
}

/// The core's job for a trace job.
pub fn job_of(t: &TraceJob, now: Time) -> Job {
    let mut job = Job::new(JobKind::Total, vec![Component::new(t.processors)]);
    job.submit = Some(now);
    job.runtime_estimate = Some(t.requested.max(1) * SECOND);
    if let Some(u) = t.user {
        job = job.with(|e| e.user = Some(u.to_string()));
    }
    job
}

/// The summary metrics of a replay (DESIGN.md's definitions; bounded slowdown with a 10 s
/// bound).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Summary {
    pub jobs: usize,
    pub completed: usize,
    pub refused: usize,
    /// Seconds from the first submission to the last end.
    pub makespan: i64,
    pub mean_wait: f64,
    pub mean_response: f64,
    pub mean_bounded_slowdown: f64,
    /// Busy processor-seconds over (processors × makespan).
    pub utilization: f64,
}

impl Replay {
    pub fn summary(&self, processors: u64) -> Summary {
        let done: Vec<&Scheduled> = self.jobs.iter().filter(|j| j.end.is_some()).collect();
        let n = done.len().max(1) as f64;
        let first = self.jobs.iter().map(|j| j.submit).min().unwrap_or(0);
        let last = done.iter().filter_map(|j| j.end).max().unwrap_or(first);
        let makespan = last - first;
        let wait = |j: &Scheduled| (j.start.unwrap_or(j.submit) - j.submit) as f64;
        let run = |j: &Scheduled| (j.end.unwrap_or(0) - j.start.unwrap_or(0)) as f64;
        let busy: f64 = done.iter().map(|j| run(j) * f64::from(j.processors)).sum();
        Summary {
            jobs: self.jobs.len(),
            completed: done.len(),
            refused: self.refused.len(),
            makespan,
            mean_wait: done.iter().map(|j| wait(j)).sum::<f64>() / n,
            mean_response: done.iter().map(|j| wait(j) + run(j)).sum::<f64>() / n,
            mean_bounded_slowdown: done
                .iter()
                .map(|j| ((wait(j) + run(j)) / run(j).max(10.0)).max(1.0))
                .sum::<f64>()
                / n,
            utilization: if makespan > 0 && processors > 0 {
                busy / (processors as f64 * makespan as f64)
            } else {
                0.0
            },
        }
    }
}
