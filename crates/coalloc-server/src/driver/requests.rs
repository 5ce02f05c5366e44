//! API requests against the core: submit, cancel, edit, site and file controls; the
//! barrier and the rendezvous store are `rendezvous`'s.

use super::Driver;
use crate::entry::{EditOp, Entry};
use crate::msg::{ApiError, EditRequest, Request};
use crate::views::{SchedulerView, SitesView};
use coalloc_core::scheduler::{Rejected, Reply};
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
                        let secret = self.rv.secrets.fresh().map_err(|e| e.to_string())?;
                        // The queue keeps a copy made here, on the driver's thread, not the
                        // job the API's worker parsed: that one sits in the worker's memory
                        // pages among the request's short-lived allocations, and a queue of
                        // such jobs held about 75 bytes a job more once those were freed
                        // (issue 34 item 3; an array's elements, copied here, did not).
                        let job = job.clone();
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
                            coalloc_core::scheduler::Claiming::Reserve(_) => "reserve",
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
                let _ = reply.send(self.check_secret(job, &secret));
            }
            Request::Barrier {
                job,
                secret,
                launch,
                local_rank,
                ok,
                reason,
                hold,
                reply,
            } => match secret.map_or(Ok(()), |s| self.check_secret(job, &s)) {
                Ok(()) => self.barrier(job, launch, local_rank, (ok, reason), hold, reply),
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Request::KvPut {
                job,
                key,
                value,
                reply,
            } => self.kv_put(job, key, value, reply),
            Request::KvGet {
                job,
                key,
                wait,
                reply,
            } => self.kv_get(job, key, wait, reply),
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
}
