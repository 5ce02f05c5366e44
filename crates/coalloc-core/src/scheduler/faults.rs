//! Failure classes: who a failed launch counts against. This is the one place that says it;
//! drivers and backends only say which class a failure is, with [`Fault`] on
//! [`Event::ComponentFailed`](super::Event::ComponentFailed).
//!
//! Seed 000 §3.4 and seed 003 §4.3.4 count the errors *of a cluster*: consecutive errors make
//! it unusable. A user's program that fails is not an error of the cluster it ran on, so a
//! bad job must not take healthy sites out (issue 20). Both classes count against the job's
//! own limits (`max_submit_failures` before commit, `max_completion_failures` after, seed 003
//! §4.3.4–4.3.5); only [`Fault::Site`] counts against the site as well.
//!
//! | failure | class |
//! | --- | --- |
//! | submission refused by the resource manager, or it cannot be reached | site |
//! | launch lost: node died, host unreachable, the manager forgot it, cancelled or preempted by someone else | site |
//! | the pending timeout: a launch that never starts (seed 003 §4.3.5) | site |
//! | a process exits non-zero or is killed, before or after the barrier | job |
//! | a component reports a failed start at the barrier, or ends without checking in | job |
//! | the barrier timeout: a started component that never checks in (seed 002 §3.2) | job |
//! | missing executable or command not found (exit 127) on a site that answers | job |
//! | wall time reached | job |
//!
//! How each backend maps its errors is in the README ("Failures: who is to blame").

use serde::{Deserialize, Serialize};

/// Who a failure counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fault {
    /// The site's resource manager or hardware: counts against the site's consecutive
    /// errors (seed 000 §3.4) and the job's limits. The default, as the documents count
    /// every failure.
    #[default]
    Site,
    /// The job's own program: counts against the job's limits only; the site's error
    /// counters are left as they are.
    Job,
}

impl Fault {
    /// `site` or `job`.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Site => "site",
            Fault::Job => "job",
        }
    }

    /// Whether the failure counts against the site it happened on.
    pub fn counts_against_site(self) -> bool {
        self == Fault::Site
    }
}
