//! One run's inputs from a resolved experiment file and a seed: the sites, the scheduler's
//! configuration, the workload and the simulator's parameters.

use super::spec::{ExperimentDoc, LocalDoc, SimDoc, WorkloadDoc};
use crate::engine::site::Local;
use crate::engine::{
    Failures, Jobs, LinkLoss, Outage, SimJob, SimParams, TraceJobs, TraceWork, Workload,
};
use crate::replay::{trace_jobs, TraceJob};
use crate::swf;
use crate::workload::rsd::Rsd;
use crate::workload::seed001::{self, GlobalParams, LocalParams, Sizes};
use crate::workload::seed003::{self, BatchKind};
use crate::workload::trace::Split;
use crate::workload::{seed000, Purpose};
use coalloc_core::model::{Job, JobKind, Site, Time};
use coalloc_core::scheduler::{QueueConfig, SchedulerConfig};
use coalloc_core::spec::scheduler::scheduler_config;
use coalloc_core::spec::sites::sites_from_docs;
use coalloc_core::spec::units::{parse_duration, parse_size, Scalar};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Generated jobs as an owned workload (local jobs are added later).
fn owned(jobs: Vec<SimJob>) -> Jobs<'static> {
    Jobs::Owned(Workload {
        jobs,
        local: Vec::new(),
    })
}

/// Everything [`crate::engine::simulate`] needs.
#[derive(Debug, Clone)]
pub struct RunInput {
    pub sites: Vec<Site>,
    pub config: SchedulerConfig,
    /// A trace's jobs are made into the core's jobs at their arrival ([`TraceWork`]).
    pub workload: Jobs<'static>,
    pub params: SimParams,
}

/// Build one run. `base` is the experiment file's folder (trace paths are relative to it).
pub fn build(doc: &ExperimentDoc, seed: u64, base: &Path) -> Result<RunInput, String> {
    build_with(doc, seed, base, &TraceCache::default())
}

/// The traces the runs of one experiment read, each read once: a sweep runs the same trace
/// tens of times (seed 004's 637 runs read 7 traces), and a whole trace takes as long to
/// read as a quick run takes to simulate. Kept by `(path, max_processors, first)`; runs on
/// several threads share it (a trace two threads want at once is read once).
#[derive(Debug, Default)]
pub struct TraceCache {
    traces: std::sync::Mutex<BTreeMap<TraceKey, Arc<OnceLock<TraceRead>>>>,
}

/// A trace's path and the filter's `max_processors` and `first`.
type TraceKey = (PathBuf, Option<i64>, Option<usize>);

/// A trace's jobs, or why it could not be read.
type TraceRead = Result<Arc<[TraceJob]>, String>;

impl TraceCache {
    /// The replayable jobs of the trace at `path` that `filter` keeps (see [`swf::read`]).
    fn jobs(&self, path: &Path, filter: &swf::Filter) -> Result<Arc<[TraceJob]>, String> {
        let key = (path.to_path_buf(), filter.max_processors, filter.first);
        let slot = {
            let mut traces = self.traces.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(traces.entry(key).or_default())
        };
        slot.get_or_init(|| {
            // Through the whole trace, not `read_trace_jobs`: its vector, reserved for a
            // guess of the trace's length and freed after the shared copy is made, stayed
            // in the allocator's pages and held 17 MB more in `coalloc sim` EASY SDSC-BLUE
            // (136 -> 153 MB); the whole trace's larger block goes back to the system.
            swf::read(path, filter)
                .map(|trace| trace_jobs(&trace).into())
                .map_err(|e| e.with_file(&path.display().to_string()).to_string())
        })
        .clone()
    }
}

/// [`build`], reading traces through `traces`.
pub fn build_with(
    doc: &ExperimentDoc,
    seed: u64,
    base: &Path,
    traces: &TraceCache,
) -> Result<RunInput, String> {
    let mut sites = sites_from_docs(&doc.site).map_err(|e| e.to_string())?;
    if sites.is_empty() {
        return Err("the experiment has no [[site]]".to_owned());
    }
    let config = scheduler_config(&doc.scheduler, &sites).map_err(|e| e.to_string())?;
    let w = &doc.workload;
    let mut jobs = jobs(w, seed, &mut sites, base, traces)?;
    // Seed 004 §IV-A 3: SJF-ideal "assumes perfect prior knowledge of the job runtimes", and
    // the policy reads that knowledge from `runtime_estimate`. The generated workloads put
    // the true runtime there already; a trace puts the user's requested time, so SJF-ideal
    // would be SJF on user estimates. Give it the true runtimes (1 ms for a zero runtime:
    // an estimate must be positive).
    if matches!(config.queue, QueueConfig::SjfIdeal(_)) {
        match &mut jobs {
            Jobs::Trace(t) => t.true_runtimes = true,
            Jobs::Owned(w) => {
                for j in &mut w.jobs {
                    j.job.runtime_estimate = Some(j.runtime.max(1));
                }
            }
            Jobs::Borrowed(_) => {}
        }
    }
    let horizon = (0..jobs.len())
        .filter_map(|i| jobs.submit(i))
        .max()
        .unwrap_or(0);
    let local = match &w.local {
        Some(l) => {
            let until = l
                .until
                .as_ref()
                .map(|u| duration(u, "workload.local.until"))
                .transpose()?;
            local(l, &sites, seed, horizon.max(until.unwrap_or(0)))?
        }
        None => Vec::new(),
    };
    let params = params(&doc.sim, seed, &sites)?;
    match &mut jobs {
        Jobs::Trace(t) => t.local = local,
        Jobs::Owned(w) => w.local = local,
        Jobs::Borrowed(_) => {}
    }
    Ok(RunInput {
        sites,
        config,
        workload: jobs,
        params,
    })
}

fn need<T: Copy>(v: Option<T>, kind: &str, key: &str) -> Result<T, String> {
    v.ok_or_else(|| format!("workload: kind \"{kind}\" needs `{key}`"))
}

/// Refuse keys the workload kind does not use, so a typo'd experiment does not silently run
/// something else.
fn only(w: &WorkloadDoc, allowed: &[&str]) -> Result<(), String> {
    let set = [
        ("jobs", w.jobs.is_some()),
        ("arrival_rate", w.arrival_rate.is_some()),
        ("load", w.load.is_some()),
        ("service_rate", w.service_rate.is_some()),
        ("sizes", w.sizes.is_some()),
        ("q", w.q.is_some()),
        ("min_size", w.min_size.is_some()),
        ("deadline", w.deadline.is_some()),
        ("batch", w.batch.is_some()),
        ("size", w.size.is_some()),
        ("count", w.count.is_some()),
        ("runtime", w.runtime.is_some()),
        ("at", w.at.is_some()),
        ("trace", w.trace.is_some()),
        ("max_procs", w.max_procs.is_some()),
        ("split", w.split.is_some()),
        ("max_component", w.max_component.is_some()),
    ];
    match set.iter().find(|(k, on)| *on && !allowed.contains(k)) {
        Some((k, _)) => Err(format!(
            "workload: `{k}` does not apply to kind \"{}\"",
            w.kind
        )),
        None => Ok(()),
    }
}

fn jobs(
    w: &WorkloadDoc,
    seed: u64,
    sites: &mut [Site],
    base: &Path,
    traces: &TraceCache,
) -> Result<Jobs<'static>, String> {
    let kind = w.kind.as_str();
    match kind {
        "seed001" => {
            only(
                w,
                &[
                    "jobs",
                    "arrival_rate",
                    "load",
                    "service_rate",
                    "sizes",
                    "q",
                    "min_size",
                    "deadline",
                ],
            )?;
            let clusters = sites.len() as u32;
            let cluster_size = sites.iter().map(|s| s.processors).min().unwrap_or(0);
            let q = w.q.unwrap_or(0.9);
            let min_size = w.min_size.unwrap_or(4);
            let sizes = match w.sizes.as_deref().unwrap_or("realistic") {
                "realistic" => Sizes::Realistic { q },
                "uniform" => Sizes::Uniform,
                other => {
                    return Err(format!(
                        "workload.sizes: \"{other}\" is not one of realistic, uniform"
                    ))
                }
            };
            let service_rate = w.service_rate.unwrap_or(0.005);
            let arrival_rate = match (w.arrival_rate, w.load) {
                (Some(r), None) => r,
                (None, Some(load)) => {
                    // Ug = λg · E[Nc] · E[Sg] / (μg · N · C), seed 001 §3.1.
                    let e_nc = (2.0 + f64::from(clusters)) / 2.0;
                    let e_sg = match sizes {
                        Sizes::Realistic { q } => Rsd::new(min_size, cluster_size, q)?.mean(),
                        Sizes::Uniform => (f64::from(min_size) + f64::from(cluster_size)) / 2.0,
                    };
                    load * service_rate * f64::from(cluster_size) * f64::from(clusters)
                        / (e_nc * e_sg)
                }
                _ => return Err("workload: give one of `arrival_rate` and `load`".to_owned()),
            };
            let p = GlobalParams {
                clusters,
                cluster_size,
                min_size,
                sizes,
                arrival_rate,
                service_rate,
                deadline: w.deadline.map_or((1, 3599), |[a, b]| (a, b)),
            };
            let jobs = seed001::global_jobs(&p, seed, need(w.jobs, kind, "jobs")?)?;
            Ok(owned(
                jobs.into_iter()
                    .enumerate()
                    .map(|(i, g)| {
                        let mut job = Job::new(
                            JobKind::Unordered,
                            g.components
                                .iter()
                                .map(|&n| coalloc_core::model::Component::new(n))
                                .collect(),
                        );
                        job.submit = Some(g.submit);
                        job.set_deadline(Some(g.deadline));
                        known_runtime(i, job, g.runtime)
                    })
                    .collect(),
            ))
        }
        "seed000" => {
            only(w, &["jobs", "arrival_rate"])?;
            let rate = need(w.arrival_rate, kind, "arrival_rate")?;
            let jobs = seed000::jobs(rate, sites.len(), seed, need(w.jobs, kind, "jobs")?)?;
            Ok(owned(
                jobs.into_iter()
                    .enumerate()
                    .map(|(i, g)| {
                        if let Some(f) = g.job.input_file() {
                            for &s in &g.replicas {
                                sites[s].files.push(f.name.clone());
                            }
                        }
                        known_runtime(i, g.job, g.runtime)
                    })
                    .collect(),
            ))
        }
        "seed003" => {
            only(w, &["batch", "size", "count", "runtime", "at"])?;
            let batch = match w.batch.as_deref().unwrap_or("unordered") {
                "ordered" => BatchKind::Ordered,
                "unordered" => BatchKind::Unordered,
                "mixed" => BatchKind::Mixed,
                other => {
                    return Err(format!(
                        "workload.batch: \"{other}\" is not one of ordered, unordered, mixed"
                    ))
                }
            };
            let names: Vec<String> = sites.iter().map(|s| s.name.clone()).collect();
            let runtime = duration(
                need(w.runtime.as_ref(), kind, "runtime")?,
                "workload.runtime",
            )?;
            let jobs = seed003::batch(
                batch,
                need(w.size, kind, "size")?,
                w.count.unwrap_or(40),
                &names,
            )?;
            let at =
                w.at.as_ref()
                    .map(|v| duration(v, "workload.at"))
                    .transpose()?
                    .unwrap_or(0);
            Ok(owned(
                jobs.into_iter()
                    .enumerate()
                    .map(|(i, mut job)| {
                        job.submit = Some(at);
                        known_runtime(i, job, runtime)
                    })
                    .collect(),
            ))
        }
        "swf" => {
            only(w, &["trace", "jobs", "max_procs", "split", "max_component"])?;
            let path = base.join(need(w.trace.as_ref(), kind, "trace")?);
            let filter = swf::Filter {
                max_processors: w.max_procs.map(i64::from),
                first: w.jobs,
                ..swf::Filter::default()
            };
            let trace = traces.jobs(&path, &filter)?;
            let split = match (w.split, w.max_component) {
                (None, None) => Split::Whole,
                (Some(k), None) => Split::Components(k),
                (None, Some(s)) => Split::MaxSize(s),
                _ => return Err("workload: give at most one of `split` and `max_component`".into()),
            };
            Ok(Jobs::Trace(TraceWork {
                jobs: TraceJobs::Shared(trace),
                split,
                true_runtimes: false,
                local: Vec::new(),
            }))
        }
        other => Err(format!(
            "workload.kind: \"{other}\" is not one of seed001, seed000, seed003, swf"
        )),
    }
}

/// Every site's local jobs up to `horizon` (the last arrival of the workload).
fn local(
    l: &LocalDoc,
    sites: &[Site],
    seed: u64,
    horizon: Time,
) -> Result<Vec<Vec<Local>>, String> {
    let q = l.q.unwrap_or(0.9);
    let service_rate = l.service_rate.unwrap_or(0.01);
    sites
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let arrival_rate = match (l.arrival_rate, l.load) {
                (Some(r), None) => r,
                // Ul = λl · E[Sl] / (μl · N), seed 001 §3.1.
                (None, Some(load)) => {
                    load * service_rate * f64::from(s.processors)
                        / Rsd::new(1, s.processors, q)?.mean()
                }
                _ => return Err("workload.local: give one of `arrival_rate` and `load`".into()),
            };
            let p = LocalParams {
                cluster_size: s.processors,
                q,
                arrival_rate,
                service_rate,
            };
            Ok(seed001::local_jobs(&p, seed, i as u32, horizon)?
                .into_iter()
                .map(|j| Local {
                    submit: j.submit,
                    size: j.size,
                    runtime: j.runtime,
                })
                .collect())
        })
        .collect()
}

fn duration(v: &Scalar, key: &str) -> Result<i64, String> {
    parse_duration(v).map_err(|e| format!("{key}: {e}"))
}

fn params(doc: &SimDoc, seed: u64, sites: &[Site]) -> Result<SimParams, String> {
    let d = SimParams::default();
    let dur = |v: &Option<Scalar>, key: &str| v.as_ref().map(|v| duration(v, key)).transpose();
    let outages = doc
        .outages
        .iter()
        .map(|o| {
            let site = sites
                .iter()
                .position(|s| s.name == o.site)
                .ok_or_else(|| format!("sim.outages: no site named \"{}\"", o.site))?;
            Ok(Outage {
                site,
                from: duration(&o.from, "sim.outages.from")?,
                to: duration(&o.to, "sim.outages.to")?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let link_losses = doc
        .link_losses
        .iter()
        .map(|o| {
            let site = sites
                .iter()
                .position(|s| s.name == o.site)
                .ok_or_else(|| format!("sim.link_losses: no site named \"{}\"", o.site))?;
            Ok(LinkLoss {
                site,
                from: duration(&o.from, "sim.link_losses.from")?,
                to: duration(&o.to, "sim.link_losses.to")?,
                grace: dur(&o.grace, "sim.link_losses.grace")?.unwrap_or(60_000),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    for (key, p) in [
        ("sim.start_failure", doc.start_failure),
        ("sim.transfer_failure", doc.transfer_failure),
        ("sim.lease_failure", doc.lease_failure),
    ] {
        if p.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
            return Err(format!("{key}: must be a probability in [0, 1]"));
        }
    }
    Ok(SimParams {
        // Fault draws get their own seed space, away from the workload's streams.
        seed: seed ^ ((Purpose::Failures as u64) << 56),
        start_latency: dur(&doc.start_latency, "sim.start_latency")?.unwrap_or(0),
        monitor_interval: dur(&doc.monitor_interval, "sim.monitor_interval")?,
        bandwidth: match &doc.bandwidth {
            Some(v) => parse_size(v).map_err(|e| format!("sim.bandwidth: {e}"))?,
            None => d.bandwidth,
        },
        failures: Failures {
            start: doc.start_failure.unwrap_or(0.0),
            mtbf: dur(&doc.mtbf, "sim.mtbf")?,
            transfer: doc.transfer_failure.unwrap_or(0.0),
            lease: doc.lease_failure.unwrap_or(0.0),
            outages,
            link_losses,
        },
        reenable_after_outage: doc.reenable_after_outage.unwrap_or(true),
        sample_interval: dur(&doc.sample_interval, "sim.sample_interval")?,
        window_end: dur(&doc.window_end, "sim.window_end")?,
        give_up_after: dur(&doc.give_up_after, "sim.give_up_after")?.unwrap_or(d.give_up_after),
        ..d
    })
}

/// Job `i` of a synthetic workload, whose runtime the scheduler is told exactly.
fn known_runtime(
    i: usize,
    mut job: coalloc_core::model::Job,
    runtime: coalloc_core::model::Millis,
) -> SimJob {
    job.runtime_estimate = Some(runtime);
    SimJob {
        tag: i as i64,
        job,
        runtime,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 004 §IV-A 3: under SJF-ideal a trace job's estimate is its true runtime (SWF
    /// field 4), under the other policies its requested time (field 9).
    #[test]
    fn sjf_ideal_sees_the_true_runtimes_of_a_trace() {
        let dir = std::env::temp_dir().join(format!("coalloc-build-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Job 1: runtime 100 s, requested 1000 s; job 2: runtime 50 s, requested 60 s; job 3:
        // runtime 0, requested 10 s (its exact estimate is 1 ms).
        std::fs::write(
            dir.join("t.swf"),
            "1 0 0 100 4 -1 -1 4 1000 -1 1 1 1 -1 -1 -1 -1 -1\n\
             2 5 0 50 2 -1 -1 2 60 -1 1 2 1 -1 -1 -1 -1 -1\n\
             3 6 0 0 1 -1 -1 1 10 -1 1 2 1 -1 -1 -1 -1 -1\n",
        )
        .unwrap();
        let estimates = |policy: &str| {
            let text = format!(
                "name = \"t\"\n[[site]]\nname = \"c\"\nprocessors = 8\n\
                 [scheduler]\npolicy = \"{policy}\"\n\
                 [workload]\nkind = \"swf\"\ntrace = \"t.swf\"\n"
            );
            let doc: ExperimentDoc = toml::from_str(&text).unwrap();
            let run = build(&doc, 1, &dir).unwrap();
            let mut w = run.workload;
            (0..w.len())
                .map(|i| w.submission(i, false).runtime_estimate.unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(estimates("sjf-ideal"), [100_000, 50_000, 1]);
        assert_eq!(estimates("sjf"), [1_000_000, 60_000, 10_000]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Seed 003 §6.3 with other users that come and go: the batch arrives at `at`, local
    /// jobs arrive from 0 until `until`, drawn from the seed.
    #[test]
    fn a_seed003_batch_arrives_at_its_time_beside_local_jobs() {
        let text = |at: &str| {
            format!(
                "name = \"t\"\n[[site]]\nname = \"a\"\nprocessors = 64\n\
                 [[site]]\nname = \"b\"\nprocessors = 32\n\
                 [scheduler]\npolicy = \"fcfs\"\n\
                 [workload]\nkind = \"seed003\"\nsize = 8\ncount = 3\nruntime = \"90s\"\n{at}\
                 [workload.local]\nload = 0.3\nuntil = \"2000s\"\n"
            )
        };
        let doc: ExperimentDoc = toml::from_str(&text("at = \"600s\"\n")).unwrap();
        let run = build(&doc, 7, Path::new(".")).unwrap();
        let submits: Vec<_> = (0..run.workload.len())
            .map(|i| run.workload.submit(i))
            .collect();
        assert_eq!(submits, vec![Some(600_000); 3]);
        assert_eq!(run.workload.local().len(), 2);
        for site in run.workload.local() {
            assert!(!site.is_empty());
            assert!(site.iter().all(|l| l.submit < 2_000_000));
            // Local jobs arrive before the batch too: the load is there when it comes.
            assert!(site.iter().any(|l| l.submit < 600_000));
        }
        // The same seed gives the same local jobs; another seed others.
        let again = build(&doc, 7, Path::new(".")).unwrap();
        assert_eq!(again.workload.local(), run.workload.local());
        let other = build(&doc, 8, Path::new(".")).unwrap();
        assert_ne!(other.workload.local(), run.workload.local());
        // Run it: the three jobs start at 600 s or later, all finish, and local jobs ended
        // before the batch arrived.
        let out = crate::engine::simulate(
            run.sites.clone(),
            run.config.clone(),
            run.workload,
            &run.params,
        )
        .unwrap();
        let m = crate::metrics::Metrics::of(&out);
        assert_eq!(m.finished, 3);
        for j in &out.jobs {
            assert!(j.record.as_ref().unwrap().start().unwrap() >= 600_000);
        }
        let early = out
            .local
            .iter()
            .flatten()
            .filter(|f| f.end.is_some_and(|e| e < 600_000))
            .count();
        assert!(early > 0, "local jobs ran before the batch");
        // Without `at` the batch comes at 0; a negative time is refused.
        let doc: ExperimentDoc = toml::from_str(&text("")).unwrap();
        let run = build(&doc, 7, Path::new(".")).unwrap();
        assert!((0..run.workload.len()).all(|i| run.workload.submit(i) == Some(0)));
        let doc: ExperimentDoc = toml::from_str(&text("at = -5\n")).unwrap();
        assert_eq!(
            build(&doc, 7, Path::new(".")).unwrap_err(),
            "workload.at: must not be negative (got -5)"
        );
    }

    /// A trace is read once per cache and filter, and what the runs get is the same jobs;
    /// a failed read is kept too (every run of it fails alike).
    #[test]
    fn a_trace_cache_reads_each_trace_once() {
        let dir = std::env::temp_dir().join(format!("coalloc-trace-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.swf");
        let text = "1 0 0 100 4 -1 -1 4 1000 -1 1 1 1 -1 -1 -1 -1 -1\n\
                    2 5 0 50 64 -1 -1 64 100 -1 1 1 1 -1 -1 -1 -1 -1\n";
        std::fs::write(&path, text).unwrap();
        let cache = TraceCache::default();
        let all = swf::Filter::default();
        let small = swf::Filter::max_processors(32);
        let a = cache.jobs(&path, &all).unwrap();
        let b = cache.jobs(&path, &small).unwrap();
        assert_eq!((a.len(), b.len()), (2, 1));
        std::fs::remove_file(&path).unwrap();
        // Gone from the disk, still in the cache: not read again.
        let again = cache.jobs(&path, &all).unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        let read = trace_jobs(&swf::parse(text.as_bytes(), &all).unwrap());
        assert_eq!(&again[..], &read[..]);
        let fresh = TraceCache::default();
        let err = fresh.jobs(&path, &all).unwrap_err();
        assert!(err.contains("t.swf"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
