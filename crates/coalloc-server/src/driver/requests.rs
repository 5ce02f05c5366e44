//! API requests against the core: submit, cancel, edit, the barrier check-in (seed 002
//! §3.2: a component is at the barrier when every one of its processes checked in), and the
//! job-scoped rendezvous store.

use super::Driver;
use crate::entry::{EditOp, Entry};
use crate::msg::{ApiError, BarrierAnswer, EditRequest, Request};
use crate::views::{SchedulerView, SitesView};
use coalloc_core::scheduler::jobs::{CompPhase, Phase};
use coalloc_core::scheduler::{Fault, LaunchId, Rejected, Reply};
use coalloc_core::spec::native;

fn rejected(r: Rejected) -> ApiError {
    match r {
        Rejected::UnknownJob(j) => ApiError::not_found(format!("no job {j}")),
        Rejected::UnknownSite(s) => ApiError::not_found(format!("no site {s}")),
        Rejected::Committed(_) | Rejected::Ended(_) => ApiError::new(409, r.to_string()),
        Rejected::QueueFull(_) => ApiError::new(503, r.to_string()),
        Rejected::Invalid(m) => ApiError::bad(m),
    }
}

impl Driver {
    pub(crate) fn on_request(&mut self, r: Request) {
        match r {
            Request::Submit { jobs, reply } => {
                let answers = jobs
                    .into_iter()
                    .map(|job| {
                        let secret = self.secrets.fresh().map_err(|e| e.to_string())?;
                        match self.submit(job, secret) {
                            Ok(Reply::Submitted(id)) => {
                                let waits = self.core.job(id).is_some_and(|j| j.awaiting_admission);
                                self.emit(serde_json::json!({"event": "submitted", "job": id,
                                    "awaiting_admission": waits}));
                                Ok((id, waits))
                            }
                            Ok(Reply::Done) => Err("not accepted".to_string()),
                            Err(e) => Err(e.to_string()),
                        }
                    })
                    .collect();
                self.reply_later(reply, answers);
            }
            Request::SubmitArray {
                job,
                indexes,
                reply,
            } => {
                let r = self.submit_array(&job, indexes);
                self.reply_later(reply, r);
            }
            Request::CancelArray {
                first,
                indexes,
                reply,
            } => {
                let r = self.cancel_array(first, indexes);
                self.reply_later(reply, r);
            }
            Request::Cancel { job, reply } => {
                let r = self
                    .apply(Entry::Cancel { job })
                    .map(|_| ())
                    .map_err(rejected);
                self.reply_later(reply, r);
            }
            Request::Commit { job, reply } => {
                let r = self
                    .apply(Entry::Commit { job })
                    .map(|_| ())
                    .map_err(rejected);
                self.reply_later(reply, r);
            }
            Request::Edit { job, edit, reply } => {
                let one = |c| {
                    let mut j = coalloc_core::model::Job::new(
                        coalloc_core::model::JobKind::Unordered,
                        vec![c],
                    );
                    j.id = None;
                    Some(native::to_json(&j))
                };
                let entry = match edit {
                    EditRequest::Add(c) => Entry::Edit {
                        job,
                        op: EditOp::Add,
                        index: 0,
                        component: one(c),
                    },
                    EditRequest::Delete(i) => Entry::Edit {
                        job,
                        op: EditOp::Delete,
                        index: i,
                        component: None,
                    },
                    EditRequest::Substitute(i, c) => Entry::Edit {
                        job,
                        op: EditOp::Substitute,
                        index: i,
                        component: one(c),
                    },
                };
                let r = self.apply(entry).map(|_| ()).map_err(rejected);
                self.reply_later(reply, r);
            }
            Request::Jobs { filter, reply } => {
                let _ = reply.send(self.jobs_page(&filter));
            }
            Request::Job { job, reply } => {
                let v = self.core.job(job).map(|j| self.job_view(j, true));
                let _ = reply.send(v);
            }
            Request::Sites { reply } => {
                let sites: Vec<_> = (0..self.config.sites.len())
                    .map(|i| self.site_view(i))
                    .collect();
                let v = SitesView {
                    sites,
                    scheduler: SchedulerView {
                        policy: self.core.policy().into(),
                        fit: self.config.scheduler.fit.name().into(),
                        claiming: match self.config.scheduler.claiming {
                            coalloc_core::scheduler::Claiming::Immediate => "immediate",
                            coalloc_core::scheduler::Claiming::Icp(_) => "icp",
                        }
                        .into(),
                    },
                };
                let _ = reply.send(v);
            }
            Request::RefreshMetrics { reply } => {
                self.refresh_metrics();
                let _ = reply.send(());
            }
            Request::Secret { job, secret, reply } => {
                let r = match self.secrets.get(job) {
                    None => Err(ApiError::not_found(format!("no job {job}"))),
                    Some(s) if crate::link::proto::constant_time_eq(&secret, &s) => Ok(()),
                    Some(_) => Err(ApiError::new(
                        403,
                        format!("that secret is not job {job}'s"),
                    )),
                };
                let _ = reply.send(r);
            }
            Request::Barrier {
                job,
                launch,
                local_rank,
                ok,
                reason,
                check_in,
                reply,
            } => {
                let r = self.barrier(job, launch, local_rank, ok, reason, check_in);
                self.reply_later(reply, r);
            }
            Request::KvPut {
                job,
                key,
                value,
                reply,
            } => {
                let r = if self.core.job(job).is_none() {
                    Err(ApiError::not_found(format!("no job {job}")))
                } else {
                    let _ = self.apply(Entry::KvPut { job, key, value });
                    Ok(())
                };
                self.reply_later(reply, r);
            }
            Request::KvGet { job, key, reply } => {
                let r = if self.core.job(job).is_none() {
                    Err(ApiError::not_found(format!("no job {job}")))
                } else {
                    Ok(self.kv.get(&(job, key)).cloned())
                };
                let _ = reply.send(r);
            }
            Request::FileRegister {
                site,
                name,
                path,
                stat,
                read_here,
                reply,
            } => self.file_register(site, name, path, stat, read_here, reply),
            Request::FileRemove { name, site, reply } => {
                let r = self.file_remove(&name, site.as_deref());
                self.reply_later(reply, r);
            }
            Request::Files { name, reply } => {
                let _ = reply.send(self.files(name.as_deref()));
            }
            Request::SetUsable {
                site,
                usable,
                reply,
            } => {
                let r = self.apply_to_site(&site, |i| Entry::SetUsable { site: i, usable });
                self.reply_later(reply, r);
            }
            Request::SiteControl {
                site,
                control,
                reason,
                reply,
            } => {
                let r = self.apply_to_site(&site, |i| Entry::SiteControl {
                    site: i,
                    control,
                    reason,
                });
                self.reply_later(reply, r);
            }
        }
    }

    /// Journal and apply the entry `entry` makes for the site named `site`.
    fn apply_to_site(
        &mut self,
        site: &str,
        entry: impl FnOnce(usize) -> Entry,
    ) -> Result<(), ApiError> {
        match self.config.sites.iter().position(|s| s.name == site) {
            None => Err(ApiError::not_found(format!("no site `{site}`"))),
            Some(i) => self.apply(entry(i)).map(|_| ()).map_err(rejected),
        }
    }

    fn barrier(
        &mut self,
        job: u64,
        launch: u64,
        local_rank: u32,
        ok: bool,
        reason: Option<String>,
        check_in: bool,
    ) -> Result<BarrierAnswer, ApiError> {
        let Some(l) = self.launches.get(&launch).cloned() else {
            return Err(ApiError::not_found(format!("no launch {launch}")));
        };
        if l.job != job {
            return Err(ApiError::new(
                403,
                format!("launch {launch} is not job {job}'s"),
            ));
        }
        if local_rank >= l.processes {
            return Err(ApiError::bad(format!(
                "local rank {local_rank} is out of range: launch {launch} has {} processes",
                l.processes
            )));
        }
        let answer = self.barrier_state(job, launch);
        if !check_in || answer != BarrierAnswer::Waiting {
            return Ok(answer);
        }
        if !ok {
            let reason = reason.unwrap_or_else(|| "the component reported a failed start".into());
            self.fail_launch(launch, reason.clone(), Fault::Job);
            return Ok(BarrierAnswer::Aborted { reason });
        }
        let info = self.launches.get_mut(&launch).expect("known launch");
        info.checkins.insert(local_rank);
        let all_in = info.checkins.len() as u32 >= info.processes;
        if all_in {
            if self.phase_of(launch) == Some(CompPhase::Submitted) {
                let _ = self.apply(Entry::Started { launch });
                self.emit_launch("component_started", launch);
            }
            if self.phase_of(launch) == Some(CompPhase::Started) {
                let _ = self.apply(Entry::Ready { launch });
                self.emit_launch("component_checked_in", launch);
            }
        }
        Ok(self.barrier_state(job, launch))
    }

    /// What a process of this launch hears at the barrier now.
    fn barrier_state(&self, job: u64, launch: u64) -> BarrierAnswer {
        let aborted = |why: &str| BarrierAnswer::Aborted {
            reason: self
                .abort_reasons
                .get(&job)
                .cloned()
                .unwrap_or_else(|| why.to_string()),
        };
        let Some(state) = self.core.job(job) else {
            return aborted("no such job");
        };
        let l = &self.launches[&launch];
        let current = state.comps.get(l.component).and_then(|c| c.launch) == Some(LaunchId(launch));
        if l.ended && !current {
            return aborted("this start of the component was aborted");
        }
        match state.phase {
            Phase::Running if current => BarrierAnswer::Released,
            Phase::Ended => aborted("the job has ended"),
            _ if !current => aborted("this start of the component was aborted"),
            _ => BarrierAnswer::Waiting,
        }
    }
}
