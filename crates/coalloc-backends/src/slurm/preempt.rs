//! Preempting local jobs for a global job at its deadline (seed 001 §2.2, GP): the running
//! jobs of a preemptible partition or QOS that are not coalloc's own launches, newest first,
//! requeued (`scontrol requeue`, falling back to `scancel` when the job cannot be requeued)
//! or cancelled, until enough processors are freed.

use super::{script, SlurmCluster};
use crate::BackendError;

/// Which local jobs may be preempted, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preempt {
    /// Only jobs of this partition (`squeue -p`).
    pub partition: Option<String>,
    /// Only jobs of this QOS (`squeue -q`).
    pub qos: Option<String>,
    /// `scontrol requeue` (the job runs again later) rather than `scancel`.
    pub requeue: bool,
}

/// `(job id, CPUs)` of the running jobs in `squeue -o "%A|%C|%j"` output that are not
/// coalloc's (their name does not start with `prefix`), in the order listed.
pub fn victims(text: &str, prefix: &str) -> Vec<(String, u32)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.trim().splitn(3, '|');
            let (id, cpus, name) = (f.next()?, f.next()?, f.next()?);
            let cpus = cpus.trim().parse().ok()?;
            (!name.starts_with(prefix) && !id.is_empty()).then(|| (id.to_string(), cpus))
        })
        .collect()
}

/// Free at least `processors` CPUs (fewer when the partition or QOS runs fewer); how many
/// were freed.
pub fn kill_local(c: &SlurmCluster, processors: u32) -> Result<u32, BackendError> {
    let p = c.config.preempt.as_ref().ok_or_else(|| {
        BackendError::Rejected(format!(
            "{}: no preemptible partition or QOS is configured (manager.preempt_partition, preempt_qos)",
            c.config.name
        ))
    })?;
    // Newest first (`-S` descending): the least work is lost.
    let mut args = vec!["-h", "-t", "R", "--sort=-S", "-o", "%A|%C|%j"];
    if let Some(part) = &p.partition {
        args.extend(["-p", part]);
    }
    if let Some(q) = &p.qos {
        args.extend(["-q", q]);
    }
    let out = c.call("squeue", &args, None)?;
    if !out.status.success() {
        return Err(c.unavailable("squeue", out.message()));
    }
    let mut freed = 0u32;
    for (id, cpus) in victims(&out.stdout, script::NAME_PREFIX) {
        if freed >= processors {
            break;
        }
        let requeued = p.requeue
            && c.call("scontrol", &["requeue", &id], None)
                .is_ok_and(|o| o.status.success());
        if !requeued {
            let o = c.call("scancel", &[&id], None)?;
            if !o.status.success() {
                // Ended meanwhile, or not ours to cancel: the next one.
                continue;
            }
        }
        freed = freed.saturating_add(cpus);
    }
    Ok(freed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coallocs_own_jobs_are_never_victims() {
        let text = "12|4|local-a\n11|2|coalloc-ab12-J1-c0-L1\n10|8|other\nbad line\n";
        assert_eq!(
            victims(text, "coalloc-"),
            vec![("12".to_string(), 4), ("10".to_string(), 8)]
        );
    }
}
