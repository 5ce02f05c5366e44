//! Telling a Slurm client's failure messages apart: a controller that could not be reached
//! (the site is unavailable) from one that answered "no" (the request is rejected), and the
//! "Invalid job id" answer for jobs the controller does not know (scripts/slurm/README.md).

/// Messages of a client that could not talk to its controller (as opposed to a controller
/// that answered "no"). Matched case-insensitively.
const UNREACHABLE: &[&str] = &[
    "unable to contact slurm controller",
    "socket timed out",
    "connection refused",
    "connect failure",
    "communication connection failure",
    "zero bytes were transmitted",
    "temporarily unable",
    "unable to process configuration file",
    "cannot stat file",
    "protocol authentication error",
    "munge",
    "transport endpoint",
    // `scontrol create reservation` with its controller stopped (seen on the rig, 22.05).
    "unexpected message received",
];

pub(super) fn unreachable(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    UNREACHABLE.iter().any(|p| m.contains(p))
}

pub(super) fn invalid_job_id(message: &str) -> bool {
    message.contains("Invalid job id")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_told_apart() {
        assert!(unreachable("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"));
        assert!(unreachable(
            "squeue: error: Socket timed out on send/recv operation"
        ));
        assert!(unreachable(
            "Error creating the reservation: Unexpected message received"
        ));
        assert!(!unreachable(
            "sbatch: error: Batch job submission failed: More processors requested than permitted"
        ));
        assert!(!unreachable("sbatch: error: Batch job submission failed: Requested node configuration is not available"));
        assert!(invalid_job_id(
            "slurm_load_jobs error: Invalid job id specified"
        ));
    }
}
