//! The batches of seed 003 §6.3 (the DCS experiments): 40 jobs of the Poisson application,
//! all submitted at once, each of 4 components of equal size (the 4x8 or 4x4 configuration),
//! ordered, unordered, or an even mix.
//!
//! The document does not say which clusters its ordered jobs named; here component `k` of job
//! `j` names site `(j + k) mod n` of the given sites, so ordered jobs spread over them.

use coalloc_core::model::{Component, Job, JobKind};

/// The kind of jobs in a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    Ordered,
    Unordered,
    /// Even jobs unordered, odd ones ordered: an even mix.
    Mixed,
}

/// A batch of `count` jobs of 4 components of `size` processors over `sites` (named).
pub fn batch(
    kind: BatchKind,
    size: u32,
    count: usize,
    sites: &[String],
) -> Result<Vec<Job>, String> {
    if size == 0 {
        return Err("components need at least one processor".to_owned());
    }
    if kind != BatchKind::Unordered && sites.is_empty() {
        return Err("ordered jobs need a site list".to_owned());
    }
    Ok((0..count)
        .map(|j| {
            let ordered = match kind {
                BatchKind::Ordered => true,
                BatchKind::Unordered => false,
                BatchKind::Mixed => j % 2 == 1,
            };
            let components = (0..4)
                .map(|k| Component {
                    site: ordered.then(|| sites[(j + k) % sites.len()].as_str().into()),
                    ..Component::new(size)
                })
                .collect();
            let mut job = Job::new(
                if ordered {
                    JobKind::Ordered
                } else {
                    JobKind::Unordered
                },
                components,
            );
            job.submit = Some(0);
            job.with(|e| e.name = Some(format!("poisson-{j}").into()))
        })
        .collect())
}
