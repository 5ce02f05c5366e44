//! Grid Engine job states as coalloc's [`RemoteState`], and failure messages told apart.
//!
//! `qstat` prints a job's state as letters (sge_status(5)): `q` queued, `w` waiting, `h`
//! hold, `r` running, `t` transferring, `R` restarted, `s`/`S`/`T` suspended, `d` being
//! deleted, `E` error, `z` finished (zombie). A running job whose queue instance is in state
//! `u` (its execd did not report within `max_unheard`) stays `r` for ever unless rescheduling
//! is configured, so it is taken as failed here, like Slurm's `NODE_FAIL`.

use crate::RemoteState;

/// What a job's `qstat` line says, before accounting is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// A state of its own.
    State(RemoteState),
    /// In error (`Eqw`): it will never run without an operator; deleted by the backend.
    Error,
    /// Finished (`z`): the accounting record says how.
    Finished,
}

/// Classifies `state` (the job's letters) given its queue instance's state letters.
pub fn seen(state: &str, queue_state: &str) -> Seen {
    if state.contains('E') {
        return Seen::Error;
    }
    if state.contains('z') {
        return Seen::Finished;
    }
    let holds_slots = state.contains(['r', 't', 'R', 's', 'S', 'T']);
    if holds_slots && queue_state.contains('u') {
        return Seen::State(RemoteState::Lost(
            "its execution host stopped answering (queue instance in state u)".into(),
        ));
    }
    if holds_slots {
        // Suspended jobs hold their slots and resume where they stopped: still running.
        Seen::State(RemoteState::Running)
    } else {
        Seen::State(RemoteState::Queued)
    }
}

/// The end of a job from its accounting record.
pub fn finished(failed: &str, exit_status: i32) -> RemoteState {
    let code = failed.split_whitespace().next().unwrap_or("0");
    if code != "0" {
        // Grid Engine's failure codes: 37 (a limit such as h_rt enforced) and 100 (ended
        // by a signal or exit 99-ish after the job ran) are the job's own; the others (the
        // host, shepherd, queue or spool failed before or around the job) are the site's.
        let text = format!("Grid Engine: failed {failed}, exit status {exit_status}");
        if matches!(code.trim_end_matches(':'), "37" | "100") {
            RemoteState::Failed(text)
        } else {
            RemoteState::Lost(text)
        }
    } else if exit_status == 0 {
        RemoteState::Finished
    } else if exit_status > 128 {
        RemoteState::Failed(format!(
            "killed by signal {} (exit status {exit_status})",
            exit_status - 128
        ))
    } else {
        RemoteState::Failed(format!("exit code {exit_status}"))
    }
}

/// Messages of a client that could not talk to its qmaster (as opposed to a qmaster that
/// answered "no"). Matched case-insensitively.
const UNREACHABLE: &[&str] = &[
    "unable to contact qmaster",
    "unable to send message to qmaster",
    "commlib error",
    "can't find connection",
    "connection refused",
    "failed receiving gdi request",
    "please set the environment variable sge_root",
    "cell directory",
    "can't read act_qmaster",
    "unable to read qmaster name",
];

pub fn unreachable(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    UNREACHABLE.iter().any(|p| m.contains(p))
}

/// A refusal caused by the cell's own configuration as this site's settings name it (a
/// parallel environment or a queue the cell does not have), not by the job: the site's
/// fault (coalloc_core::scheduler::faults), so the component goes to another site.
pub fn site_setting_refused(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("does not exist") && (m.contains("parallel environment") || m.contains("queue"))
}

/// `qdel`'s and `qstat -j`'s answer for a job the qmaster does not know.
pub fn no_such_job(message: &str) -> bool {
    message.contains("does not exist") || message.contains("Following jobs do not exist")
}

/// `qacct`'s answer for a job without an accounting record (yet).
pub fn no_record(message: &str) -> bool {
    message.contains("not found") || message.contains("no jobs running since startup")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_classified() {
        assert_eq!(seen("qw", ""), Seen::State(RemoteState::Queued));
        assert_eq!(seen("hqw", ""), Seen::State(RemoteState::Queued));
        assert_eq!(seen("t", ""), Seen::State(RemoteState::Running));
        assert_eq!(seen("r", ""), Seen::State(RemoteState::Running));
        assert_eq!(seen("S", ""), Seen::State(RemoteState::Running));
        assert_eq!(seen("dr", ""), Seen::State(RemoteState::Running));
        assert_eq!(seen("Eqw", ""), Seen::Error);
        assert_eq!(seen("z", ""), Seen::Finished);
        assert!(matches!(seen("r", "u"), Seen::State(RemoteState::Lost(_))));
        assert!(matches!(
            seen("dr", "au"),
            Seen::State(RemoteState::Lost(_))
        ));
        assert_eq!(seen("qw", "u"), Seen::State(RemoteState::Queued));
    }

    #[test]
    fn ends_are_read_from_accounting() {
        assert_eq!(finished("0", 0), RemoteState::Finished);
        assert_eq!(finished("0", 3), RemoteState::Failed("exit code 3".into()));
        assert!(matches!(finished("0", 137), RemoteState::Failed(m) if m.contains("signal 9")));
        assert!(
            matches!(finished("37  : qmaster enforced h_rt, h_cpu, or h_vmem limit", 137), RemoteState::Failed(m) if m.contains("h_rt"))
        );
        // The site failed around the job: counted against the site.
        assert!(
            matches!(finished("1   : failed early in execd", 0), RemoteState::Lost(m) if m.contains("execd"))
        );
    }

    #[test]
    fn a_setting_the_cell_lacks_is_the_sites_refusal() {
        assert!(site_setting_refused("qsub: Unable to run job: job rejected: the requested parallel environment \"nope\" does not exist\nExiting."));
        assert!(!site_setting_refused(
            "Unable to run job: job rejected: no suitable queues.\nExiting."
        ));
    }

    #[test]
    fn failures_are_told_apart() {
        assert!(unreachable("error: commlib error: got select error (Connection refused)\nUnable to run job: unable to send message to qmaster using port 6960 on host \"vm\": got send error."));
        assert!(!unreachable(
            "Unable to run job: error: no suitable queues.\nExiting."
        ));
        assert!(!unreachable("Unable to run job: job rejected: the requested parallel environment \"x\" does not exist"));
        assert!(no_such_job("denied: job \"999\" does not exist"));
        assert!(no_such_job("The job nosuch of user(s) root does not exist"));
        assert!(no_record("error: job id 5 not found"));
    }
}
