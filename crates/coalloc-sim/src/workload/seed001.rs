//! The workload of seed 001 §2.1 and §3.1: a multicluster of `C` clusters of `N` processors;
//! global jobs arrive in a Poisson stream of rate λg, have a number of components uniform on
//! `[2, C]`, all of one size (Realistic Synthetic on `[4, S]` with parameter `q`, or uniform),
//! exponential runtimes of rate μg and a deadline uniform on `[Dmin, Dmax]` after submission;
//! each cluster's local jobs arrive at rate λl with one component of Realistic Synthetic size
//! on `[1, N]` and exponential runtimes of rate μl.

use super::rsd::Rsd;
use super::{exponential, stream, stream_of, Purpose};
use coalloc_core::model::{Millis, Time, SECOND};
use rand::Rng;

/// How component sizes are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sizes {
    /// The Realistic Synthetic Distribution with this `q`.
    Realistic {
        q: f64,
    },
    Uniform,
}

/// Seed 001's global-job parameters (its §3.1 values in [`GlobalParams::paper`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GlobalParams {
    pub clusters: u32,
    /// Processors per cluster (`N`); component sizes go up to the smallest cluster, `S`.
    pub cluster_size: u32,
    pub min_size: u32,
    pub sizes: Sizes,
    /// λg, jobs per second.
    pub arrival_rate: f64,
    /// μg, per second (mean runtime 1 / μg).
    pub service_rate: f64,
    /// Deadline after submission, uniform on this range of seconds.
    pub deadline: (u32, u32),
}

impl GlobalParams {
    /// The paper's settings: 4 clusters of 32, components of 4..32 with q = 0.9, μg = 0.005,
    /// deadlines uniform on [1, 3599] s; λg is the experiment's variable.
    pub fn paper(arrival_rate: f64) -> GlobalParams {
        GlobalParams {
            clusters: 4,
            cluster_size: 32,
            min_size: 4,
            sizes: Sizes::Realistic { q: 0.9 },
            arrival_rate,
            service_rate: 0.005,
            deadline: (1, 3599),
        }
    }
}

/// One generated global job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalJob {
    pub submit: Time,
    /// The size of each component (all equal).
    pub components: Vec<u32>,
    pub runtime: Millis,
    /// The required start time.
    pub deadline: Time,
}

/// The first `count` global jobs of the stream seeded with `seed`.
pub fn global_jobs(p: &GlobalParams, seed: u64, count: usize) -> Result<Vec<GlobalJob>, String> {
    if p.clusters < 2 {
        return Err("co-allocated jobs need at least 2 clusters".to_owned());
    }
    if !(p.arrival_rate > 0.0 && p.service_rate > 0.0) {
        return Err("arrival and service rates must be positive".to_owned());
    }
    let (dmin, dmax) = p.deadline;
    if dmin > dmax {
        return Err(format!("empty deadline range [{dmin}, {dmax}]"));
    }
    let rsd = match p.sizes {
        Sizes::Realistic { q } => Some(Rsd::new(p.min_size, p.cluster_size, q)?),
        Sizes::Uniform => None,
    };
    let mut arrivals = stream(seed, Purpose::Arrivals);
    let mut sizes = stream(seed, Purpose::Sizes);
    let mut comps = stream(seed, Purpose::Components);
    let mut runtimes = stream(seed, Purpose::Runtimes);
    let mut deadlines = stream(seed, Purpose::Deadlines);
    let mut t = 0.0;
    Ok((0..count)
        .map(|_| {
            t += exponential(&mut arrivals, p.arrival_rate);
            let submit = (t * SECOND as f64).round() as Time;
            let n = comps.random_range(2..=p.clusters) as usize;
            let size = match &rsd {
                Some(r) => r.sample(&mut sizes),
                None => sizes.random_range(p.min_size..=p.cluster_size),
            };
            let runtime =
                (exponential(&mut runtimes, p.service_rate) * SECOND as f64).round() as Millis;
            let after = i64::from(deadlines.random_range(dmin..=dmax)) * SECOND;
            GlobalJob {
                submit,
                components: vec![size; n],
                runtime: runtime.max(1),
                deadline: submit + after,
            }
        })
        .collect())
}

/// Seed 001's local-job parameters for one cluster (§3.1: sizes on [1, 32] with q = 0.9,
/// μl = 0.01; λl sets the local load).
#[derive(Debug, Clone, PartialEq)]
pub struct LocalParams {
    pub cluster_size: u32,
    pub q: f64,
    /// λl, jobs per second.
    pub arrival_rate: f64,
    /// μl, per second.
    pub service_rate: f64,
}

/// One generated local job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalJob {
    pub submit: Time,
    pub size: u32,
    pub runtime: Millis,
}

/// The local jobs of cluster `cluster` that arrive before `horizon` (ms).
pub fn local_jobs(
    p: &LocalParams,
    seed: u64,
    cluster: u32,
    horizon: Time,
) -> Result<Vec<LocalJob>, String> {
    if !(p.arrival_rate > 0.0 && p.service_rate > 0.0) {
        return Err("arrival and service rates must be positive".to_owned());
    }
    let rsd = Rsd::new(1, p.cluster_size, p.q)?;
    let mut arrivals = stream_of(seed, Purpose::Arrivals, cluster + 1);
    let mut sizes = stream_of(seed, Purpose::Sizes, cluster + 1);
    let mut runtimes = stream_of(seed, Purpose::Runtimes, cluster + 1);
    let mut t = 0.0;
    let mut out = Vec::new();
    loop {
        t += exponential(&mut arrivals, p.arrival_rate);
        let submit = (t * SECOND as f64).round() as Time;
        if submit >= horizon {
            return Ok(out);
        }
        let runtime =
            (exponential(&mut runtimes, p.service_rate) * SECOND as f64).round() as Millis;
        out.push(LocalJob {
            submit,
            size: rsd.sample(&mut sizes),
            runtime: runtime.max(1),
        });
    }
}
