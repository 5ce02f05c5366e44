//! The scheduler's side of cloud provisioning (seed 004 §III-A, §III-B): a provisioned cloud
//! site starts empty and holds only the processors of the VMs the driver reported running;
//! after every scheduling pass (and when a VM comes or goes, or a release falls due) the
//! On-Demand policy ([`crate::provisioning::on_demand`]) looks at the queue and the clouds,
//! and its decisions go out as [`Command::LeaseVm`] and [`Command::ReleaseVm`].
//!
//! # Plans made once
//!
//! Under a period-driven policy (seed 004 §IV-A: every 30 s) On-Demand (seed 004 §III-B)
//! decides at every periodic pass, and its demand plan ([`on_demand::plan`]) places every
//! queued job again, even when the pass changed nothing. The plan is a pure function of the
//! sites' idle processors and usable flags, each cloud's [`on_demand::CloudView`], the
//! policy's fit and the demand (the queued jobs in order, with their sites), and most
//! periodic passes of a blocked queue change none of them. So the scheduler keeps the last
//! plan with its [`PlanInputs`] and uses it again while they are equal; the demand is stood
//! for by `Core::demand_version`, which moves whenever the queue may have changed (see
//! `Scheduler::pass` and `Scheduler::settle`). The releases are decided
//! at every decision as before (they depend on the time), from the plan's spare processors.
//! A reused plan is the plan that would have been made, so schedules, leases, releases and
//! bills are the same (`tests/plan_reuse.rs` checks it against runs that make every plan).

use super::api::{Command, JobId, LaunchId, Rejected, SiteId};
use super::jobs::Phase;
use super::sites::SiteTable;
use super::Core;
use crate::placement::Fit;
use crate::provisioning::{on_demand, CloudState, Provisioning, VmId};
use crate::queue::{Demand, QueuePolicy};

/// The cloud state of every site, and every provisioned cloud site emptied: its processors
/// come with the VMs leased for it. Static provisioning keeps clouds as fixed pools.
pub(super) fn init(sites: &mut SiteTable, p: &Provisioning) -> Vec<Option<CloudState>> {
    let Provisioning::OnDemand(_) = p else {
        return vec![None; sites.len()];
    };
    let mut clouds = Vec::with_capacity(sites.len());
    for (i, site) in sites.sites.iter().enumerate() {
        let cloud = site.cloud.clone().map(CloudState::new);
        if cloud.is_some() {
            sites.state[i].processors = 0;
            sites.state[i].idle = 0;
        }
        clouds.push(cloud);
    }
    clouds
}

/// What a demand plan was made from (see "Plans made once" above): equal inputs, equal plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PlanInputs {
    idle: Vec<u32>,
    usable: Vec<bool>,
    clouds: Vec<Option<on_demand::CloudView>>,
    fit: Option<Fit>,
    /// `Core::demand_version` when the plan was made.
    demand: u64,
}

/// The last demand plan and its inputs.
#[derive(Debug, Clone)]
pub(super) struct PlanMemo {
    inputs: PlanInputs,
    plan: on_demand::Plan,
    /// The queue policy said its demand ([`QueuePolicy::demand`]); the scheduler's own list
    /// (every queued job) is not tracked by the demand version, so its plans are not reused.
    reusable: bool,
}

/// The provisioned cloud sites, with their numbers.
fn provisioned(clouds: &[Option<CloudState>]) -> impl Iterator<Item = (SiteId, &CloudState)> {
    clouds
        .iter()
        .enumerate()
        .filter_map(|(s, c)| Some((s, c.as_ref()?)))
}

impl Core {
    /// A launch's processors are free again (its site's, and its VMs' on a cloud).
    pub(super) fn release_launch(
        &mut self,
        site: SiteId,
        launch: LaunchId,
        count: u32,
        was_pending: bool,
    ) {
        self.sites.release(site, count, was_pending);
        let now = self.now;
        if let Some(Some(c)) = self.clouds.get_mut(site) {
            c.free(launch, now);
        }
    }

    fn site_of_vm(&self, vm: VmId) -> Result<SiteId, Rejected> {
        self.clouds
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.vm(vm).is_some()))
            .ok_or_else(|| Rejected::Invalid(format!("no VM {vm} was asked for")))
    }

    pub(super) fn vm_leased(&mut self, vm: VmId) -> Result<(), Rejected> {
        let site = self.site_of_vm(vm)?;
        let now = self.now;
        if let Some(Some(c)) = self.clouds.get_mut(site) {
            if c.leased(vm, now) {
                let per = c.limits.vm_processors;
                self.sites.grow(site, per);
                self.dirty = true;
                self.provision_now = true;
            }
        }
        Ok(())
    }

    pub(super) fn lease_failed(&mut self, vm: VmId, _reason: &str) -> Result<(), Rejected> {
        let site = self.site_of_vm(vm)?;
        let retry = match self.config.provisioning {
            Provisioning::OnDemand(p) => p.lease_retry,
            Provisioning::Static => 0,
        };
        let at = self.now + retry;
        if let Some(Some(c)) = self.clouds.get_mut(site) {
            c.lease_failed(vm, at);
            self.provision_now = true;
        }
        Ok(())
    }

    pub(super) fn vm_released(&mut self, vm: VmId) -> Result<(), Rejected> {
        let site = self.site_of_vm(vm)?;
        let now = self.now;
        match self.clouds.get_mut(site) {
            Some(Some(c)) => match c.released(vm, now) {
                Some(_) => {
                    self.provision_now = true;
                    Ok(())
                }
                None => Err(Rejected::Invalid(format!("VM {vm} was not being released"))),
            },
            _ => Ok(()),
        }
    }

    /// Whether provisioning decides at this event: there are provisioned clouds and a pass
    /// ran, a VM came or went, or a release or retry fell due.
    pub(super) fn wants_provisioning(&self, pass: bool) -> bool {
        self.clouds.iter().any(Option::is_some)
            && (pass || self.provision_now || self.provision_at.is_some_and(|t| t <= self.now))
    }

    /// The queued jobs in submission order, any site: the demand of a queue policy that does
    /// not say its own.
    fn queued_jobs(&self) -> Vec<Demand> {
        self.jobs
            .values()
            .filter(|j| j.phase == Phase::Queued)
            .map(|j| (j.id, None))
            .collect()
    }

    /// On-Demand's decisions at this instant (see [`crate::provisioning::on_demand`]), for
    /// the demand of `queue`.
    pub(super) fn provision(&mut self, queue: &dyn QueuePolicy) {
        self.provision_now = false;
        let Provisioning::OnDemand(p) = self.config.provisioning else {
            return;
        };
        let now = self.now;
        let usable: Vec<bool> = self.sites.usable();
        let can_lease = provisioned(&self.clouds)
            .any(|(s, c)| usable[s] && c.leasable() > 0 && c.retry_at.is_none_or(|t| t <= now));
        let due = provisioned(&self.clouds).any(|(_, c)| on_demand::any_due(c, &p, now));
        let short = provisioned(&self.clouds).any(|(_, c)| c.live() < c.limits.min_vms);
        if can_lease || due || short {
            let fit = queue.fit();
            let inputs = PlanInputs {
                idle: self.sites.idle(),
                usable,
                clouds: self
                    .clouds
                    .iter()
                    .map(|c| c.as_ref().map(|c| on_demand::CloudView::of(c, now)))
                    .collect(),
                fit,
                demand: self.demand_version,
            };
            let memo = match self.plan_memo.take() {
                Some(memo) if self.reuse_plans && memo.reusable && memo.inputs == inputs => memo,
                _ => {
                    self.plans_made += 1;
                    let given = queue.demand(self.sites.len());
                    let reusable = given.is_some();
                    let demand = given.unwrap_or_else(|| self.queued_jobs());
                    let views: Vec<Option<&CloudState>> =
                        self.clouds.iter().map(Option::as_ref).collect();
                    let mut place = |id: JobId, idle: &[u32], ok: &[bool]| {
                        let job = &self.jobs.get(&id)?.job;
                        self.place_sites(job, idle, ok, fit)
                            .ok()
                            .map(|p| p.to_vec())
                    };
                    let plan = on_demand::plan(
                        &inputs.idle,
                        &inputs.usable,
                        &views,
                        now,
                        &demand,
                        &mut place,
                    );
                    PlanMemo {
                        inputs,
                        plan,
                        reusable,
                    }
                }
            };
            self.apply(&memo.plan, &p);
            self.plan_memo = Some(memo);
        }
        self.provision_at = provisioned(&self.clouds)
            .filter_map(|(_, c)| on_demand::next_check(c, &p, now))
            .min();
    }

    /// Send out a plan's leases, and release the due VMs its spare allows.
    fn apply(&mut self, plan: &on_demand::Plan, p: &on_demand::OnDemandParams) {
        let now = self.now;
        for site in 0..self.clouds.len() {
            let Some(c) = self.clouds[site].as_mut() else {
                continue;
            };
            for _ in 0..plan.lease.get(site).copied().unwrap_or(0) {
                let vm = VmId(self.next_vm);
                self.next_vm += 1;
                c.request(vm, now);
                self.commands.push_back(Command::LeaseVm { site, vm });
            }
            let per = c.limits.vm_processors.max(1);
            let spare = plan
                .spare
                .get(site)
                .copied()
                .unwrap_or(0)
                .min(self.sites.state[site].idle);
            for vm in on_demand::releases(c, p, now, spare / per) {
                if c.release(vm) {
                    self.sites.shrink(site, per);
                    self.commands.push_back(Command::ReleaseVm { site, vm });
                }
            }
        }
    }
}
