//! Trace jobs as simulator jobs (issue "Simulator", part 3): an SWF job becomes a
//! one-component job of its processors, as [`crate::replay`] runs it, or is split over
//! several components of near-equal size, so a trace can drive co-allocation.

use crate::engine::SimJob;
use crate::replay::{job_of, TraceJob};
use coalloc_core::model::{Component, JobKind, SECOND};

/// How a trace job is mapped to components.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Split {
    /// One component of all its processors.
    #[default]
    Whole,
    /// `k` components (fewer for jobs of fewer than `k` processors).
    Components(u32),
    /// As few components as keep each at most this size.
    MaxSize(u32),
}

/// The sizes of the components of a job of `processors` under `split`: near-equal (they
/// differ by at most one, larger first) and summing to `processors`.
pub fn sizes(processors: u32, split: Split) -> Vec<u32> {
    let k = match split {
        Split::Whole => 1,
        Split::Components(k) => k.clamp(1, processors.max(1)),
        Split::MaxSize(s) => processors.div_ceil(s.max(1)).max(1),
    };
    let (base, extra) = (processors / k, processors % k);
    (0..k).map(|i| base + u32::from(i < extra)).collect()
}

/// Every trace job as a simulator job, in file order.
pub fn sim_jobs(jobs: &[TraceJob], split: Split) -> Vec<SimJob> {
    jobs.iter().map(|t| sim_job(t, split)).collect()
}

/// A trace job as a simulator job. A split job is unordered (the scheduler picks its sites).
pub fn sim_job(t: &TraceJob, split: Split) -> SimJob {
    let mut job = job_of(t, t.submit * SECOND);
    // A whole job is one component already (a replay's every job: no list made for it).
    if split != Split::Whole {
        let parts = sizes(t.processors, split);
        if parts.len() > 1 {
            job.kind = JobKind::Unordered;
            job.components = parts.into_iter().map(Component::new).collect();
        }
    }
    SimJob {
        tag: t.number,
        job,
        runtime: t.runtime.max(0) * SECOND,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_are_near_equal_and_keep_the_total() {
        assert_eq!(sizes(10, Split::Whole), vec![10]);
        assert_eq!(sizes(10, Split::Components(3)), vec![4, 3, 3]);
        assert_eq!(sizes(2, Split::Components(4)), vec![1, 1]);
        assert_eq!(sizes(70, Split::MaxSize(32)), vec![24, 23, 23]);
        assert_eq!(sizes(64, Split::MaxSize(32)), vec![32, 32]);
    }
}
