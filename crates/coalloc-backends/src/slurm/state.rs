//! From Slurm's job states (squeue `%T`, scontrol `JobState=`) to the backend's
//! [`RemoteState`], and the reason text of a failure.
//!
//! Ended well is `COMPLETED` only (every process exited 0: the batch script exits non-zero
//! when one of its processes does). Every other end state is a failure, the job's own
//! (`FAILED`, `TIMEOUT`, `OUT_OF_MEMORY`, `DEADLINE`, `SPECIAL_EXIT`) or the site's
//! (`NODE_FAIL`, `BOOT_FAIL`, `CANCELLED` by someone else, `PREEMPTED`, `REVOKED`: see
//! [`coalloc_core::scheduler::faults`]), whose reason names
//! the Slurm state, the exit code when known, and Slurm's reason. States in which a job
//! still holds or will get its allocation (suspended, requeued, resizing) are not final.

use super::parse::ExitCode;
use crate::RemoteState;

/// A Slurm state word in the backend's terms; `None` for a word this backend does not know.
pub fn remote_state(
    state: &str,
    reason: Option<&str>,
    exit: Option<ExitCode>,
) -> Option<RemoteState> {
    Some(match state {
        "PENDING" | "CONFIGURING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED"
        | "RESV_DEL_HOLD" => RemoteState::Queued,
        "RUNNING" | "COMPLETING" | "SUSPENDED" | "STOPPED" | "RESIZING" | "SIGNALING"
        | "STAGE_OUT" => RemoteState::Running,
        "COMPLETED" => RemoteState::Finished,
        // The job's own end: its program failed, ran out of time or memory.
        "FAILED" | "TIMEOUT" | "OUT_OF_MEMORY" | "DEADLINE" | "SPECIAL_EXIT" => {
            RemoteState::Failed(failure(state, reason, exit))
        }
        // The site's doing: a node died or did not boot, someone else cancelled or
        // preempted it, another cluster of a federation took it.
        "CANCELLED" | "NODE_FAIL" | "PREEMPTED" | "BOOT_FAIL" | "REVOKED" => {
            RemoteState::Lost(failure(state, reason, exit))
        }
        _ => return None,
    })
}

/// `FAILED, exit code 3 (NonZeroExitCode)`, `CANCELLED`, `TIMEOUT (TimeLimit)`...
fn failure(state: &str, reason: Option<&str>, exit: Option<ExitCode>) -> String {
    let mut text = state.to_string();
    if let Some(exit) = exit.filter(|e| !e.is_success()) {
        text.push_str(&format!(", {exit}"));
    }
    if let Some(reason) = reason.filter(|r| !r.is_empty() && *r != "None" && *r != "(null)") {
        text.push_str(&format!(" ({reason})"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(s: &str) -> RemoteState {
        RemoteState::Failed(s.into())
    }

    #[test]
    fn live_and_finished_states() {
        for s in ["PENDING", "CONFIGURING", "REQUEUED"] {
            assert_eq!(
                remote_state(s, None, None),
                Some(RemoteState::Queued),
                "{s}"
            );
        }
        for s in ["RUNNING", "COMPLETING", "SUSPENDED"] {
            assert_eq!(
                remote_state(s, Some("None"), None),
                Some(RemoteState::Running),
                "{s}"
            );
        }
        assert_eq!(
            remote_state("COMPLETED", Some("None"), None),
            Some(RemoteState::Finished)
        );
    }

    #[test]
    fn failures_carry_state_exit_and_reason() {
        let exit3 = ExitCode {
            status: 3,
            signal: 0,
        };
        assert_eq!(
            remote_state("FAILED", Some("NonZeroExitCode"), Some(exit3)),
            Some(failed("FAILED, exit code 3 (NonZeroExitCode)"))
        );
        assert_eq!(
            remote_state("CANCELLED", Some("None"), None),
            Some(RemoteState::Lost("CANCELLED".into()))
        );
        let ok = ExitCode {
            status: 0,
            signal: 0,
        };
        assert_eq!(
            remote_state("TIMEOUT", Some("TimeLimit"), Some(ok)),
            Some(failed("TIMEOUT (TimeLimit)"))
        );
        for s in ["OUT_OF_MEMORY", "DEADLINE", "SPECIAL_EXIT"] {
            assert_eq!(
                remote_state(s, None, None),
                Some(failed(s)),
                "the job's own"
            );
        }
        for s in ["NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "REVOKED"] {
            let lost = RemoteState::Lost(s.into());
            assert_eq!(remote_state(s, None, None), Some(lost), "the site's");
        }
    }

    #[test]
    fn unknown_words_are_not_guessed() {
        assert_eq!(remote_state("EXPLODED", None, None), None);
        assert_eq!(remote_state("", None, None), None);
    }
}
