//! The On-Demand provisioning policy (OD, seed 004 §III-B): "leases more VMs and assigns
//! them to a cloud site to meet job demand, and releases idle VMs during off-peak hours. [...]
//! On a cloud with free resource use, OD releases VMs after they have been idle for a certain
//! amount of time. On a non-free cloud, OD releases idle VMs to match the charging model; for
//! Amazon, resources are released when they are close to reaching another hour of their
//! lifetime."
//!
//! The decisions are pure functions of the sites' state, the queue and the time; the
//! scheduler ([`crate::scheduler`]) turns them into lease and release commands.
//!
//! - **Demand** ([`plan`]): the queued jobs, in the order the queue policy would try them and
//!   each restricted to the sites it may use ([`crate::queue::QueuePolicy::demand`]), are
//!   placed one after the other against the idle processors plus those of VMs already on
//!   their way, each placement taking what it uses. A job that does not fit there is placed
//!   again as if every cloud site also had every VM it may still lease (up to `max_vms`, not
//!   while a failed lease is being waited out); if it fits, the VMs it needs on each cloud
//!   site are leased. With first fit the site-list order decides, so a free private cloud
//!   listed before a paid public one is grown first. What no queued job takes is the site's
//!   *spare*: only spare idle VMs may go.
//! - **Minimum**: a cloud site with fewer than `min_vms` VMs leased or on their way leases
//!   the difference.
//! - **Release** ([`releases`]): an idle running VM goes when it is *due* — on a free cloud
//!   after [`OnDemandParams::idle_time`] idle; on a paid one when its current paid hour has at
//!   most [`OnDemandParams::release_margin`] left, whatever its idle time (keeping it into
//!   the next hour would cost that hour) — as long as the site keeps `min_vms` and no queued
//!   job wants its processors. Free VMs idle longest go first; paid ones by number.

use super::cloud::{CloudState, Vm, VmId, VmPhase};
use crate::model::{Millis, Time, HOUR, MINUTE};
use crate::scheduler::api::{JobId, SiteId};

/// The parameters of On-Demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OnDemandParams {
    /// Free clouds: a VM idle this long is released.
    pub idle_time: Millis,
    /// Paid clouds: an idle VM is released when its paid hour has this long left or less.
    pub release_margin: Millis,
    /// After a failed lease, no lease on that site for this long.
    pub lease_retry: Millis,
}

impl Default for OnDemandParams {
    fn default() -> Self {
        OnDemandParams {
            idle_time: 5 * MINUTE,
            release_margin: MINUTE,
            lease_retry: MINUTE,
        }
    }
}

impl OnDemandParams {
    /// Check the parameters: times not negative, the margin inside an hour.
    pub fn validate(&self) -> Result<(), String> {
        if self.idle_time < 0 || self.lease_retry < 0 {
            return Err("idle_time and lease_retry must not be negative".to_owned());
        }
        if !(0..HOUR).contains(&self.release_margin) {
            return Err(format!(
                "release_margin must be at least 0 and less than an hour (got {} ms)",
                self.release_margin
            ));
        }
        Ok(())
    }
}

/// Whether an idle running VM is due for release at `now` by its site's price model (demand
/// and `min_vms` aside).
pub fn is_due(vm: &Vm, paid: bool, p: &OnDemandParams, now: Time) -> bool {
    due_at(vm, paid, p, now).is_some_and(|t| t <= now)
}

/// When an idle running VM becomes due if it stays idle: `now` if it is due already, `None`
/// if it is not idle and running.
pub fn due_at(vm: &Vm, paid: bool, p: &OnDemandParams, now: Time) -> Option<Time> {
    if vm.phase != VmPhase::Ready || vm.busy > 0 {
        return None;
    }
    let idle_since = vm.idle_since?;
    if paid {
        let leased = vm.leased?;
        let into = (now - leased).rem_euclid(HOUR);
        let window = HOUR - p.release_margin;
        // Never in the very first instant of an hour (`into` = 0): that hour is paid for now.
        Some(if into >= window && into > 0 {
            now
        } else {
            now + (window - into).max(1)
        })
    } else {
        Some((idle_since + p.idle_time).max(now))
    }
}

/// The VMs of one cloud site to release at `now`: due idle VMs, at most `spare_vms` of them,
/// never leaving fewer than `min_vms` leased.
pub fn releases(cloud: &CloudState, p: &OnDemandParams, now: Time, spare_vms: u32) -> Vec<VmId> {
    let above_min = cloud.live().saturating_sub(cloud.limits.min_vms);
    let most = above_min.min(spare_vms) as usize;
    if most == 0 {
        return Vec::new();
    }
    let paid = cloud.paid();
    let mut due: Vec<(Time, VmId)> = cloud
        .vms()
        .filter(|v| is_due(v, paid, p, now))
        .map(|v| (if paid { 0 } else { v.idle_since.unwrap_or(now) }, v.id))
        .collect();
    due.sort_unstable();
    due.into_iter().take(most).map(|(_, id)| id).collect()
}

/// The next time after `now` a release on this site may become due (an idle VM reaching its
/// idle time or its paid hour's end), or a failed lease's wait ends; `None` if nothing can.
pub fn next_check(cloud: &CloudState, p: &OnDemandParams, now: Time) -> Option<Time> {
    let retry = cloud.retry_at.filter(|&t| t > now);
    let release = if cloud.live() > cloud.limits.min_vms {
        let paid = cloud.paid();
        cloud
            .vms()
            .filter_map(|v| due_at(v, paid, p, now))
            .filter(|&t| t > now)
            .min()
    } else {
        None
    };
    match (retry, release) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Whether some VM of this site is due at `now` and could go (the site is above `min_vms`).
pub fn any_due(cloud: &CloudState, p: &OnDemandParams, now: Time) -> bool {
    cloud.live() > cloud.limits.min_vms && cloud.vms().any(|v| is_due(v, cloud.paid(), p, now))
}

/// What one round of demand planning decided, per site.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    /// VMs to lease.
    pub lease: Vec<u32>,
    /// Processors (idle, or on VMs on their way) that no queued job takes.
    pub spare: Vec<u32>,
}

/// What [`plan`] reads of one cloud site at one instant: VMs on their way, VMs that may
/// still be leased, VMs live (toward `min_vms`), and whether a failed lease is being waited
/// out. Two instants with equal views (and equal idle counts, usable flags and demand) get
/// the same plan, which lets the scheduler reuse a plan instead of making it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloudView {
    pub leasing: u32,
    pub leasable: u32,
    pub live: u32,
    pub waiting: bool,
}

impl CloudView {
    /// The view of `cloud` at `now`.
    pub fn of(cloud: &CloudState, now: Time) -> CloudView {
        CloudView {
            leasing: cloud.count(VmPhase::Leasing),
            leasable: cloud.leasable(),
            live: cloud.live(),
            waiting: cloud.retry_at.is_some_and(|t| t > now),
        }
    }
}

/// The scheduler's placement of a job against given idle counts and usable flags.
pub type PlaceFn<'a> = dyn FnMut(JobId, &[u32], &[bool]) -> Option<Vec<(SiteId, u32)>> + 'a;

/// Plan leases for the queued jobs (see the module documentation). `idle` and `usable` are
/// the sites' as the scheduler sees them, `clouds` the cloud state of each site (`None` for a
/// cluster), `demand` the queued jobs in order with the sites each may use, and `place` the
/// scheduler's placement of a job against given idle counts and usable flags.
pub fn plan(
    idle: &[u32],
    usable: &[bool],
    clouds: &[Option<&CloudState>],
    now: Time,
    demand: &[(JobId, Option<Vec<bool>>)],
    place: &mut PlaceFn<'_>,
) -> Plan {
    let n = idle.len();
    let per = |s: usize| {
        clouds
            .get(s)
            .copied()
            .flatten()
            .map_or(1, |c| c.limits.vm_processors.max(1))
    };
    let mut avail = idle.to_vec();
    let mut room = vec![0u32; n];
    for s in 0..n {
        if let Some(c) = clouds.get(s).copied().flatten() {
            avail[s] += c.count(VmPhase::Leasing) * per(s);
            let waiting = c.retry_at.is_some_and(|t| t > now);
            if usable.get(s).copied().unwrap_or(false) && !waiting {
                room[s] = c.leasable();
            }
        }
    }
    let mut lease = vec![0u32; n];
    for (id, allowed) in demand {
        let mut ok = usable.to_vec();
        if let Some(a) = allowed {
            for (u, &a) in ok.iter_mut().zip(a) {
                *u &= a;
            }
        }
        if let Some(p) = place(*id, &avail, &ok) {
            for (s, c) in p {
                avail[s] = avail[s].saturating_sub(c);
            }
            continue;
        }
        if (0..n).all(|s| room[s] == 0 || !ok[s]) {
            continue;
        }
        let grown: Vec<u32> = (0..n)
            .map(|s| avail[s].saturating_add(room[s].saturating_mul(per(s))))
            .collect();
        let Some(p) = place(*id, &grown, &ok) else {
            continue;
        };
        for (s, c) in p {
            let from_idle = c.min(avail[s]);
            let need = c - from_idle;
            avail[s] -= from_idle;
            if need > 0 {
                let vms = need.div_ceil(per(s)).min(room[s]);
                lease[s] += vms;
                room[s] -= vms;
                avail[s] += (vms * per(s)).saturating_sub(need);
            }
        }
    }
    // Top every cloud up to its minimum.
    for s in 0..n {
        if let Some(c) = clouds.get(s).copied().flatten() {
            let short = c.limits.min_vms.saturating_sub(c.live() + lease[s]);
            let add = short.min(room[s]);
            lease[s] += add;
            avail[s] += add * per(s);
        }
    }
    Plan {
        lease,
        spare: avail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CloudLimits;

    fn vm(leased: Time, idle_since: Option<Time>, busy: u32) -> Vm {
        Vm {
            id: VmId(1),
            phase: VmPhase::Ready,
            requested: leased,
            leased: Some(leased),
            busy,
            idle_since,
        }
    }

    #[test]
    fn paid_vms_are_due_only_near_the_end_of_a_paid_hour() {
        let p = OnDemandParams::default(); // 1 min margin
        let v = vm(0, Some(0), 0);
        assert!(!is_due(&v, true, &p, 0));
        assert!(!is_due(&v, true, &p, 50 * MINUTE));
        assert_eq!(due_at(&v, true, &p, 50 * MINUTE), Some(59 * MINUTE));
        assert!(is_due(&v, true, &p, 59 * MINUTE));
        assert!(is_due(&v, true, &p, 60 * MINUTE - 1));
        // The next hour has begun: it is paid, so the VM stays until its end.
        assert!(!is_due(&v, true, &p, 60 * MINUTE));
        assert_eq!(due_at(&v, true, &p, 60 * MINUTE), Some(119 * MINUTE));
        assert_eq!(due_at(&vm(0, None, 1), true, &p, 59 * MINUTE), None, "busy");
    }

    #[test]
    fn free_vms_are_due_after_the_idle_time() {
        let p = OnDemandParams {
            idle_time: 10 * MINUTE,
            ..OnDemandParams::default()
        };
        let v = vm(0, Some(30 * MINUTE), 0);
        assert!(!is_due(&v, false, &p, 39 * MINUTE));
        assert!(is_due(&v, false, &p, 40 * MINUTE));
        assert_eq!(due_at(&v, false, &p, 31 * MINUTE), Some(40 * MINUTE));
    }

    #[test]
    fn params_are_checked() {
        let bad = OnDemandParams {
            release_margin: HOUR,
            ..OnDemandParams::default()
        };
        assert!(bad.validate().is_err());
        assert!(OnDemandParams::default().validate().is_ok());
    }

    #[test]
    fn plan_grows_the_first_cloud_that_fits_and_keeps_the_minimum() {
        // Site 0: a cluster with 4 idle; site 1: a free cloud (min 2, max 8, 2 VMs on the
        // way); site 2: a paid cloud (max 8).
        let limits = |min, max, price| CloudLimits {
            vm_processors: 1,
            min_vms: min,
            max_vms: max,
            lease_latency: 0,
            price_micros_per_vm_hour: price,
        };
        let mut private = CloudState::new(limits(2, 8, 0));
        private.request(VmId(1), 0);
        private.request(VmId(2), 0);
        let public = CloudState::new(limits(0, 8, 65_000));
        // First fit over three sites, one-site jobs of `size` processors.
        let sizes = [(1, 3), (2, 5), (3, 6), (4, 9)];
        let mut place = |id: JobId, idle: &[u32], ok: &[bool]| {
            let size = sizes.iter().find(|(j, _)| *j == id).unwrap().1;
            (0..3)
                .find(|&s| ok[s] && idle[s] >= size)
                .map(|s| vec![(s, size)])
        };
        let demand: Vec<(JobId, Option<Vec<bool>>)> = vec![
            (1, None),                           // 3 on the cluster
            (2, None),                           // 2 on the way + 3 leased on the private cloud
            (3, Some(vec![false, false, true])), // only the public cloud: 6 leased there
            (4, None),                           // 9 fits nowhere, even grown
        ];
        let plan = plan(
            &[4, 0, 0],
            &[true; 3],
            &[None, Some(&private), Some(&public)],
            0,
            &demand,
            &mut place,
        );
        assert_eq!(plan.lease, [0, 3, 6]);
        assert_eq!(plan.spare, [1, 0, 0]);
    }
}
