//! Carrying out the core's commands: a start becomes a resource-manager submission with the
//! component's configuration in its environment (seed 002 §3.3), a cancel a kill, a
//! transfer a pull of the input file (`transfers.rs`), a finished job a line of the result
//! log (`results.rs`). During replay the commands are only booked; after it, `reconcile`
//! settles with the sites what the replay says of their launches: adopted, cancelled again
//! (a live job's stopped runs), read again and cancelled if still running (an ended job's
//! cancelled components, whose cancel may have died with the server).

use super::{Driver, LaunchInfo};
use crate::entry::Entry;
use coalloc_backends::SubmitRequest;
use coalloc_core::model::{JobType, Value};
use coalloc_core::scheduler::{Command, Fault, Notice, Start};
use serde_json::json;
use std::path::PathBuf;

impl Driver {
    /// Drain the core's commands.
    pub(crate) fn run_commands(&mut self) {
        while let Some(cmd) = self.core.poll_command() {
            // What the core commands follows from the journal: the entries of a turn
            // committed without an fsync are on disk first.
            if !self.replaying && !self.durable() {
                return;
            }
            if let Some(job) = command_job(&cmd) {
                self.rv.touch(job);
            }
            match cmd {
                Command::StartComponent(s) => self.start_component(*s),
                Command::CancelComponent { launch, .. } => {
                    // A stopped committed run's launch drains (the core's `draining`): it
                    // stays watched until its site says it is gone (`Driver::remote_state`),
                    // and the core hears that as `CancelTaken`; its job's next run commits
                    // only then (the simulation harness, seed 1391 of `--policies`: it was
                    // forgotten here at once, and the next run's barrier was released on
                    // another site while it still ran past its own).
                    //
                    // The core sends a draining launch's cancel again every
                    // `recancel_interval` until it is gone (a cancel can be lost: an agent
                    // gives one up after five tries, a manager down or refusing it); each
                    // goes to the site the same way, and a cancel of a launch already gone
                    // changes nothing there. A launch unknown here is not cancelled, and
                    // one the core has moved on from whose end this driver already knows (a
                    // repeated cancel that crossed its `CancelTaken` in this turn) is left
                    // as it is: nothing is journaled, watched or forgotten twice.
                    let draining = self.core.draining().get(launch).is_some();
                    let current = self.is_current(launch.0);
                    if let Some(l) = self.launches.get_mut(&launch.0) {
                        if l.ended && !draining && !current {
                            continue;
                        }
                        if draining && l.ended && !self.replaying {
                            // Its end is already decided here, its last report on its way to
                            // the core (a restart found its submission unanswered and
                            // cancelled it by its name; a start that never reached the
                            // manager): nothing more will be heard of it at its site
                            // (harness seed 31 of `--policies`: killed at its limit at the
                            // restart's first turn, it drained for ever). During a replay
                            // `reconcile` settles it.
                            let told = self.internal.iter().any(
                                |e| matches!(e, Entry::CancelTaken { launch: l } if *l == launch.0),
                            );
                            if !told {
                                self.internal
                                    .push_back(Entry::CancelTaken { launch: launch.0 });
                            }
                            continue;
                        }
                        l.ended = !draining;
                        if !self.replaying {
                            match &l.remote {
                                Some(r) => {
                                    self.workers[l.site].cancel(r.clone());
                                    if !draining {
                                        self.workers[l.site].forget(launch.0);
                                    }
                                }
                                // Its submission's answer has not come: the manager may have
                                // it running already (its processes may even have passed the
                                // barrier). Cancel it by name now, not when the answer comes
                                // (the simulation harness, seed 102257: it ran past the
                                // barrier beside its replacement until then).
                                None => self.workers[l.site].cancel_unrecorded(
                                    l.job,
                                    l.component,
                                    launch.0,
                                ),
                            }
                        }
                    }
                }
                // The job's `committed` event goes out with its Notice::Committed.
                Command::ReleaseBarrier { job } => self.reservations_honoured(job),
                Command::StartTransfer {
                    transfer,
                    job,
                    component,
                    from,
                    to,
                    ..
                } => self.start_transfer(transfer.0, job, component, from, to),
                // GP (seed 001 §2.2): the configuration was checked at startup, every site
                // can preempt its local jobs.
                Command::KillLocal { site, processors } => {
                    if self.replaying {
                        continue;
                    }
                    self.workers[site].kill_local(processors);
                    let name = &self.config.sites[site].name;
                    self.emit(
                        json!({"event": "local_preempted", "site": name, "processors": processors}),
                    );
                }
                // Reserve claiming (issue 31): calls to the site's worker (`reserve`).
                c @ (Command::ReserveQuery { .. }
                | Command::Reserve { .. }
                | Command::Unreserve { .. }) => self.reserve_command(c),
                Command::Notify(n) => self.notice(n),
                Command::LeaseVm { site, vm } => self.lease_vm(site, vm.0),
                Command::ReleaseVm { site, vm } => self.release_vm(site, vm.0),
                Command::JobFinished { job, record } => self.ended(job, None, &record),
                Command::JobFailed {
                    job,
                    reason,
                    record,
                } => self.ended(job, Some(reason), &record),
            }
        }
    }

    fn start_component(&mut self, s: Start) {
        let processes = match s.spec.job_type {
            JobType::Single => 1,
            JobType::Multiple | JobType::Mpi => s.count.max(1),
        };
        // An `mpi` component is one PMI proxy that starts its MPI processes and checks in
        // once for all of them (coalloc-runtime's `pmi`; seed 002 §4.3).
        let mpi = s.spec.job_type == JobType::Mpi;
        let launched = if mpi { 1 } else { processes };
        let auto_ready = s.spec.attributes().iter().any(|a| {
            a.name.eq_ignore_ascii_case("barrier")
                && matches!(a.values.as_slice(), [Value::Str(v)] if v.eq_ignore_ascii_case("auto"))
        });
        self.launches.insert(
            s.launch.0,
            LaunchInfo {
                job: s.job,
                component: s.component,
                site: s.site,
                count: s.count,
                remote: None,
                processes: launched,
                ended: false,
                auto_ready,
            },
        );
        self.started_into(&s);
        if self.replaying {
            // A restart that finds it unanswered at an agent site, and whose agent's hello
            // shows it never arrived, has the core make it again and sends it then
            // (`reports::send_again`, `Scheduler::pending_start`).
            return;
        }
        let Some((req, staging)) = self.request_of(&s) else {
            return;
        };
        self.emit(
            json!({"event": "component_submitted", "job": s.job, "component": s.component,
            "launch": s.launch.0, "site": self.config.sites[s.site].name}),
        );
        match staging {
            Some(st) => {
                if !st.stage_in.is_empty() {
                    self.stage_in(s.site, req, &st);
                } else {
                    self.workers[s.site].submit(req);
                }
                self.staging.insert(s.launch.0, st);
            }
            None => self.workers[s.site].submit(req),
        }
    }

    /// A start's submission to its site, with its staging; `None` when it cannot be made
    /// (its launch then fails as the job's fault, with an entry in `internal`).
    pub(super) fn request_of(
        &mut self,
        s: &Start,
    ) -> Option<(SubmitRequest, Option<super::staging::Staging>)> {
        let processes = match s.spec.job_type {
            JobType::Single => 1,
            JobType::Multiple | JobType::Mpi => s.count.max(1),
        };
        let mpi = s.spec.job_type == JobType::Mpi;
        let launched = if mpi { 1 } else { processes };
        let Some(exe) = s.spec.executable().map(str::to_owned) else {
            self.internal.push_back(Entry::Failed {
                launch: s.launch.0,
                reason: "the component names no executable".into(),
                fault: Fault::Job,
            });
            return None;
        };
        let mut arguments = s.spec.arguments().to_vec();
        let exe = if !mpi {
            exe
        } else if let Some(proxy) = self.config.pmi_proxy.as_ref().and_then(|p| p.to_str()) {
            arguments = [vec!["pmi-proxy".into(), "--".into(), exe], arguments].concat();
            proxy.to_owned()
        } else {
            self.internal.push_back(Entry::Failed {
                launch: s.launch.0,
                reason: "jobtype=mpi needs the PMI proxy of `coalloc serve`".into(),
                fault: Fault::Job,
            });
            return None;
        };
        let c = &s.config;
        let secret = self.rv.secrets.get(s.job).unwrap_or_default();
        let sizes: Vec<String> = c.sizes.iter().map(u32::to_string).collect();
        let mut env: Vec<(String, String)> = s.spec.environment().to_vec();
        let site = self.config.sites[s.site].name.clone();
        env.extend([
            ("COALLOC_URL".into(), self.url.clone()),
            (
                "COALLOC_BARRIER_URL".into(),
                format!(
                    "{}/v1/jobs/{}/barrier",
                    self.url.split(',').next().unwrap_or_default(),
                    s.job
                ),
            ),
            ("COALLOC_SECRET".into(), secret),
            ("COALLOC_JOB_ID".into(), s.job.to_string()),
            ("COALLOC_LAUNCH".into(), s.launch.0.to_string()),
            ("COALLOC_COMPONENT".into(), c.index.to_string()),
            ("COALLOC_COMPONENTS".into(), c.count.to_string()),
            ("COALLOC_SIZES".into(), sizes.join(",")),
            ("COALLOC_RANK_OFFSET".into(), c.rank_offset.to_string()),
            ("COALLOC_TOTAL".into(), c.total.to_string()),
            ("COALLOC_SITE".into(), site),
            ("COALLOC_PROCESSES".into(), processes.to_string()),
        ]);
        if let Some(f) = &self.fingerprint {
            env.push(("COALLOC_SERVER_FINGERPRINT".into(), f.clone()));
        }
        if let Some(t) = s.barrier_timeout {
            env.push(("COALLOC_BARRIER_TIMEOUT_MS".into(), t.to_string()));
        }
        if let Some((first, index)) = self.array_of(s.job) {
            env.extend([
                ("COALLOC_ARRAY_JOB_ID".into(), first.to_string()),
                ("COALLOC_ARRAY_INDEX".into(), index.to_string()),
            ]);
        }
        // The job's input file where this component runs (seed 000 §2.3): the replica's
        // path there, or where its transfer puts it — there when the barrier releases
        // (a component started under ICP may run before the transfer ends).
        let input = self
            .core
            .job(s.job)
            .and_then(|j| j.job.extra().input_file.as_ref().map(|f| f.name.clone()));
        if let Some(name) = input {
            let path = match self.catalog.get(&name, s.site).and_then(|r| r.path.clone()) {
                Some(p) => p,
                None => self.cache_path(s.site, &name),
            };
            env.push(("COALLOC_INPUT_FILE".into(), path));
        }
        let (stdout, stderr) = self.state.output(s.job, s.component, s.launch.0);
        let mut req = SubmitRequest {
            launch: s.launch.0,
            job: s.job,
            component: s.component,
            count: s.count,
            processes: launched,
            executable: exe,
            arguments,
            environment: env,
            directory: s.spec.directory().map(PathBuf::from),
            wall_time_ms: s.wall_time,
            stdout,
            stderr,
            owner: self
                .config
                .run_as_owner
                .then(|| {
                    self.core
                        .job(s.job)
                        .and_then(|j| j.job.user().map(str::to_owned))
                })
                .flatten(),
            reservation: s.reservation.as_ref().map(|r| r.name.clone()),
        };
        // RSL's scratch_dir: where the site makes the launch's $(SCRATCH_DIRECTORY).
        let scratch_dir = s.spec.attributes().iter().rev().find_map(|a| {
            match (
                a.name.eq_ignore_ascii_case("scratch_dir"),
                a.values.as_slice(),
            ) {
                (true, [Value::Str(v)]) => Some(v.clone()),
                _ => None,
            }
        });
        if let Some(d) = scratch_dir {
            let var = coalloc_backends::site_vars::SCRATCH_BASE.to_owned();
            req.environment.push((var, d));
        }
        let staging = match self.staging_of(s.site, &s.spec, &mut req) {
            Ok(st) => st,
            Err(reason) => {
                // The job's own stage-in list cannot be carried out: its fault, not the site's.
                self.internal.push_back(Entry::Failed {
                    launch: s.launch.0,
                    reason,
                    fault: coalloc_core::scheduler::Fault::Job,
                });
                return None;
            }
        };
        // GRAM's site variables: a site on this host expands them here; an agent does for
        // its own site.
        if !self.at_agent(s.site) {
            coalloc_backends::site_vars::expand(&mut req, &self.state.root.join("scratch"));
        }
        Some((req, staging))
    }

    fn notice(&mut self, n: Notice) {
        let site_name = |s: usize| self.config.sites.get(s).map(|x| x.name.clone());
        let v = match &n {
            Notice::Placed { job, sites } => {
                let names: Vec<_> = sites.iter().map(|s| site_name(*s)).collect();
                json!({"event": "placed", "job": job, "sites": names})
            }
            Notice::Committed { job } => {
                self.observe_commit(*job);
                self.committed.insert(*job);
                json!({"event": "committed", "job": job})
            }
            Notice::Requeued { job, reason } => {
                self.abort_reasons.insert(*job, reason.clone());
                let class = if self.committed.remove(job) {
                    "after_commit"
                } else {
                    "before_commit"
                };
                self.log_abort(*job, class, reason);
                json!({"event": "requeued", "job": job, "reason": reason})
            }
            Notice::InteractiveFailed {
                job,
                component,
                reason,
            } => {
                json!({"event": "interactive_failed", "job": job, "component": component, "reason": reason})
            }
            Notice::OptionalFailed {
                job,
                component,
                reason,
            } => {
                json!({"event": "optional_failed", "job": job, "component": component, "reason": reason})
            }
            Notice::Preempted { job, by } => {
                self.log_abort(*job, "preempted", &format!("preempted by job {by}"));
                json!({"event": "preempted", "job": job, "by": by})
            }
            Notice::SiteUnusable { site, reason } => {
                json!({"event": "site_unusable", "site": site_name(*site), "reason": reason})
            }
            Notice::SiteUsable { site } => {
                json!({"event": "site_usable", "site": site_name(*site)})
            }
            Notice::AwaitingCommit { job } => {
                json!({"event": "awaiting_commit", "job": job})
            }
            Notice::Cancelled { job } => {
                self.abort_reasons.insert(*job, "cancelled".into());
                json!({"event": "cancelled", "job": job})
            }
        };
        self.emit(v);
    }

    /// After replay: adopt what still runs, report what vanished.
    pub(crate) fn reconcile(&mut self) {
        let open: Vec<(u64, LaunchInfo)> = self
            .launches
            .iter()
            .filter(|(_, l)| !l.ended)
            .map(|(k, l)| (*k, l.clone()))
            .collect();
        // The launches of stopped committed runs that may still run at their sites:
        // cancelled again (`cancel_superseded_again`) and watched until their sites say
        // they are gone; one whose end was decided here already is gone.
        let draining: Vec<u64> = self.core.draining().iter().map(|(l, _)| l.0).collect();
        for launch in draining {
            match self.launches.get(&launch).cloned() {
                Some(l) if !l.ended => self.resume_draining(launch, &l),
                _ => self.internal.push_back(Entry::CancelTaken { launch }),
            }
        }
        for (launch, l) in open {
            if self.is_draining(launch) {
                continue;
            }
            // A launch the core has moved on from, or whose component has ended (its end
            // is in the journal): nothing to adopt, watch or journal again.
            if self.live_phase_of(launch).is_none() {
                self.launches.get_mut(&launch).expect("open launch").ended = true;
                continue;
            }
            match &l.remote {
                Some(remote) => {
                    tracing::info!(launch, remote, "adopting");
                    self.restore_staging(launch, &l);
                    self.workers[l.site].watch(launch, remote.clone());
                }
                // At an agent site, the agent knows: it records every launch it submits
                // and lists them when it connects, so that a component started just before
                // the server stopped is adopted rather than started a second time (issue 32:
                // nothing started twice across a fail-over).
                None if self.at_agent(l.site) => {
                    tracing::info!(launch, "submitted but unanswered: its agent will say");
                    self.unrecorded.insert(launch);
                }
                None => {
                    // It may have reached the resource manager all the same: cancel it there
                    // by its name before the component is placed again.
                    self.workers[l.site].cancel_unrecorded(l.job, l.component, launch);
                    self.launches.get_mut(&launch).expect("open launch").ended = true;
                    self.internal.push_back(Entry::Failed {
                        launch,
                        reason: "the server stopped while submitting it".into(),
                        fault: Fault::Site,
                    });
                }
            }
        }
        self.cancel_superseded_again();
        self.recheck_ended();
        self.resume_vms();
        self.resume_transfers();
        self.resume_reservations();
        self.turn();
    }

    /// After a restart: a draining launch (the core's `draining`) is watched again, so that
    /// its site's word that it is gone reaches the core (its cancel goes again with
    /// `cancel_superseded_again`). One whose submission was never answered: at an agent
    /// site, its agent says whether it holds it (`agent_back`, then `submitted`); at a direct
    /// site it is cancelled by its name, and counted gone
    /// with that (nothing can say more of it).
    fn resume_draining(&mut self, launch: u64, l: &LaunchInfo) {
        match &l.remote {
            Some(remote) => {
                tracing::info!(
                    launch,
                    remote,
                    "watching a draining launch until it is gone"
                );
                self.workers[l.site].watch(launch, remote.clone());
            }
            None if self.at_agent(l.site) => {
                self.unrecorded.insert(launch);
            }
            None => {
                self.launches.get_mut(&launch).expect("open launch").ended = true;
                self.internal.push_back(Entry::CancelTaken { launch });
            }
        }
    }

    /// Cancel again, at a restart, every launch of a live job that the core has moved on
    /// from (an aborted or re-placed run's): its cancel was journaled with the turn that
    /// decided it, but the call may have been lost with the process before a site worker
    /// made it, and the launch would then run beside its replacement (harness seed 627,
    /// and the 'past the barrier twice' seeds of the one-hour run). Cancels are idempotent:
    /// one for a launch already gone changes nothing at its site.
    fn cancel_superseded_again(&mut self) {
        let stale: Vec<(u64, LaunchInfo)> = self
            .launches
            .iter()
            .filter(|(k, l)| {
                !self.is_current(**k)
                    && self
                        .core
                        .job(l.job)
                        .is_some_and(|j| j.phase != coalloc_core::scheduler::jobs::Phase::Ended)
            })
            .map(|(k, l)| (*k, l.clone()))
            .collect();
        for (launch, l) in stale {
            match l.remote {
                Some(remote) => self.workers[l.site].cancel(remote),
                None => self.workers[l.site].cancel_unrecorded(l.job, l.component, launch),
            }
        }
    }

    /// At a restart, the launches of ended jobs still in memory that their sites did not
    /// report finished: cancelled at the job's end (or with an earlier run of it, or timed
    /// out by the core), their cancel was journaled with the turn that decided it, but the
    /// call may have died with the process before a site worker made it (or while a worker
    /// was still trying it against a manager that was down), and nothing else watches or
    /// cancels a launch of an ended job again (`cancel_superseded_again` is for live jobs').
    /// One with a handle is watched until a reading finds it gone from its site, the first
    /// that finds it still running cancelling it (`remote_state`), and its job does not
    /// leave memory before (`age_out`). One whose submission was never answered is cancelled
    /// by its name. Those at agent sites are left to their agents' hellos, which list every
    /// launch an agent holds (`agent_back` cancels those the server no longer wants). Calls
    /// go with the turn's commit.
    fn recheck_ended(&mut self) {
        let ended: Vec<(u64, LaunchInfo)> = (self.launches.iter())
            .filter(|(k, l)| {
                self.core.job(l.job).is_some_and(|j| j.ended())
                    && self.phase_of(**k)
                        != Some(coalloc_core::scheduler::jobs::CompPhase::Finished)
                    && !self.at_agent(l.site)
            })
            .map(|(k, l)| (*k, l.clone()))
            .collect();
        for (launch, l) in ended {
            match &l.remote {
                Some(remote) => {
                    self.workers[l.site].watch(launch, remote.clone());
                    self.unsettled.insert(launch, false);
                }
                None => self.after_commit.push((l.site, l.cancel_call(launch))),
            }
        }
    }
}

/// The job a command is about, if one: its held barrier check-ins may be answered now.
fn command_job(c: &Command) -> Option<u64> {
    match c {
        Command::StartComponent(s) => Some(s.job),
        Command::CancelComponent { job, .. }
        | Command::ReleaseBarrier { job, .. }
        | Command::JobFinished { job, .. }
        | Command::JobFailed { job, .. } => Some(*job),
        Command::Notify(n) => match n {
            Notice::Placed { job, .. }
            | Notice::Committed { job }
            | Notice::Requeued { job, .. }
            | Notice::InteractiveFailed { job, .. }
            | Notice::OptionalFailed { job, .. }
            | Notice::Preempted { job, .. }
            | Notice::AwaitingCommit { job }
            | Notice::Cancelled { job } => Some(*job),
            Notice::SiteUnusable { .. } | Notice::SiteUsable { .. } => None,
        },
        _ => None,
    }
}
