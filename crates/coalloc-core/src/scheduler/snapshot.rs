//! Snapshots of the scheduler (issue 23, item 4): its whole state but its configuration, as
//! a serializable value, so that a driver may write it at a consistent point (between two
//! events) and, on restart, restore it and replay only the events that came after, instead
//! of every event since the first.
//!
//! Sans-IO like the rest of the core: [`Scheduler::snapshot`] borrows the state for a
//! serializer the driver picks, [`Scheduler::restore`] takes the value the driver read back.
//! Every collection in the state is ordered (vectors, deques, B-trees), so one state always
//! serializes to the same bytes: a state restored from a snapshot and the events after it
//! can be compared with one rebuilt from every event (`tests/snapshot_props.rs`).
//!
//! What a restored scheduler takes from its new configuration: the [`SchedulerConfig`]
//! (limits, fit, timeouts). What it keeps from the snapshot: the sites and their state, the
//! jobs, and the queue policy's state; so the queue policy and the sites (by name, in order)
//! must be those the snapshot was taken with.

use super::{Core, Scheduler, SchedulerConfig};
use crate::queue::saved::{Saved, SavedRef};
use serde::{Deserialize, Serialize};

/// The version of the snapshot's form; a snapshot of another version is refused.
pub const SNAPSHOT_VERSION: u32 = 1;

/// A scheduler's state, borrowed, to serialize ([`Scheduler::snapshot`]).
#[derive(Debug, Serialize)]
pub struct SnapshotRef<'a> {
    version: u32,
    core: &'a Core,
    queue: SavedRef<'a>,
}

/// A scheduler's state, deserialized, to [`Scheduler::restore`].
#[derive(Debug, Deserialize)]
pub struct Snapshot {
    version: u32,
    core: Core,
    queue: Saved,
}

/// Why a snapshot cannot be restored under a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error("the snapshot is of version {0}, this build reads version {SNAPSHOT_VERSION}")]
    Version(u32),
    #[error("the snapshot's queue policy is {saved}, the configuration's {configured}")]
    Policy {
        saved: &'static str,
        configured: &'static str,
    },
    #[error("the snapshot's sites are [{saved}], the configuration's [{configured}]")]
    Sites { saved: String, configured: String },
}

impl Scheduler {
    /// The state to serialize, or `None` if the queue policy cannot be saved (one from
    /// outside this crate). Take it between two events: what it holds is consistent then.
    pub fn snapshot(&self) -> Option<SnapshotRef<'_>> {
        Some(SnapshotRef {
            version: SNAPSHOT_VERSION,
            core: &self.core,
            queue: self.queue.saved()?,
        })
    }

    /// The scheduler a snapshot was taken of, under `config` (which must name the same
    /// queue policy) and with `sites` (the same names, in the same order).
    pub fn restore(
        config: SchedulerConfig,
        sites: &[crate::model::Site],
        saved: Snapshot,
    ) -> Result<Scheduler, RestoreError> {
        if saved.version != SNAPSHOT_VERSION {
            return Err(RestoreError::Version(saved.version));
        }
        let queue = saved.queue.into_policy();
        let configured = config.queue.build().name();
        if queue.name() != configured {
            return Err(RestoreError::Policy {
                saved: queue.name(),
                configured,
            });
        }
        let names = |s: &[crate::model::Site]| {
            s.iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if names(&saved.core.sites.sites) != names(sites) {
            return Err(RestoreError::Sites {
                saved: names(&saved.core.sites.sites),
                configured: names(sites),
            });
        }
        let mut core = saved.core;
        core.config = config;
        for j in core.jobs.values_mut() {
            core.shared.share(&mut j.job);
        }
        Ok(Scheduler { core, queue })
    }
}
