//! Site reports into core events: the resource monitor's readings become `SiteStatus`
//! events when they change (seed 003 §4.3.2), and what a resource manager says of a launch
//! becomes `ComponentStarted` / `Finished` / `Failed` against the core's own view of it; a
//! launch the core has moved on from that a reading finds still running is cancelled. Each
//! reading that changes a site's numbers is also a line of the surveillance log (seed
//! 003 §5.2).

use super::Driver;
use crate::entry::Entry;
use crate::logs::SiteSample;
use crate::msg::Report;
use coalloc_backends::{RemoteState, SiteLoad};
use coalloc_core::scheduler::jobs::CompPhase;
use coalloc_core::scheduler::{Fault, LaunchId};
use serde_json::json;

impl Driver {
    pub(crate) fn on_report(&mut self, r: Report) {
        match r {
            Report::Submitted {
                site,
                launch,
                result,
            } => self.submitted(site, launch, result),
            Report::SubmittedMany(site, all) => {
                for (launch, result) in all {
                    self.submitted(site, launch, result);
                }
            }
            Report::Leased { site, vm, result } => self.leased(site, vm, result),
            Report::Released { site, vm } => self.released(site, vm),
            Report::AgentBack { site, held } => self.agent_back(site, &held),
            Report::AgentGone { site } => self.agent_gone(site),
            Report::Transfer(t) => self.transfer_report(t),
            Report::Reservation(r) => self.reservation_report(r),
            Report::Statted {
                site,
                name,
                path,
                result,
                reply,
            } => self.statted(site, name, path, result, reply),
            Report::Staged {
                launch,
                request,
                result,
            } => self.staged(launch, *request, result),
            Report::Polled { site, load, states } => {
                // The launches' ends first, then the load that was read with them: a load
                // that already counts an ended launch's processors idle, given before its
                // end, was counted twice once the end came when other users held processors
                // too (the simulation harness's idle check; `SiteTable::report`).
                for (launch, state) in states {
                    self.remote_state(launch, state);
                }
                self.polled(site, load);
                // The surveillance log follows the monitor (seed 003 §5.2's surveillance
                // thread): a line when the site's numbers changed.
                self.sample(Some(site));
            }
        }
    }

    fn submitted(
        &mut self,
        site: usize,
        launch: u64,
        result: Result<String, coalloc_backends::BackendError>,
    ) {
        let Some(l) = self.launches.get(&launch).cloned() else {
            // A launch the driver no longer knows: its job left memory while the submission
            // waited (for an agent site's link, say), and the site now runs it for nobody
            // (the simulation harness, seeds 211 and 2311: its barrier aborts it, and it
            // stayed in the manager's log for ever). Cancel it, and watch it: once a poll
            // finds it ended, the site drops it (`remote_state`; a manager drops only what
            // has ended). Not journaled: a restart before then leaves it, as before.
            if let (Ok(remote), Some(w)) = (result, self.workers.get(site)) {
                tracing::info!(
                    site,
                    launch,
                    remote,
                    "cancelling a launch of a forgotten job"
                );
                w.cancel(remote.clone());
                w.watch(launch, remote.clone());
                self.orphans.insert(launch, (site, remote));
            }
            return;
        };
        match result {
            Ok(remote) => {
                let _ = self.apply(Entry::Launched {
                    launch,
                    remote: remote.clone(),
                });
                if self.is_draining(launch) {
                    // Cancelled while it was being submitted, after its run committed: cancel
                    // it (as below) and watch it until the site says it is gone.
                    self.after_commit
                        .push((l.site, crate::msg::SiteCall::Cancel(remote.clone())));
                    self.workers[l.site].watch(launch, remote);
                    return;
                }
                if l.ended || !self.is_current(launch) {
                    // Cancelled while it was being submitted: once its handle is durable, so
                    // that a restart still knows it and has the site discard it when its job
                    // ages out (the harness's discard check, seed 1489: a host crash took the
                    // lazily committed handle after the cancel had gone, and the site kept
                    // the launch in its log for ever).
                    self.after_commit
                        .push((l.site, crate::msg::SiteCall::Cancel(remote)));
                    return;
                }
                self.workers[l.site].watch(launch, remote);
                let _ = self.apply(Entry::Queued { launch });
            }
            Err(e) => {
                if !matches!(e, coalloc_backends::BackendError::Rejected(_)) {
                    // No answer is not a no: the manager may have taken the launch all the
                    // same (its answer lost on the way, a time-out) and run it; its processes
                    // may even have checked in. Cancel it there by its name, so that it never
                    // runs beside its replacement (found by the simulation harness, seed 5),
                    // with this turn's commit (before its replacement's submission): a
                    // server whose commit is refused (a deposed leader) sends nothing.
                    self.after_commit.push((
                        l.site,
                        crate::msg::SiteCall::CancelUnrecorded {
                            job: l.job,
                            component: l.component,
                            launch,
                        },
                    ));
                }
                if self.is_draining(launch) {
                    // Refused, it never ran; unanswered, it is cancelled by its name (above),
                    // and nothing can say more of it: gone, either way.
                    self.drained(launch);
                } else if !l.ended {
                    // Refused as impossible here (the job's request); else the manager's.
                    let fault = match e {
                        coalloc_backends::BackendError::Rejected(_) => Fault::Job,
                        _ => Fault::Site,
                    };
                    self.fail_launch(launch, format!("submission failed: {e}"), fault);
                }
            }
        }
    }

    /// An agent came (back): settle the submissions a restart found unanswered at its site
    /// (`Driver::unrecorded`: adopted if the agent holds them, else sent again, or, when
    /// that cannot be, failed as the site's fault and placed again), then cancel what it
    /// holds that the server no longer wants, the components of aborted, re-placed or
    /// cancelled starts, so they do not run on beside their replacements.
    fn agent_back(&mut self, site: usize, held: &[crate::link::proto::HeldLaunch]) {
        let _ = self.apply(Entry::SiteLink {
            site,
            up: true,
            grace: 0,
        });
        let here: Vec<u64> = self
            .unrecorded
            .iter()
            .copied()
            .filter(|k| self.launches.get(k).is_some_and(|l| l.site == site))
            .collect();
        for launch in here {
            self.unrecorded.remove(&launch);
            let answer = match held.iter().find(|h| h.launch == launch) {
                Some(h) => {
                    tracing::info!(launch, remote = %h.remote, "adopting a submission its agent holds");
                    Ok(h.remote.clone())
                }
                None if self.send_again(site, launch) => continue,
                None => Err(coalloc_backends::BackendError::Unavailable(
                    "the server stopped while submitting it, and the site's agent does not hold it"
                        .into(),
                )),
            };
            self.submitted(site, launch, answer);
        }
        let unwanted = crate::link::hub::unwanted(held, |launch| {
            self.launches
                .get(&launch)
                .is_some_and(|l| l.site == site && !l.ended)
                && self.is_current(launch)
        });
        for h in unwanted {
            tracing::info!(
                site = %self.config.sites[site].name,
                launch = h.launch,
                remote = %h.remote,
                "cancelling a launch the agent still holds and the server no longer wants"
            );
            self.emit(json!({"event": "orphan_cancelled", "site": self.config.sites[site].name, "job": h.job, "component": h.component, "launch": h.launch}));
            // With the commit of the link's coming up: a deposed leader, whose commit is
            // refused, cancels nothing its successor started (issue 32).
            (self.after_commit).push((site, crate::msg::SiteCall::Cancel(h.remote.clone())));
            // The site must drop it too, when its job ages out or has: the simulation
            // harness, seed 15646, where a crash took the record of its submission's answer,
            // its job was placed again and aged out before its agent came back, and the
            // cancelled launch stayed in the manager's log for ever. Its handle made durable
            // while the driver knows its job (the aging discards it), else watched until a
            // poll finds it ended, then dropped (as `submitted` does a forgotten job's).
            match self.launches.get(&h.launch) {
                Some(l) if l.site == site && l.remote.is_none() => {
                    let _ = self.apply(Entry::Launched {
                        launch: h.launch,
                        remote: h.remote.clone(),
                    });
                }
                Some(_) => {}
                None => {
                    (self.after_commit).push((
                        site,
                        crate::msg::SiteCall::Watch {
                            launch: h.launch,
                            remote: h.remote.clone(),
                        },
                    ));
                    self.orphans.insert(h.launch, (site, h.remote.clone()));
                }
            }
        }
    }

    /// A submission a restart found unanswered that the site's agent does not hold: it
    /// never reached the agent (the agent records every launch it makes before it answers,
    /// and lists them in its hello), so nothing of it runs. Sent again, under its launch
    /// number, when its component still waits for it, rather than failed: failing it
    /// aborted its job's start, and the job's other components, which had reached their
    /// agents and started, ran a second time in the job's next start (issue 32,
    /// failover_netns: a leader cut off between two submissions of one job). With the
    /// commit of the link's coming up: a deposed leader, whose commit is refused, sends
    /// nothing. Only while its component is still `Submitted`: one that checked in (or was
    /// reported started) ran, so sending it again would start it a second time beside a
    /// check-in the core already counts (the simulation harness, `--failover` seeds 605 and
    /// 1332, where an agent's hello left out a launch it had stopped at a heartbeat stop; an
    /// agent now keeps such a launch in its record until the server hears of it). Whether it
    /// was sent again (else the caller fails it).
    fn send_again(&mut self, site: usize, launch: u64) -> bool {
        let waits = self.launches.get(&launch).is_some_and(|l| !l.ended)
            && self.phase_of(launch) == Some(CompPhase::Submitted)
            && !self.is_draining(launch);
        // Its start command, made again by the core whether the replay met it or a snapshot
        // covered it (the simulation harness, `--failover` seeds 326, 673, 1275 and 1353:
        // failed instead, its job's delivered component ran a second time), its reservation
        // included for a job placed by reservation.
        let start = self.core.pending_start(LaunchId(launch));
        let Some(start) = start.filter(|_| waits) else {
            return false;
        };
        // A stage-in would go before the commit: failed and placed again, as before.
        let Some((req, staging)) = self.request_of(&start) else {
            // Its request cannot be made (the job's fault, failed in `internal`).
            return true;
        };
        if staging.as_ref().is_some_and(|st| !st.stage_in.is_empty()) {
            return false;
        }
        tracing::info!(
            launch,
            "sending again a submission its agent never received"
        );
        if let Some(st) = staging {
            self.staging.insert(launch, st);
        }
        (self.after_commit).push((site, crate::msg::SiteCall::Submit(Box::new(req))));
        true
    }

    /// A site's agent link is silent: the core hears "site disconnected" with the site's
    /// grace (`manager.grace`), after which it counts the site lost (its launches fail as
    /// the site's fault, `coalloc_core::scheduler::link`).
    pub(super) fn agent_gone(&mut self, site: usize) {
        let crate::config::BackendKind::Agent { grace } = self.config.backends[site] else {
            return;
        };
        self.emit(json!({"event": "site_disconnected", "site": self.config.sites[site].name}));
        let _ = self.apply(Entry::SiteLink {
            site,
            up: false,
            grace,
        });
    }

    fn polled(&mut self, site: usize, load: Result<SiteLoad, String>) {
        let (idle, total, other, healthy) = match &load {
            Ok(l) => {
                self.loads[site] = (*l, true);
                (l.idle, l.total, l.other, true)
            }
            Err(e) => {
                if self.loads[site].1 {
                    tracing::warn!(site, "site down: {e}");
                    self.emit(json!({"event": "site_down", "site": self.config.sites[site].name, "reason": e}));
                }
                self.loads[site].1 = false;
                let (l, _) = self.loads[site];
                (l.idle, l.total, l.other, false)
            }
        };
        // Given to the core when it differs from the last one, or, read from a manager that
        // answers, when the core's count has moved since: a count that drifted from the site
        // (a release counted twice) was otherwise kept for as long as the site's load did
        // not change, and a job placed on processors that were not there waited for ever
        // (the simulation harness, seed 100449).
        let reading = (idle, total, other, healthy);
        let counted = self.core.site_state(site).map(|s| s.idle);
        let last = self.statuses[site];
        if last.map(|l| l.0) != Some(reading) || (healthy && last.and_then(|l| l.1) != counted) {
            if last.is_some_and(|l| !l.0 .3) && healthy {
                self.emit(json!({"event": "site_up", "site": self.config.sites[site].name}));
            }
            let _ = self.apply(Entry::SiteStatus {
                site,
                idle,
                total,
                healthy,
                other,
            });
            let counted = self.core.site_state(site).map(|s| s.idle);
            self.statuses[site] = Some((reading, counted));
        }
    }

    fn remote_state(&mut self, launch: u64, state: RemoteState) {
        let ended = !matches!(state, RemoteState::Queued | RemoteState::Running);
        if ended && !self.orphans.is_empty() {
            if let Some((site, remote)) = self.orphans.remove(&launch) {
                // A launch of a forgotten job (`submitted`), cancelled, now ended: its site
                // may drop it.
                self.workers[site].forget(launch);
                self.workers[site].discard(remote);
                return;
            }
        }
        let Some(l) = self.launches.get(&launch).cloned() else {
            return;
        };
        if let Some(cancelled) = self.unsettled.get_mut(&launch) {
            // A launch of an ended job that a restart watches until its site no longer runs
            // it (`recheck_ended`). Still running, its cancel died with the server that
            // journaled the job's end: it goes again, once, with the turn's commit.
            if ended {
                self.unsettled.remove(&launch);
                self.workers[l.site].forget(launch);
            } else if !std::mem::replace(cancelled, true) {
                tracing::info!(launch, "cancelling again a launch of an ended job");
                self.after_commit.push((l.site, l.cancel_call(launch)));
            }
            return;
        }
        if l.ended {
            return;
        }
        if self.is_draining(launch) {
            // A stopped committed run's launch: once its site no longer runs it, the core
            // may commit the job's next run (the core's `draining`).
            if ended {
                self.drained(launch);
            }
            return;
        }
        // An ended component: nothing to tell the core, and nothing to journal again.
        let Some(phase) = self.live_phase_of(launch) else {
            // The core has moved on from this launch: it is watched no more.
            self.launches.get_mut(&launch).expect("known launch").ended = true;
            self.workers[l.site].forget(launch);
            if !ended {
                // Yet its site still runs it, and the core's cancel of it may be among this
                // turn's commands, which are carried out after the turn's reports and skip
                // a launch counted ended here (`run_commands`). So it was when a report
                // earlier in the turn failed another component of its job at the job's
                // limit: the job's end forgot the launch's draining, and its processes ran
                // on for nobody (mpi.rs's `mpi_abort_after_the_commit_ends_the_job_everywhere`
                // in CI: both sites' readings in one turn, the failing one first; the other
                // component's MPI ranks spun until killed by hand). Cancel it here, with the
                // turn's commit; a cancel of a launch already gone changes nothing there.
                self.after_commit.push((l.site, l.cancel_call(launch)));
            }
            return;
        };
        match state {
            RemoteState::Queued => {}
            RemoteState::Running => {
                if phase == CompPhase::Submitted {
                    let _ = self.apply(Entry::Started { launch });
                    self.emit_launch("component_started", launch);
                    if l.auto_ready {
                        let _ = self.apply(Entry::Ready { launch });
                        self.emit_launch("component_checked_in", launch);
                    }
                }
            }
            RemoteState::Finished => {
                let before_barrier = matches!(phase, CompPhase::Submitted | CompPhase::Started);
                if before_barrier && !l.auto_ready {
                    // It ended without checking in: it never reached the barrier, which is a
                    // failed start (seed 002 §3.3), not a finished component.
                    let reason = "ended before reaching the barrier".to_string();
                    self.fail_launch(launch, reason, Fault::Job);
                    return;
                }
                if phase == CompPhase::Submitted {
                    let _ = self.apply(Entry::Started { launch });
                }
                // A component that needs no check-in may end between two polls.
                if before_barrier {
                    let _ = self.apply(Entry::Ready { launch });
                }
                self.end_launch(launch, Entry::Finished { launch });
            }
            // Who is to blame: coalloc_core::scheduler::faults.
            RemoteState::Failed(reason) => self.fail_launch(launch, reason, Fault::Job),
            RemoteState::Lost(reason) => self.fail_launch(launch, reason, Fault::Site),
            RemoteState::Unknown => self.fail_launch(
                launch,
                "vanished from the resource manager".into(),
                Fault::Site,
            ),
        }
    }

    /// Whether `launch` is draining: of a stopped committed run, and maybe still running at
    /// its site (the core's `draining`).
    pub(crate) fn is_draining(&self, launch: u64) -> bool {
        self.core.draining().get(LaunchId(launch)).is_some()
    }

    /// A draining launch is gone from its site: stop watching it, and tell the core.
    pub(crate) fn drained(&mut self, launch: u64) {
        if let Some(l) = self.launches.get_mut(&launch) {
            l.ended = true;
            let site = l.site;
            self.workers[site].forget(launch);
            self.emit_launch("component_cancelled", launch);
        }
        let _ = self.apply(Entry::CancelTaken { launch });
    }

    /// Tell the event stream about one launch of a component.
    pub(crate) fn emit_launch(&self, event: &str, launch: u64) {
        if let Some(l) = self.launches.get(&launch) {
            let site = &self.config.sites[l.site].name;
            self.emit(
                json!({"event": event, "job": l.job, "component": l.component,
                "launch": launch, "site": site}),
            );
        }
    }

    /// A launch failed, counting against whom `fault` says: its last report.
    pub(crate) fn fail_launch(&mut self, launch: u64, reason: String, fault: Fault) {
        self.end_launch(
            launch,
            Entry::Failed {
                launch,
                reason,
                fault,
            },
        );
    }

    /// A launch's last report: apply it and stop watching.
    pub(crate) fn end_launch(&mut self, launch: u64, e: Entry) {
        if let Some(l) = self.launches.get_mut(&launch) {
            l.ended = true;
            let (site, job, component) = (l.site, l.job, l.component);
            self.rv.touch(job);
            if matches!(e, Entry::Failed { .. }) {
                if let Some(n) = self.site_failures.get_mut(site) {
                    *n += 1;
                }
            }
            self.workers[site].forget(launch);
            self.stage_out(site, job, component, launch);
            let what = match &e {
                Entry::Finished { .. } => {
                    json!({"event": "component_finished", "job": job, "component": component, "launch": launch})
                }
                Entry::Failed { reason, .. } => {
                    json!({"event": "component_failed", "job": job, "component": component, "launch": launch, "reason": reason})
                }
                _ => json!(null),
            };
            self.emit(what);
        }
        let _ = self.apply(e);
    }

    /// The core's phase of this launch's component, if the launch is its current one.
    pub(crate) fn phase_of(&self, launch: u64) -> Option<CompPhase> {
        let l = self.launches.get(&launch)?;
        let c = self.core.job(l.job)?.comps.get(l.component)?;
        (c.launch == Some(LaunchId(launch))).then_some(c.phase)
    }

    /// [`Self::phase_of`] while the component has not ended (finished, failed, deleted).
    pub(crate) fn live_phase_of(&self, launch: u64) -> Option<CompPhase> {
        self.phase_of(launch).filter(|p| {
            !matches!(
                p,
                CompPhase::Finished | CompPhase::Failed | CompPhase::Deleted
            )
        })
    }

    pub(crate) fn is_current(&self, launch: u64) -> bool {
        self.phase_of(launch).is_some()
    }

    pub(crate) fn site_sample(&self, i: usize) -> SiteSample {
        let (load, healthy) = self.loads[i];
        let coalloc: u32 = self
            .launches
            .values()
            .filter(|l| l.site == i && !l.ended && l.remote.is_some())
            .map(|l| l.count)
            .sum();
        SiteSample {
            time: self.now,
            site: self.config.sites[i].name.clone(),
            total: load.total,
            idle: load.idle,
            coalloc: coalloc.min(load.total),
            other: load.other,
            healthy,
        }
    }

    /// Write a surveillance line for `only` this site if its numbers changed since its last
    /// line, or (`None`) for every site.
    pub(crate) fn sample(&mut self, only: Option<usize>) {
        let all = only.is_none();
        let sites = only.map_or(0..self.config.sites.len(), |i| i..i + 1);
        let mut lines = Vec::new();
        // A site is written once its monitor has read it (not with the zeros before).
        for i in sites.filter(|i| self.statuses[*i].is_some()) {
            let s = self.site_sample(i);
            let same = self.logged[i].as_ref().is_some_and(|l| {
                SiteSample {
                    time: l.time,
                    ..s.clone()
                } == *l
            });
            if all || !same {
                self.logged[i] = Some(s.clone());
                lines.push(s);
            }
        }
        self.surveillance.append(&lines);
    }
}
