//! What the engine's path of every job hands off: the events and commands a trace replay
//! never sees (transfers, clouds, outages, links, reservations, cancels), scripted
//! failures, own start latencies, crash draws. Each is out of line (`#[cold]`), so that the
//! code every job runs stays small enough for the processor's instruction cache (issue 34:
//! the replay waits on instruction fetches, `bench/icache.sh`).

use super::{Ev, Launch, Sim, VmLife};
use crate::engine::params::Scripted;
use crate::workload::exponential;
use coalloc_core::model::Millis;
use coalloc_core::scheduler::{Command, Event, Fault, JobId, LaunchId, SiteId, Start};
use rand::Rng;

impl Sim<'_> {
    /// The reason launch `launch`'s job fails at its end, if the run scripts one
    /// ([`Scripted::FailsAtEnd`]).
    #[cold]
    #[inline(never)]
    pub(super) fn fails_at_end(&self, launch: LaunchId) -> Option<String> {
        let l = self.launches.get(launch.0)?;
        match self.params.scripted.get(&self.index(l.job)?) {
            Some(Scripted::FailsAtEnd(reason)) => Some(reason.clone()),
            _ => None,
        }
    }

    /// [`Sim::take`] of the events most runs have few of (none in a trace replay): kept out
    /// of the path of every job, whose code must stay small enough for the processor's
    /// instruction cache (issue 34: the replay waits on instruction fetches).
    #[cold]
    #[inline(never)]
    pub(super) fn take_rare(&mut self, ev: Ev, batch: &mut Vec<Event>) {
        let now = self.now;
        match ev {
            Ev::LocalArrive(..)
            | Ev::LocalEnd(..)
            | Ev::Ready(_)
            | Ev::End(_)
            | Ev::Crash(_)
            | Ev::WallKill(_) => unreachable!("taken by Sim::take"),
            Ev::Transfer(transfer, ok) => batch.push(Event::TransferDone { transfer, ok }),
            Ev::Cancel(job) => batch.push(Event::Cancel { job }),
            Ev::ReservedStart(launch) => self.reserved_start(launch),
            Ev::VmUp(vm, ok) => {
                let Some(life) = self.vms.get_mut(&vm) else {
                    return;
                };
                let site = life.site;
                if ok {
                    let was = life.running();
                    life.up = Some(now);
                    if life.running() && !was {
                        self.running_vms[site] += 1;
                    }
                    self.sites.at(site, self.now).total += self.vm_processors[site];
                    let u = &mut self.cloud_usage[site];
                    u.peak_vms = u.peak_vms.max(self.running_vms[site]);
                    self.dirty.insert(site);
                    batch.push(Event::VmLeased { vm });
                } else {
                    self.vms.remove(&vm);
                    self.cloud_usage[site].lease_failures += 1;
                    batch.push(Event::LeaseFailed {
                        vm,
                        reason: "the lease failed (injected)".into(),
                    });
                }
            }
            Ev::OutageStart(k) => {
                let site = self.params.failures.outages[k].site;
                self.outage(site, batch);
            }
            Ev::OutageEnd(k) => {
                let site = self.params.failures.outages[k].site;
                let overlapping = self
                    .params
                    .failures
                    .outages
                    .iter()
                    .any(|o| o.site == site && o.from <= now && o.to > now);
                if !overlapping {
                    self.sites.at(site, self.now).up = true;
                    self.dirty.insert(site);
                    if self.params.reenable_after_outage {
                        batch.push(Event::SetUsable { site, usable: true });
                    }
                }
            }
            Ev::LinkDown(k) => self.link_down(k, batch),
            Ev::LinkUp(k) => self.link_up(k, batch),
            Ev::Monitor => {
                let changed = self.report_sites(batch);
                self.due.push((Ev::Monitor, changed));
            }
            Ev::Sample => {
                for (site, s) in self.sites.iter().enumerate() {
                    self.samples.push(super::SiteSample {
                        time: now,
                        site,
                        coalloc: s.busy_held + s.busy_running,
                        others: s.busy_local,
                        idle: s.free(),
                    });
                }
                self.due.push((Ev::Sample, false));
            }
        }
    }

    /// A site goes down: its components fail, its local jobs are lost.
    fn outage(&mut self, site: SiteId, batch: &mut Vec<Event>) {
        let now = self.now;
        self.sites.at(site, now).go_down(now);
        self.sites.at(site, now).take_waiting();
        let here: Vec<LaunchId> = self
            .launches
            .iter()
            .filter(|(_, l)| l.site == site)
            .map(|(id, _)| LaunchId(id))
            .collect();
        for launch in here {
            self.drop_launch(launch);
            batch.push(Event::ComponentFailed {
                launch,
                reason: format!("site {} went down", self.site_names[site]),
                fault: Fault::Site,
            });
        }
        self.dirty.insert(site);
    }

    /// [`Sim::carry_out`] of the commands a trace replay never gets (kept out of the path of
    /// every job, as [`Sim::take_rare`]).
    #[cold]
    #[inline(never)]
    pub(super) fn carry_out_rare(&mut self, cmd: Command) {
        let now = self.now;
        match cmd {
            Command::StartComponent(_)
            | Command::ReleaseBarrier { .. }
            | Command::Notify(_)
            | Command::JobFinished { .. }
            | Command::JobFailed { .. } => unreachable!("carried out by Sim::carry_out"),
            Command::CancelComponent { launch, .. } => {
                if self.core.draining().get(launch).is_some() {
                    self.cancels_taken.push(Event::CancelTaken { launch });
                }
                self.deferred.remove(&launch);
                if self.launches.get(launch.0).is_some() {
                    self.drop_launch(launch);
                }
            }
            Command::StartTransfer {
                transfer,
                from,
                to,
                bytes,
                ..
            } => {
                let ms = self.transfer_time(from, to, bytes);
                let ok = !self.transfers.random_bool(self.params.failures.transfer);
                self.push(now + ms, Ev::Transfer(transfer, ok));
            }
            Command::KillLocal { site, processors } => {
                self.sites.at(site, now).kill_local(processors, now);
                self.dirty.insert(site);
            }
            Command::LeaseVm { site, vm } => {
                let ok = !self.leases.random_bool(self.params.failures.lease);
                self.vms.insert(
                    vm,
                    VmLife {
                        site,
                        up: None,
                        down: None,
                    },
                );
                self.cloud_usage[site].leases += 1;
                self.push(now + self.lease_latency[site].max(0), Ev::VmUp(vm, ok));
            }
            Command::ReleaseVm { site, vm } => {
                if let Some(life) = self.vms.get_mut(&vm) {
                    let per = self.vm_processors[site];
                    let s = self.sites.at(site, now);
                    debug_assert!(s.free() >= per, "a VM released while in use");
                    s.total = s.total.saturating_sub(per);
                    if life.running() {
                        self.running_vms[site] -= 1;
                    }
                    life.down = Some(now);
                    self.dirty.insert(site);
                    self.follow.push(Event::VmReleased { vm });
                }
            }
            Command::ReserveQuery {
                reservation,
                site,
                count,
                duration,
                not_before,
                ..
            } => self.reserve_query(reservation, site, count, duration, not_before),
            Command::Reserve {
                reservation,
                site,
                count,
                start,
                duration,
                name,
                ..
            } => self.reserve(reservation, site, count, (start, duration), name),
            Command::Unreserve { site, name } => self.unreserve(site, &name),
        }
    }

    /// A start at a site that is down fails at once.
    #[cold]
    #[inline(never)]
    pub(super) fn start_at_down_site(&mut self, st: &Start) {
        self.follow.push(Event::ComponentFailed {
            launch: st.launch,
            reason: format!(
                "site {} does not answer (injected outage)",
                self.site_names[st.site]
            ),
            fault: Fault::Site,
        });
    }

    /// A start into a reservation: its processors leave the reservation's idle count for
    /// the component's own.
    #[cold]
    #[inline(never)]
    pub(super) fn claim_window(&mut self, st: &Start) {
        if let Some(r) = &st.reservation {
            self.sites.at(st.site, self.now).calendar.claim(&r.name);
            self.window_of.insert(st.launch, r.name.clone());
        }
    }

    /// The start latency of a launch at `site` of job `job` when some sites or jobs have
    /// their own ([`SimParams::site_start_latency`], [`SimParams::job_start_latency`]; a
    /// launch that fails to start has its site's).
    #[cold]
    #[inline(never)]
    pub(super) fn latency_of(&self, site: SiteId, job: JobId, doomed: bool) -> Millis {
        let p = self.params;
        let site_latency = (p.site_start_latency.get(&site).copied()).unwrap_or(p.start_latency);
        let own = (self.index(job))
            .and_then(|i| p.job_start_latency.get(&i).copied())
            .filter(|_| !doomed);
        own.unwrap_or(site_latency)
    }

    /// When a launch that computes crashes, under a mean time between failures of `mtbf`.
    #[cold]
    #[inline(never)]
    pub(super) fn draw_crash(&mut self, mtbf: Millis) -> Millis {
        (exponential(&mut self.crashes, 1.0 / mtbf.max(1) as f64)).round() as Millis
    }

    /// What a dropped launch leaves besides its processors: the reservation window it
    /// claimed, a scripted aborted start it was dealt.
    #[cold]
    #[inline(never)]
    pub(super) fn drop_extras(&mut self, launch: LaunchId, l: &Launch) {
        if let Some(name) = self.window_of.remove(&launch) {
            // The reservation stays until the core deletes it.
            self.sites.at(l.site, self.now).calendar.unclaim(&name);
        }
        // A scripted aborted start whose launch went before it failed: the next start
        // plays it.
        if self.abort_reasons.remove(&launch).is_some() {
            if let Some(n) = self
                .index(l.job)
                .and_then(|i| self.aborts_dealt.get_mut(&i))
            {
                *n = n.saturating_sub(1);
            }
        }
    }
}

/// The report of a running launch's end other than a plain finish: its job's scripted
/// failure, a crash or a wall-time kill.
#[cold]
#[inline(never)]
pub(super) fn ended_badly(ev: Ev, launch: LaunchId, own: Option<String>) -> Event {
    match (ev, own) {
        (Ev::End(_), reason) => Event::ComponentFailed {
            launch,
            reason: reason.unwrap_or_default(),
            fault: Fault::Job,
        },
        (Ev::Crash(_), _) => Event::ComponentFailed {
            launch,
            reason: "the component crashed (injected)".into(),
            fault: Fault::Site,
        },
        _ => Event::ComponentFailed {
            launch,
            reason: "killed at its maximum wall time".into(),
            fault: Fault::Job,
        },
    }
}
