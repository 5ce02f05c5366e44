//! What the API shows of jobs and sites (the JSON of `GET /v1/jobs` and `/v1/sites`).

use super::Driver;
use crate::views::{ComponentView, JobView, SiteView};
use coalloc_core::scheduler::jobs::{CompPhase, JobState, Phase};

pub fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Queued => "queued",
        Phase::Claiming => "claiming",
        Phase::Starting => "starting",
        Phase::Running => "running",
        Phase::Ended => "ended",
    }
}

/// A job's state as the API names it: its phase, an ended one told as finished or failed.
pub fn job_state_name(failed: bool, p: Phase) -> &'static str {
    match p {
        Phase::Ended if failed => "failed",
        Phase::Ended => "finished",
        p => phase_name(p),
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
    pub(crate) fn job_view(&self, j: &JobState, full: bool) -> JobView {
        let r = &j.record;
        let components = j
            .comps
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let spec = j.job.components.get(i);
                let launch = c
                    .launch
                    .and_then(|l| self.launches.get(&l.0))
                    .filter(|_| full);
                ComponentView {
                    index: i,
                    count: c.count.max(spec.map_or(0, |s| s.count)),
                    state: comp_phase_name(c.phase).into(),
                    site: c.site.map(|s| self.config.sites[s].name.clone()),
                    launch: c.launch.map(|l| l.0),
                    remote: launch.and_then(|l| l.remote.clone()),
                    checked_in: launch.map(|l| l.checkins.len()),
                    processes: launch.map(|l| l.processes),
                    executable: spec
                        .filter(|_| full)
                        .and_then(|s| s.executable().map(str::to_owned)),
                    label: spec
                        .filter(|_| full)
                        .and_then(|s| s.label().map(str::to_owned)),
                }
            })
            .collect();
        let when = |v: Option<i64>| if full { v } else { None };
        JobView {
            id: j.id,
            name: j.job.name().map(str::to_owned),
            user: j.job.user().map(str::to_owned),
            state: if j.awaiting_admission {
                "awaiting-admission".into()
            } else {
                job_state_name(self.failed.contains(&j.id), j.phase).into()
            },
            processors: j.job.total_processors(),
            submit: r.submit,
            start: r.start(),
            end: r.end(),
            components,
            placement_tries: r.placement_tries,
            claiming_tries: r.claim_tries,
            submit_failures: r.submit_failures,
            completion_failures: r.completion_failures,
            last_abort: self.abort_reasons.get(&j.id).cloned(),
            retry_at: j.retry_at,
            placed: when(r.placed()),
            barrier_release: when(r.barrier_release()),
            wait_ms: when(r.wait()),
            response_ms: when(r.response()),
            run_ms: when(r.runtime()),
            sites: full.then(|| {
                r.sites()
                    .iter()
                    .map(|s| self.config.sites[*s].name.clone())
                    .collect()
            }),
        }
    }

    pub(crate) fn site_view(&self, i: usize) -> SiteView {
        let site = &self.config.sites[i];
        let s = self.site_sample(i);
        let core = self.core.site_state(i);
        SiteView {
            name: site.name.clone(),
            kind: site.kind.name().into(),
            backend: match &self.config.backends[i] {
                crate::config::BackendKind::Local { .. } => "local",
                crate::config::BackendKind::Slurm { .. } => "slurm",
                crate::config::BackendKind::GridEngine(_) => "gridengine",
                crate::config::BackendKind::Agent { .. } => "agent",
            }
            .into(),
            processors: site.processors,
            total: s.total,
            idle: s.idle,
            coalloc: s.coalloc,
            other: s.other,
            healthy: s.healthy,
            usable: core.map(|c| c.usable()),
            submit_errors: core.map(|c| c.submit_errors),
            completion_errors: core.map(|c| c.completion_errors),
            failed_launches: self.site_failures.get(i).copied().unwrap_or(0),
            cloud: self.cloud_view(i),
            link: None,
            state: None,
            out_reason: core.and_then(|c| c.why_out()),
            out_since: core.and_then(|c| c.out_since),
            probation: core.is_some_and(|c| c.probation),
        }
    }
}
