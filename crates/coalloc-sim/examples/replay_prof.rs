//! A profiling aid for the engine (issue 34): time a trace replay's parse and run apart, or
//! some runs of an experiment, and print a hash of each schedule, so that a change can be
//! checked for the same schedules and counted in instructions without building the CLI:
//!
//! ```text
//! cargo build --profile release-quick -p coalloc-sim --example replay_prof
//! target/release-quick/examples/replay_prof TRACE.swf.gz SITES.toml easy
//! target/release-quick/examples/replay_prof exp experiments/seed-004/sweep.toml 0 1 2
//! valgrind --tool=callgrind target/release-quick/examples/replay_prof ...
//! ```
//!
//! The hash is FNV-1a over each job's number (tag), submit, start and end; an experiment's
//! run also prints one over its sites' processor-time integrals.
use coalloc_core::scheduler::QueueConfig;
use coalloc_core::spec::scheduler::parse_config;
use coalloc_sim::experiment::{build::TraceCache, run_one_with, Experiment};
use coalloc_sim::replay::{read_trace_jobs, replay};
use coalloc_sim::swf;
use std::time::Instant;

fn hash(values: impl Iterator<Item = i64>) -> u64 {
    values.fold(0xcbf2_9ce4_8422_2325, |h, v| {
        (h ^ v as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [exp, path, runs @ ..] if exp == "exp" => experiment(path, runs),
        [trace, sites, policy] => trace_replay(trace, sites, policy),
        _ => Err("usage: replay_prof TRACE SITES POLICY | replay_prof exp FILE RUN...".into()),
    }
}

fn trace_replay(trace: &str, sites: &str, policy: &str) -> Result<(), String> {
    let t0 = Instant::now();
    let text = std::fs::read_to_string(sites).map_err(|e| e.to_string())?;
    let (sites, mut config) = parse_config(&text).map_err(|e| e.to_string())?;
    config.queue = QueueConfig::from_name(policy).map_err(|e| e.to_string())?;
    let jobs = read_trace_jobs(trace, &swf::Filter::default()).map_err(|e| e.to_string())?;
    let t1 = Instant::now();
    let r = replay(&jobs, sites, config).map_err(|e| e.to_string())?;
    let t2 = Instant::now();
    let h = hash(r.jobs.iter().flat_map(|j| {
        [
            j.number,
            j.submit,
            j.start.unwrap_or(-1),
            j.end.unwrap_or(-1),
        ]
    }));
    eprintln!(
        "parse {:?} engine {:?} jobs {} hash {h:016x}",
        t1 - t0,
        t2 - t1,
        r.jobs.len()
    );
    Ok(())
}

fn experiment(path: &str, runs: &[String]) -> Result<(), String> {
    let path = std::path::Path::new(path);
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let exp = Experiment::parse(&text, path)?;
    let all = exp.runs()?;
    let traces = TraceCache::default();
    for k in runs {
        let k: usize = k.parse().map_err(|_| format!("{k}: not a run number"))?;
        let run = all
            .get(k)
            .ok_or(format!("run {k}: there are {}", all.len()))?;
        let t0 = Instant::now();
        let o = run_one_with(run, &exp.base, &traces)?;
        let h = hash(o.jobs.iter().flat_map(|j| {
            let r = j.record.as_ref();
            let time = |t: Option<i64>| t.unwrap_or(-1);
            [
                j.tag,
                j.submit,
                time(r.and_then(|r| r.start())),
                time(r.and_then(|r| r.end())),
            ]
        }));
        // The sites' processor-time integrals too (the load metrics are made of them).
        let u = hash(
            o.usage
                .iter()
                .flat_map(|u| [u.local, u.held, u.running, u.reserved].map(|x| x as i64)),
        );
        eprintln!(
            "run {k}: {:?} jobs {} hash {h:016x} usage {u:016x}",
            t0.elapsed(),
            o.jobs.len()
        );
    }
    Ok(())
}
