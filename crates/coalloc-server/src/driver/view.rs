//! What the API shows of jobs and sites (the JSON of `GET /v1/jobs` and `/v1/sites`): a
//! listing is built one page at a time ([`crate::listing`]), never the whole job table.

use super::Driver;
use crate::listing::JobFilter;
use crate::views::{ComponentView, JobList, JobView, LinkView, SiteView};
use coalloc_core::scheduler::jobs::{CompPhase, JobState, Phase};
use coalloc_core::scheduler::link::LinkState;

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

/// The most jobs one page looks at: a page of a rare state among a million jobs ends early
/// (with its `next`) rather than hold the driver for the whole table.
const SCAN_BUDGET: usize = 250_000;

impl Driver {
    /// A job's state as the API names it.
    pub(crate) fn state_of(&self, j: &JobState) -> &'static str {
        if j.awaiting_admission {
            return "awaiting-admission";
        }
        job_state_name(j.ended() && self.failed.contains(&j.id), j.phase)
    }

    /// One page of the jobs in memory that pass `f`.
    pub(crate) fn jobs_page(&self, f: &JobFilter) -> JobList {
        let mut jobs = Vec::new();
        let mut last = f.after;
        let mut more = false;
        for (scanned, j) in self.core.jobs_after(f.after).enumerate() {
            if jobs.len() == f.limit || scanned == SCAN_BUDGET {
                more = true;
                break;
            }
            last = j.id;
            if f.wants_state(self.state_of(j))
                && f.matches(j.job.user(), j.job.name(), j.record.submit)
            {
                jobs.push(self.job_view(j, false));
            }
        }
        JobList {
            jobs,
            next: more.then_some(last),
        }
    }

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
                let resv = self.reservation_of(j.id, j.generation(), i);
                ComponentView {
                    index: i,
                    count: c.count.max(spec.map_or(0, |s| s.count)),
                    state: comp_phase_name(c.phase).into(),
                    site: c.site.map(|s| self.config.sites[s].name.clone()),
                    launch: c.launch.map(|l| l.0),
                    remote: launch.and_then(|l| l.remote.clone()),
                    checked_in: launch.and(c.launch).map(|l| self.rv.checked_in(l.0)),
                    processes: launch.map(|l| l.processes),
                    executable: spec
                        .filter(|_| full)
                        .and_then(|s| s.executable().map(str::to_owned)),
                    label: spec
                        .filter(|_| full)
                        .and_then(|s| s.label().map(str::to_owned)),
                    reservation: resv.as_ref().map(|r| r.0.clone()),
                    reservation_state: resv.as_ref().map(|r| r.1.to_owned()),
                    promised_start: resv.and_then(|r| r.2),
                }
            })
            .collect();
        let when = |v: Option<i64>| if full { v } else { None };
        JobView {
            id: j.id,
            name: j.job.name().map(str::to_owned),
            user: j.job.user().map(str::to_owned),
            state: self.state_of(j).into(),
            processors: j.job.total_processors(),
            submit: r.submit,
            start: r.start(),
            end: r.end(),
            components,
            placement_tries: r.placement_tries,
            claiming_tries: r.claim_tries(),
            submit_failures: r.submit_failures(),
            completion_failures: r.completion_failures(),
            last_abort: self.abort_reasons.get(&j.id).cloned(),
            retry_at: j.retry_at(),
            array: self
                .array_of(j.id)
                .map(|(first, index)| super::arrays::element_name(first, index)),
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
            transfers: full
                .then(|| self.transfer_views(j.id))
                .filter(|t| !t.is_empty()),
        }
    }

    pub(crate) fn site_view(&self, i: usize) -> SiteView {
        let site = &self.config.sites[i];
        let s = self.site_sample(i);
        let core = self.core.site_state(i);
        // An agent site's link, as the core heard it.
        let agent = self.at_agent(i);
        let link = core.map(|c| c.link).unwrap_or_default();
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
            link: agent.then(|| LinkView::of(link, self.now)),
            state: matches!(link, LinkState::Lost { .. }).then(|| "unreachable".into()),
            out_reason: core.and_then(|c| c.why_out()),
            out_since: core.and_then(|c| c.out_since),
            probation: core.is_some_and(|c| c.probation),
            bandwidth: self.bandwidth_view(i),
        }
    }

    /// The configured and measured bandwidth from site `i` to every other site.
    fn bandwidth_view(&self, i: usize) -> Vec<crate::views::BandwidthView> {
        let measured = self.core.measured_bandwidth();
        let from = &self.config.sites[i];
        self.config
            .sites
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(j, to)| crate::views::BandwidthView {
                to: to.name.clone(),
                configured: from.bandwidth.get(&to.name).copied(),
                measured: measured.get(&(i, j)).copied(),
            })
            .filter(|b| b.configured.is_some() || b.measured.is_some())
            .collect()
    }
}
