//! What the API shows of jobs and sites (the JSON of `GET /v1/jobs` and `/v1/sites`).

use super::Driver;
use coalloc_core::scheduler::jobs::{CompPhase, JobState, Phase};
use serde_json::{json, Value};

pub fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Queued => "queued",
        Phase::Claiming => "claiming",
        Phase::Starting => "starting",
        Phase::Running => "running",
        Phase::Ended => "ended",
    }
}

fn comp_phase_name(p: CompPhase) -> &'static str {
    match p {
        CompPhase::Idle => "idle",
        CompPhase::Submitted => "submitted",
        CompPhase::Started => "started",
        CompPhase::Ready => "ready",
        CompPhase::Finished => "finished",
        CompPhase::Failed => "failed",
        CompPhase::Deleted => "deleted",
    }
}

impl Driver {
    pub(crate) fn job_view(&self, j: &JobState, full: bool) -> Value {
        let r = &j.record;
        let state = match j.phase {
            Phase::Ended if self.failed.contains(&j.id) => "failed",
            Phase::Ended => "finished",
            p => phase_name(p),
        };
        let comps: Vec<Value> = j
            .comps
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let spec = j.job.components.get(i);
                let mut v = json!({
                    "index": i,
                    "count": c.count.max(spec.map_or(0, |s| s.count)),
                    "state": comp_phase_name(c.phase),
                    "site": c.site.map(|s| self.config.sites[s].name.clone()),
                    "launch": c.launch.map(|l| l.0),
                });
                if full {
                    if let Some(l) = c.launch.and_then(|l| self.launches.get(&l.0)) {
                        v["remote"] = json!(l.remote);
                        v["checked_in"] = json!(l.checkins.len());
                        v["processes"] = json!(l.processes);
                    }
                    if let Some(s) = spec {
                        v["executable"] = json!(s.executable());
                        v["label"] = json!(s.label());
                    }
                }
                v
            })
            .collect();
        let mut v = json!({
            "id": j.id,
            "name": j.job.name(),
            "user": j.job.user(),
            "state": state,
            "processors": j.job.total_processors(),
            "submit": r.submit,
            "start": r.start(),
            "end": r.end(),
            "components": comps,
            "placement_tries": r.placement_tries,
            "submit_failures": r.submit_failures,
            "completion_failures": r.completion_failures,
        });
        if let Some(reason) = self.abort_reasons.get(&j.id) {
            v["last_abort"] = json!(reason);
        }
        if full {
            v["barrier_release"] = json!(r.barrier_release());
            v["wait_ms"] = json!(r.wait());
            v["response_ms"] = json!(r.response());
            v["run_ms"] = json!(r.runtime());
            v["sites"] = json!(r
                .sites()
                .iter()
                .map(|s| self.config.sites[*s].name.clone())
                .collect::<Vec<_>>());
        }
        v
    }

    pub(crate) fn site_view(&self, i: usize) -> Value {
        let site = &self.config.sites[i];
        let s = self.site_sample(i);
        let core = self.core.site_state(i);
        json!({
            "name": site.name,
            "kind": site.kind.name(),
            "backend": match &self.config.backends[i] {
                crate::config::BackendKind::Local { .. } => "local",
                crate::config::BackendKind::Slurm { .. } => "slurm",
                crate::config::BackendKind::GridEngine(_) => "gridengine",
            },
            "processors": site.processors,
            "total": s.total,
            "idle": s.idle,
            "coalloc": s.coalloc,
            "other": s.other,
            "healthy": s.healthy,
            "usable": core.map(|c| c.usable()),
            "submit_errors": core.map(|c| c.submit_errors),
            "completion_errors": core.map(|c| c.completion_errors),
            "failed_launches": self.site_failures.get(i).copied().unwrap_or(0),
            "cloud": self.cloud_view(i),
        })
    }
}
