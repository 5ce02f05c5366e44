//! KOALA-C's predictor module (seed 004 §III-B): job runtime prediction for SJF and HSDF
//! (§IV-A), and the wait-time estimate HSDF's slowdown uses.
//!
//! # Runtime
//!
//! Seed 004 §III-B: "we estimate the runtime of a newly arrived job as the mean of the
//! runtimes of the last two finished jobs submitted by the same user". [`RuntimePredictor`]
//! keeps, per user, the runtimes of that user's last two jobs to finish, in the order they
//! finished (a job killed at a runtime limit, failed or cancelled did not finish and is not
//! counted; the runtime is that of the run that finished). Interpretations:
//!
//! - the mean is rounded down to a whole millisecond;
//! - a user with only one finished job is predicted that job's runtime;
//! - a user with none, and a job without a user, fall back to the job's own
//!   `runtime_estimate`, else to a configured default ([`RuntimePredictor::predict`]). Jobs
//!   without a user neither get nor give a history: there is no "same user" to match.
//!
//! # Wait time
//!
//! §III-B says only that KOALA-C uses "traditional wait-time estimation"; HSDF (§IV-A) needs
//! a job's estimated wait to estimate its slowdown. Deciding at time `now` whether to start a
//! queued job, the wait the job will have if it starts now is exactly the time it has waited
//! since submission, so that is the estimate here ([`wait_so_far`]): `now - submit`, from the
//! job's first submission (a job back in the queue after a failure keeps its clock running,
//! as slowdown counts from submission). The estimated slowdown is then
//! `(wait + runtime) / runtime` ([`EstimatedSlowdown`]), compared exactly in integers.

use crate::model::{Job, Millis, Time};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Runtimes of the last two finished jobs of every user; see the module documentation.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RuntimePredictor {
    /// User → (latest runtime, the one before it).
    last: BTreeMap<String, (Millis, Option<Millis>)>,
}

impl RuntimePredictor {
    pub fn new() -> RuntimePredictor {
        RuntimePredictor::default()
    }

    /// A job of `user` finished after running for `runtime`. Jobs without a user are not
    /// recorded.
    pub fn record(&mut self, user: Option<&str>, runtime: Millis) {
        let Some(user) = user else {
            return;
        };
        match self.last.get_mut(user) {
            Some(entry) => *entry = (runtime, Some(entry.0)),
            None => {
                self.last.insert(user.to_owned(), (runtime, None));
            }
        }
    }

    /// The prediction from `user`'s history alone: the mean of the last two runtimes
    /// (rounded down), the only one if there is one, `None` if there is none.
    pub fn from_history(&self, user: Option<&str>) -> Option<Millis> {
        let &(latest, before) = self.last.get(user?)?;
        Some(match before {
            Some(before) => (latest + before).div_euclid(2),
            None => latest,
        })
    }

    /// The predicted runtime of a newly arrived job: its user's history, else its own
    /// `runtime_estimate`, else `default`.
    pub fn predict(&self, job: &Job, default: Millis) -> Millis {
        self.from_history(job.extra().user.as_deref())
            .or(job.runtime_estimate)
            .unwrap_or(default)
    }
}

/// The estimated wait of a job submitted at `submit` if it starts at `now`: the time it has
/// waited so far (never negative). See the module documentation.
pub fn wait_so_far(now: Time, submit: Time) -> Millis {
    (now - submit).max(0)
}

/// An estimated slowdown `(wait + runtime) / runtime`, ordered exactly (no floating point).
/// A runtime below 1 ms counts as 1 ms, so that the slowdown is always defined.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct EstimatedSlowdown {
    pub wait: Millis,
    pub runtime: Millis,
}

impl EstimatedSlowdown {
    pub fn new(wait: Millis, runtime: Millis) -> EstimatedSlowdown {
        EstimatedSlowdown {
            wait: wait.max(0),
            runtime: runtime.max(1),
        }
    }

    /// The slowdown as a number, for reports.
    pub fn value(self) -> f64 {
        (self.wait + self.runtime) as f64 / self.runtime as f64
    }
}

impl PartialEq for EstimatedSlowdown {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for EstimatedSlowdown {}

impl PartialOrd for EstimatedSlowdown {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for EstimatedSlowdown {
    /// `(w1 + r1) / r1` against `(w2 + r2) / r2` is `w1 / r1` against `w2 / r2`, that is
    /// `w1 * r2` against `w2 * r1` (runtimes are positive).
    fn cmp(&self, other: &Self) -> Ordering {
        let a = i128::from(self.wait) * i128::from(other.runtime);
        let b = i128::from(other.wait) * i128::from(self.runtime);
        a.cmp(&b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Component, JobKind};

    fn job(user: Option<&str>, estimate: Option<Millis>) -> Job {
        let mut j = Job::new(
            JobKind::Total,
            vec![Component {
                count: 1,
                ..Component::default()
            }],
        );
        j.extra_mut().user = user.map(Into::into);
        j.runtime_estimate = estimate;
        j
    }

    #[test]
    fn mean_of_the_last_two_then_fallbacks() {
        let mut p = RuntimePredictor::new();
        assert_eq!(p.predict(&job(Some("a"), Some(70)), 5), 70);
        assert_eq!(p.predict(&job(Some("a"), None), 5), 5);
        p.record(Some("a"), 100);
        assert_eq!(p.predict(&job(Some("a"), Some(70)), 5), 100);
        p.record(Some("a"), 201);
        assert_eq!(p.from_history(Some("a")), Some(150));
        p.record(Some("a"), 500);
        assert_eq!(p.from_history(Some("a")), Some(350));
        // No user: no history, in either direction.
        p.record(None, 9);
        assert_eq!(p.predict(&job(None, Some(70)), 5), 70);
        assert_eq!(p.from_history(Some("b")), None);
    }

    #[test]
    fn slowdowns_compare_exactly() {
        let s = EstimatedSlowdown::new;
        assert!(s(1000, 1000) > s(50, 100));
        assert!(s(800, 400) > s(1000, 1000));
        assert_eq!(s(200, 100), s(2000, 1000));
        assert_eq!(s(5, 0).runtime, 1);
        assert_eq!(s(300, 100).value(), 4.0);
        assert_eq!(wait_so_far(10, 30), 0);
    }
}
