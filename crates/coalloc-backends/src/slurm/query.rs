//! `query`: the states of many jobs of one cluster in as few commands as possible.
//!
//! One `squeue -h -t all -j ID1,ID2,... -o '%i|%T|%r'` answers for every job the controller
//! still holds (`-t all` keeps finished ones; `--json` is not used because 22.05 ignores
//! `-j` there). A job missing from that answer, usually one purged after `MinJobAge`, is
//! asked of `scontrol show job -o ID` once; if that does not know it either, it is
//! `Unknown`. `squeue` fails outright when a single requested id is unknown, so on an
//! "Invalid job id" error every id is asked of `scontrol` instead. A `FAILED` job is also
//! asked of `scontrol`, for its exit code (best effort).

use super::classify::invalid_job_id;
use super::parse::{self, ControlJob};
use super::state::remote_state;
use super::SlurmCluster;
use crate::{BackendError, RemoteId, RemoteState};
use std::collections::HashMap;

pub(super) fn query(c: &SlurmCluster, ids: &[RemoteId]) -> Result<Vec<RemoteState>, BackendError> {
    let mut wanted: Vec<&str> = ids
        .iter()
        .map(String::as_str)
        .filter(|id| parse::is_job_id(id))
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut known: HashMap<&str, RemoteState> = HashMap::new();
    if !wanted.is_empty() {
        let list = wanted.join(",");
        let out = c.call(
            "squeue",
            &["-h", "-t", "all", "-j", &list, "-o", "%i|%T|%r"],
            None,
        )?;
        if out.status.success() {
            let lines =
                parse::squeue_states(&out.stdout).map_err(|e| c.unavailable("squeue", e))?;
            for line in lines {
                let Some(&id) = wanted.iter().find(|w| **w == line.id) else {
                    continue;
                };
                let state = if line.state == "FAILED" {
                    // For the exit code; squeue's own answer if scontrol has nothing better.
                    match control(c, id) {
                        Ok(Some(j)) if j.state == "FAILED" => job_state(c, &j)?,
                        _ => remote_state(&line.state, Some(&line.reason), None)
                            .ok_or_else(|| c.unavailable("squeue", "unknown state FAILED"))?,
                    }
                } else {
                    remote_state(&line.state, Some(&line.reason), None).ok_or_else(|| {
                        c.unavailable("squeue", format!("unknown job state {:?}", line.state))
                    })?
                };
                known.insert(id, state);
            }
        } else if !invalid_job_id(&out.message()) {
            return Err(c.unavailable("squeue", out.message()));
        }
    }
    for id in wanted {
        if known.contains_key(id) {
            continue;
        }
        let state = match control(c, id)? {
            Some(j) => job_state(c, &j)?,
            None => RemoteState::Unknown,
        };
        known.insert(id, state);
    }
    Ok(crate::run::in_order(ids, &known))
}

/// `scontrol show job -o ID`; `None` when the controller does not know the job.
fn control(c: &SlurmCluster, id: &str) -> Result<Option<ControlJob>, BackendError> {
    let out = c.call("scontrol", &["show", "job", "-o", id], None)?;
    if !out.status.success() {
        let message = out.message();
        return if invalid_job_id(&message) {
            Ok(None)
        } else {
            Err(c.unavailable("scontrol", message))
        };
    }
    parse::scontrol_job(&out.stdout, id)
        .map(Some)
        .map_err(|e| c.unavailable("scontrol", e))
}

fn job_state(c: &SlurmCluster, j: &ControlJob) -> Result<RemoteState, BackendError> {
    remote_state(&j.state, j.reason.as_deref(), j.exit)
        .ok_or_else(|| c.unavailable("scontrol", format!("unknown job state {:?}", j.state)))
}
