//! The result log (seed 003 A.5, seed 000 §5): one line per ended job, from the core's job
//! record and the stopped runs the driver saw on the way (aborts before and after commit,
//! preemptions, each with its reason).

use super::Driver;
use crate::logs::{Abort, ResultRecord};
use coalloc_core::scheduler::JobRecord;
use serde_json::json;

impl Driver {
    /// A run of `job` was stopped.
    pub(crate) fn log_abort(&mut self, job: u64, class: &str, reason: &str) {
        if self.replaying {
            return;
        }
        self.aborts.entry(job).or_default().push(Abort {
            time: self.now,
            class: class.into(),
            reason: reason.into(),
        });
    }

    /// A job ended: its event, and its line of the result log.
    pub(crate) fn ended(&mut self, job: u64, failure: Option<String>, r: &JobRecord) {
        if let Some(reason) = &failure {
            self.abort_reasons.insert(job, reason.clone());
            self.failed.insert(job);
        }
        self.committed.remove(&job);
        self.note_ended(job);
        self.drop_transfers_of(job);
        let aborts = self.aborts.remove(&job).unwrap_or_default();
        let outcome = if failure.is_some() {
            "failed"
        } else {
            "finished"
        };
        self.emit(json!({"event": outcome, "job": job, "reason": failure}));
        if self.replaying {
            return;
        }
        let Some(state) = self.core.job(job) else {
            return;
        };
        let since = |a: Option<i64>, b: Option<i64>| Some(b? - a?);
        let rec = ResultRecord {
            job,
            name: state.job.name().map(str::to_owned),
            outcome: outcome.into(),
            reason: failure,
            components: state.job.components.len(),
            processors: state.job.total_processors(),
            submit: r.submit,
            placed: r.placed(),
            placement_ms: since(Some(r.submit), r.placed()),
            first_jst: r.first_jst(),
            last_jst: r.last_jst(),
            start_delay_ms: r.start_delay(),
            barrier_release: r.barrier_release(),
            start: r.start(),
            end: r.end(),
            wait_ms: r.wait(),
            response_ms: r.response(),
            run_ms: r.runtime(),
            total_run_ms: since(r.placed(), r.end()),
            sites: r
                .sites()
                .iter()
                .map(|s| self.config.sites[*s].name.clone())
                .collect(),
            placement_tries: r.placement_tries,
            placement_failures: r.placement_failures,
            submit_failures: r.submit_failures(),
            completion_failures: r.completion_failures(),
            claim_tries: r.claim_tries(),
            claim_failures: r.claim_failures(),
            preemptions: r.preemptions(),
            limit_kills: r.limit_kills(),
            aborts,
        };
        if self.durable() {
            self.results.append(&[rec]);
        }
    }
}
