//! Trace replay: the scheduling core on virtual time, fed the jobs of an SWF trace
//! (issue "Simulator", part 5: `coalloc replay`).
//!
//! Every trace job becomes a one-component total job of its processors, submitted at its SWF
//! submit time; it runs for its SWF runtime (field 4) once the barrier is released, and its
//! requested time (field 9, or the runtime when absent) is only the estimate backfilling and
//! the predictors see: no job is killed at it.
//!
//! There is one driver (issue 22, item 2): a replay is a run of [`crate::engine`] on ideal
//! sites ([`SimParams::default`]: no start latency, no faults, every change reported at
//! once), so sites start a component the instant they are told to and report it ready at
//! once, and whatever the engine models of a site file (cloud sites leasing VMs On-Demand,
//! seed 004 §III-B; a bounded queue) a replay runs too. Same-instant order is the engine's:
//! all ends at an instant are handed to the core before any submission of that instant, and
//! submissions keep their file order. Time is integer milliseconds; trace seconds are
//! multiplied by 1,000, so a schedule written back in seconds is exact (a cloud VM's lease
//! latency need not be whole seconds: times are rounded down).

use crate::engine::{
    simulate, simulate_fed, FedJobs, JobFate, Outcome, SimError, SimParams, TraceJobs, TraceWork,
};
use crate::workload::trace::Split;
use coalloc_core::model::{Component, Job, JobExtra, JobKind, Site, Time, SECOND};
use coalloc_core::scheduler::SchedulerConfig;

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

/// Replay `jobs` (in file order) on `sites` under `config`.
pub fn replay(
    jobs: &[TraceJob],
    sites: Vec<Site>,
    config: SchedulerConfig,
) -> Result<Replay, ReplayError> {
    let out = simulate(
        sites,
        config,
        trace_work(TraceJobs::Borrowed(jobs)),
        &params(),
    )?;
    replayed(jobs.iter().copied(), &out)
}

/// Errors of [`replay_file`]: the trace's, or the replay's.
#[derive(Debug, thiserror::Error)]
pub enum FileReplayError {
    #[error(transparent)]
    Trace(#[from] crate::swf::SwfError),
    #[error(transparent)]
    Replay(#[from] ReplayError),
}

/// Trace jobs per chunk a [`replay_file`] reader passes on (about 200 KB), and chunks
/// read ahead of the run at most.
const CHUNK_JOBS: usize = 4096;
const CHUNKS_AHEAD: usize = 4;

/// [`replay`] of the jobs of the SWF file at `path` ([`read_trace_jobs`]), read on a thread
/// of its own while the replay runs ([`crate::engine::simulate_fed`]): reading and
/// decompressing a trace is about a seventh of a whole `coalloc replay` of SDSC-BLUE, and the
/// run need not wait for it on a machine of two cores or more. The same replay as
/// [`replay`] of the same jobs. A trace whose jobs are not in submit order is replayed by
/// [`replay`] after all; an error in the file is the file's, whatever the run did meanwhile.
pub fn replay_file(
    path: &std::path::Path,
    filter: &crate::swf::Filter,
    sites: Vec<Site>,
    config: SchedulerConfig,
) -> Result<Replay, FileReplayError> {
    use crate::swf::SwfError;
    let (fed, read) = std::thread::scope(|scope| {
        let (tx, chunks) = std::sync::mpsc::sync_channel(CHUNKS_AHEAD);
        let (spent, back) = std::sync::mpsc::sync_channel::<Vec<TraceJob>>(CHUNKS_AHEAD + 2);
        let (size_tx, size) = std::sync::mpsc::sync_channel(1);
        // The file is read there too: its pages are that thread's to fault in.
        let reader = std::thread::Builder::new()
            .name("swf-read".into())
            .spawn_scoped(scope, move || {
                let bytes = std::fs::read(path).map_err(|e| SwfError::Io(e.to_string()))?;
                let _ = size_tx.send(crate::swf::job_capacity(&bytes, filter));
                let fresh = || {
                    back.try_recv()
                        .unwrap_or_else(|_| Vec::with_capacity(CHUNK_JOBS))
                };
                let mut chunk = fresh();
                let read = crate::swf::parse_each(
                    &bytes,
                    filter,
                    |j| trace_job(&j),
                    |t| {
                        chunk.push(t);
                        if chunk.len() < CHUNK_JOBS {
                            return true;
                        }
                        tx.send(std::mem::replace(&mut chunk, fresh())).is_ok()
                    },
                );
                if read.is_ok() && !chunk.is_empty() {
                    // A run that stopped early no longer listens: nothing to do then.
                    let _ = tx.send(chunk);
                }
                read.map(|()| bytes)
            })
            .expect("a thread to read the trace");
        // An unreadable file sends no size: the run sees no jobs, and the error is read's.
        let fed = FedJobs {
            chunks,
            spent,
            capacity: size.recv().unwrap_or(0),
        };
        let work = trace_work(TraceJobs::Fed(Vec::new()));
        let out = simulate_fed(sites.clone(), config.clone(), work, fed, &params());
        let read = reader
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (out, read)
    });
    let bytes = read?;
    match fed {
        Err(SimError::Unsorted) => {
            let jobs = crate::swf::parse_map(&bytes, filter, |j| trace_job(&j))?;
            Ok(replay(&jobs, sites, config)?)
        }
        fed => {
            let (out, jobs) = fed.map_err(ReplayError::from)?;
            Ok(replayed(jobs, &out)?)
        }
    }
}

/// A replay's trace jobs as the engine's workload.
fn trace_work(jobs: TraceJobs<'_>) -> TraceWork<'_> {
    TraceWork {
        jobs,
        split: Split::Whole,
        true_runtimes: false,
        local: Vec::new(),
    }
}

/// A replay's sites: ideal ([`SimParams::default`]), and only each job's times kept.
fn params() -> SimParams {
    SimParams {
        keep_records: false,
        ..SimParams::default()
    }
}

// `replayed`'s schedule takes its jobs' memory only while the two are the same size.
const _: () = assert!(std::mem::size_of::<Scheduled>() == std::mem::size_of::<TraceJob>());

/// What a replay's run of `jobs` (in workload order) did to each. Given a vector's own
/// jobs (`Vec::into_iter`), the schedule is written over them, in the same memory: a
/// [`Scheduled`] is as large as a [`TraceJob`] (`collect`'s in-place reuse), so a whole
/// trace's schedule touches no fresh memory.
fn replayed(
    jobs: impl IntoIterator<Item = TraceJob>,
    out: &Outcome,
) -> Result<Replay, ReplayError> {
    let seconds = |t: Option<Time>| t.map(|t| t.div_euclid(SECOND));
    let mut refused = Vec::new();
    let mut waiting = 0;
    let scheduled = (jobs.into_iter().enumerate())
        .map(|(i, t)| {
            let (start, end) = out.times(i);
            let fate = out.fate(i);
            let finished = *fate == JobFate::Finished;
            match fate {
                JobFate::Failed(why) | JobFate::Refused(why) => {
                    refused.push((t.number, why.clone()));
                }
                JobFate::Unfinished => waiting += 1,
                JobFate::Finished => {}
            }
            Scheduled {
                number: t.number,
                submit: t.submit,
                start: seconds(start),
                end: seconds(end.filter(|_| finished)),
                processors: t.processors,
            }
        })
        .collect();
    if waiting > 0 {
        return Err(ReplayError::Stuck(waiting));
    }
    Ok(Replay {
        jobs: scheduled,
        refused,
    })
}

/// The jobs of a trace that can be replayed (known runtime and processors), in file order.
pub fn trace_jobs(trace: &crate::swf::Trace) -> Vec<TraceJob> {
    let mut out = Vec::with_capacity(trace.jobs.len());
    out.extend(trace.jobs.iter().filter_map(trace_job));
    out
}

/// [`trace_jobs`] of the SWF file at `path` (see [`crate::swf::read`]), read straight into
/// [`TraceJob`]s: the whole [`crate::swf::Job`]s (three times the size) are never held.
pub fn read_trace_jobs(
    path: impl AsRef<std::path::Path>,
    filter: &crate::swf::Filter,
) -> Result<Vec<TraceJob>, crate::swf::SwfError> {
    crate::swf::read_map(path, filter, |j| trace_job(&j))
}

/// A trace job as the replay needs it, if it can be replayed.
fn trace_job(j: &crate::swf::Job) -> Option<TraceJob> {
    Some(TraceJob {
        number: j.job_number,
        submit: j.submit_time,
        runtime: j.run_time()?,
        requested: j.requested_time_or_run_time()?,
        processors: u32::try_from(j.processors()?).ok()?,
        user: j.user_id(),
    })
}

/// The core's job for a trace job.
pub fn job_of(t: &TraceJob, now: Time) -> Job {
    let mut job = Job::new(JobKind::Total, vec![Component::new(t.processors)]);
    job.submit = Some(now);
    job.runtime_estimate = Some(t.requested.max(1) * SECOND);
    if let Some(u) = t.user {
        // Made whole at once (`Job::with` would compare it with an empty one afterwards).
        job.extra = Some(Box::new(JobExtra {
            user: Some(itoa::Buffer::new().format(u).into()),
            ..JobExtra::default()
        }));
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
        // One pass over the jobs: each sum adds the finished jobs in order from -0.0, as
        // `Iterator::sum` does, so the figures are the same to the bit as a pass per sum.
        let first = self.jobs.iter().map(|j| j.submit).min().unwrap_or(0);
        let (mut done, mut last) = (0usize, None::<i64>);
        let (mut busy, mut wait, mut response, mut slowdown) = (-0.0, -0.0, -0.0, -0.0);
        for j in &self.jobs {
            let Some(end) = j.end else {
                continue;
            };
            done += 1;
            last = Some(last.map_or(end, |l| l.max(end)));
            let w = (j.start.unwrap_or(j.submit) - j.submit) as f64;
            let r = (end - j.start.unwrap_or(0)) as f64;
            busy += r * f64::from(j.processors);
            wait += w;
            response += w + r;
            slowdown += ((w + r) / r.max(10.0)).max(1.0);
        }
        let n = done.max(1) as f64;
        let makespan = last.unwrap_or(first) - first;
        Summary {
            jobs: self.jobs.len(),
            completed: done,
            refused: self.refused.len(),
            makespan,
            mean_wait: wait / n,
            mean_response: response / n,
            mean_bounded_slowdown: slowdown / n,
            utilization: if makespan > 0 && processors > 0 {
                busy / (processors as f64 * makespan as f64)
            } else {
                0.0
            },
        }
    }
}
