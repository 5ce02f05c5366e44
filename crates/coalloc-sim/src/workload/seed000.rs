//! The workload of seed 000 §4.2 (KOALA on the DAS): jobs of size 36 or 72 split into 3, 4,
//! 6 or 8 equal components of more than 8 processors each (so size 36 has 3 or 4), one input
//! file of 4 or 8 GB per job replicated at two different sites, a random priority, runtimes
//! between 30 and 192 s, and Poisson arrivals. Every choice is uniform, as the paper says;
//! the runtime is taken uniform on [30, 192] s (the paper gives only the range).

use super::{exponential, stream, Purpose};
use coalloc_core::model::{
    Component, FileDistribution, InputFile, Job, JobKind, Priority, Time, SECOND,
};
use rand::Rng;

/// A generated job and the two sites holding its input file's replicas.
#[derive(Debug, Clone, PartialEq)]
pub struct Seed000Job {
    pub job: Job,
    /// Its real runtime, ms (what the simulated sites run it for).
    pub runtime: i64,
    /// Indexes (into the site list) of the two sites with a replica of its file.
    pub replicas: [usize; 2],
}

/// The first `count` jobs, arriving at `rate` jobs per second, over `sites` sites (≥ 2).
pub fn jobs(rate: f64, sites: usize, seed: u64, count: usize) -> Result<Vec<Seed000Job>, String> {
    if sites < 2 {
        return Err("files are replicated at two different sites: give at least 2".to_owned());
    }
    if rate.is_nan() || rate <= 0.0 {
        return Err("the arrival rate must be positive".to_owned());
    }
    let mut arrivals = stream(seed, Purpose::Arrivals);
    let mut sizes = stream(seed, Purpose::Sizes);
    let mut comps = stream(seed, Purpose::Components);
    let mut runtimes = stream(seed, Purpose::Runtimes);
    let mut files = stream(seed, Purpose::Deadlines);
    let mut t = 0.0;
    Ok((0..count)
        .map(|k| {
            t += exponential(&mut arrivals, rate);
            let submit = (t * SECOND as f64).round() as Time;
            let size: u32 = if sizes.random_bool(0.5) { 36 } else { 72 };
            let choices: &[u32] = if size == 36 { &[3, 4] } else { &[3, 4, 6, 8] };
            let n = choices[comps.random_range(0..choices.len())];
            let high = comps.random_bool(0.5);
            let runtime = runtimes.random_range(30_000..=192_000);
            let gb: u64 = if files.random_bool(0.5) { 4 } else { 8 };
            let a = files.random_range(0..sites);
            let b = (a + files.random_range(1..sites)) % sites;
            let mut job = Job::new(
                JobKind::Unordered,
                (0..n).map(|_| Component::new(size / n)).collect(),
            )
            .with(|e| {
                e.name = Some(format!("koala-{k}").into());
                e.input_file = Some(Box::new(InputFile {
                    name: format!("input-{k}"),
                    size: gb * 1_000_000_000,
                    distribution: FileDistribution::Whole,
                }));
            });
            job.priority = if high { Priority::High } else { Priority::Low };
            job.submit = Some(submit);
            Seed000Job {
                job,
                runtime,
                replicas: [a, b],
            }
        })
        .collect())
}
