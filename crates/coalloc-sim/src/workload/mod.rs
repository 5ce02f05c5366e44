//! Synthetic workloads. Each generator draws from seeded ChaCha streams, one stream per
//! purpose (arrivals, sizes, component counts, runtimes, deadlines), so that changing one
//! parameter does not reshuffle the randomness of the others, and the same seed always gives
//! the same jobs.
//!
//! - [`rsd`]: the Realistic Synthetic Distribution of job sizes (seed 001 §2.1).
//! - [`seed001`]: seed 001's global (co-allocated) and local job streams.
//! - [`seed000`]: seed 000's KOALA workload (sizes 36 and 72, files, priorities).
//! - [`seed003`]: seed 003's batches of 40 four-component jobs.
//! - [`trace`]: SWF trace jobs as simulator jobs, whole or split over components.

pub mod rsd;
pub mod seed000;
pub mod seed001;
pub mod seed003;
pub mod trace;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The random stream for `purpose` of a run seeded with `seed`.
pub fn stream(seed: u64, purpose: Purpose) -> ChaCha8Rng {
    stream_of(seed, purpose, 0)
}

/// The random stream for `purpose` of the `index`-th source (e.g. one cluster's local jobs).
pub fn stream_of(seed: u64, purpose: Purpose, index: u32) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(((purpose as u64) << 32) | u64::from(index));
    rng
}

/// What a random stream is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Purpose {
    Arrivals = 1,
    Sizes = 2,
    Components = 3,
    Runtimes = 4,
    Deadlines = 5,
    /// Injected faults and transfers of the simulated sites.
    Failures = 6,
}

/// An exponentially distributed sample with rate `rate` (mean `1 / rate`).
pub fn exponential(rng: &mut ChaCha8Rng, rate: f64) -> f64 {
    use rand::Rng;
    // 1 - u is in (0, 1], so the logarithm is finite.
    let u: f64 = rng.random();
    -(1.0 - u).ln() / rate
}
