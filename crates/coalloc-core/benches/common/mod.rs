//! What the benches share: the queued jobs they measure with.

use coalloc_core::model::{Component, Job, JobKind};

/// The `k`-th queued job of a bench: two components of 4 to 36 processors, no strings.
pub fn queued_job(k: usize) -> Job {
    Job::new(
        JobKind::Unordered,
        [4 + (k * 7 % 29) as u32, 4 + (k * 11 % 13) as u32]
            .into_iter()
            .map(Component::new)
            .collect(),
    )
}
