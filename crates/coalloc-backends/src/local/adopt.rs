//! Adoption: what a new `LocalCluster` finds in its work directory from an earlier server.
//! A launch with `final.json` has ended and keeps its state; one with a process group that
//! still has a live process runs on and is watched again; one whose processes are all gone
//! ended while nobody watched, and its `exit.R` files tell how; one that never started is
//! queued again, in launch order.

use super::process::{self, Final, Stored};
use super::{Inner, Launch, Phase};
use crate::{BackendError, RemoteState};
use std::path::Path;

pub(super) fn adopt(work_dir: &Path, inner: &mut Inner) -> Result<(), BackendError> {
    let mut found: Vec<(u64, String, Stored)> = Vec::new();
    for dir in super::launch_dirs(work_dir) {
        let Some(name) = dir.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            continue;
        };
        let Ok(bytes) = std::fs::read(dir.join("launch.json")) else {
            continue;
        };
        let Ok(stored) = serde_json::from_slice::<Stored>(&bytes) else {
            tracing_warn(&dir, "launch.json unreadable; ignored");
            continue;
        };
        found.push((stored.request.launch, name, stored));
    }
    found.sort_by_key(|(launch, _, _)| *launch);
    for (_, id, stored) in found {
        let dir = work_dir.join(&id);
        let request = stored.request;
        let phase = if let Ok(bytes) = std::fs::read(dir.join("final.json")) {
            match serde_json::from_slice::<Final>(&bytes) {
                Ok(Final::Finished) => Phase::Done(RemoteState::Finished),
                Ok(Final::Failed { reason }) => Phase::Done(RemoteState::Failed(reason)),
                Err(_) => Phase::Done(RemoteState::Failed("final state unreadable".into())),
            }
        } else if let (Some(pgid), Some(started)) = (stored.pgid, stored.started_ms) {
            if process::group_alive(pgid) {
                inner.busy += request.count;
                Phase::Running(process::adopted(pgid, started, request.wall_time_ms))
            } else {
                let state = process::outcome(&dir, request.processes);
                process::write_final(&dir, &state);
                Phase::Done(state)
            }
        } else {
            inner.queue.push_back(id.clone());
            Phase::Queued
        };
        inner.launches.insert(id, Launch { request, phase });
    }
    Ok(())
}

fn tracing_warn(dir: &Path, what: &str) {
    eprintln!("coalloc local backend: {}: {what}", dir.display());
}
