//! One cloud site's leased VMs (seed 004 §III-A: a cloud site is a virtual cluster of VMs
//! leased from an IaaS cloud): which VMs are being leased, running or being released, which
//! of our launches run on which VM, since when a VM has been idle, and the bill.
//!
//! Billing follows the hourly model seed 004 §V-A takes from Amazon EC2: a VM is billed from
//! the moment the provider reports it running ([`crate::scheduler::Event::VmLeased`]) until
//! it reports it gone ([`crate::scheduler::Event::VmReleased`]), every started hour in full
//! and at least one hour, at the site's price per VM-hour (0 for a private cloud).

use crate::model::{CloudLimits, Time, HOUR};
use crate::scheduler::api::LaunchId;
use std::collections::BTreeMap;
use std::fmt;

/// A leased VM's number, given by the scheduler when it asks for the lease (unique over
/// every site).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct VmId(pub u64);

impl fmt::Display for VmId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "V{}", self.0)
    }
}

/// Where a VM is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum VmPhase {
    /// Asked for; not running yet (the lease latency).
    Leasing,
    /// Running: components may use its processors.
    Ready,
    /// Asked to go; still billed until the provider says it is gone.
    Releasing,
}

/// One VM.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Vm {
    pub id: VmId,
    pub phase: VmPhase,
    /// When the lease was asked for.
    pub requested: Time,
    /// When the provider reported it running: billing starts here.
    pub leased: Option<Time>,
    /// Processors our launches use on it.
    pub busy: u32,
    /// Since when it has run nothing (ready and not busy).
    pub idle_since: Option<Time>,
}

/// VM-hours billed and what they cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Bill {
    pub vm_hours: u64,
    /// Millionths of a dollar.
    pub cost_micros: u64,
}

impl Bill {
    /// The bill of `hours` VM-hours at `price` millionths of a dollar each.
    pub fn of(hours: u64, price: u64) -> Bill {
        Bill {
            vm_hours: hours,
            cost_micros: hours.saturating_mul(price),
        }
    }

    /// The sum of two bills (saturating).
    pub fn plus(self, other: Bill) -> Bill {
        Bill {
            vm_hours: self.vm_hours.saturating_add(other.vm_hours),
            cost_micros: self.cost_micros.saturating_add(other.cost_micros),
        }
    }

    /// The cost in dollars.
    pub fn dollars(&self) -> f64 {
        self.cost_micros as f64 / 1e6
    }
}

/// Hours billed for a VM running from `from` to `to`: every started hour, at least one.
pub fn billed_hours(from: Time, to: Time) -> u64 {
    let ran = (to - from).max(0);
    (ran.div_euclid(HOUR) + i64::from(ran.rem_euclid(HOUR) > 0)).max(1) as u64
}

/// A cloud site's VMs and bill.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CloudState {
    pub limits: CloudLimits,
    vms: BTreeMap<VmId, Vm>,
    /// Launch → the processors it uses on each VM.
    alloc: BTreeMap<LaunchId, Vec<(VmId, u32)>>,
    /// The bill of the VMs already gone.
    pub billed: Bill,
    /// Leases asked for and leases that failed.
    pub leases: u64,
    pub lease_failures: u64,
    /// Most VMs leased (asked for and not gone) at one time.
    pub peak_vms: u32,
    /// No new lease before this time (after a failed lease).
    pub retry_at: Option<Time>,
}

impl CloudState {
    pub fn new(limits: CloudLimits) -> CloudState {
        CloudState {
            limits,
            vms: BTreeMap::new(),
            alloc: BTreeMap::new(),
            billed: Bill::default(),
            leases: 0,
            lease_failures: 0,
            peak_vms: 0,
            retry_at: None,
        }
    }

    /// Every VM not gone, by number.
    pub fn vms(&self) -> impl Iterator<Item = &Vm> {
        self.vms.values()
    }

    pub fn vm(&self, id: VmId) -> Option<&Vm> {
        self.vms.get(&id)
    }

    /// VMs in this phase.
    pub fn count(&self, phase: VmPhase) -> u32 {
        self.vms.values().filter(|v| v.phase == phase).count() as u32
    }

    /// VMs asked for or running (the ones that count toward `min_vms`).
    pub fn live(&self) -> u32 {
        self.vms
            .values()
            .filter(|v| v.phase != VmPhase::Releasing)
            .count() as u32
    }

    /// VMs that may still be leased: `max_vms` minus every VM not gone.
    pub fn leasable(&self) -> u32 {
        self.limits.max_vms.saturating_sub(self.vms.len() as u32)
    }

    /// Processors of the running VMs.
    pub fn capacity(&self) -> u32 {
        self.count(VmPhase::Ready) * self.limits.vm_processors
    }

    /// Whether the site charges for its VMs.
    pub fn paid(&self) -> bool {
        self.limits.price_micros_per_vm_hour > 0
    }

    /// A lease was asked for.
    pub fn request(&mut self, id: VmId, now: Time) {
        self.vms.insert(
            id,
            Vm {
                id,
                phase: VmPhase::Leasing,
                requested: now,
                leased: None,
                busy: 0,
                idle_since: None,
            },
        );
        self.leases += 1;
        self.peak_vms = self.peak_vms.max(self.vms.len() as u32);
    }

    /// The provider reports the VM running. Returns whether that changed anything (a report
    /// about an unknown or already running VM does not).
    pub fn leased(&mut self, id: VmId, now: Time) -> bool {
        match self.vms.get_mut(&id) {
            Some(v) if v.phase == VmPhase::Leasing => {
                v.phase = VmPhase::Ready;
                v.leased = Some(now);
                v.idle_since = Some(now);
                true
            }
            _ => false,
        }
    }

    /// The lease failed: the VM is forgotten and no lease is asked for before `retry_at`.
    pub fn lease_failed(&mut self, id: VmId, retry_at: Time) -> bool {
        match self.vms.get(&id) {
            Some(v) if v.phase == VmPhase::Leasing => {
                self.vms.remove(&id);
                self.lease_failures += 1;
                self.retry_at = Some(retry_at);
                true
            }
            _ => false,
        }
    }

    /// Start releasing a running idle VM. Returns whether it was one.
    pub fn release(&mut self, id: VmId) -> bool {
        match self.vms.get_mut(&id) {
            Some(v) if v.phase == VmPhase::Ready && v.busy == 0 => {
                v.phase = VmPhase::Releasing;
                v.idle_since = None;
                true
            }
            _ => false,
        }
    }

    /// The provider reports the VM gone: its bill is added. Returns the VM's bill, or `None`
    /// for a VM that was not being released (a report about a running VM is ignored: the
    /// scheduler never asked for it).
    pub fn released(&mut self, id: VmId, now: Time) -> Option<Bill> {
        let v = self.vms.get(&id)?;
        if v.phase != VmPhase::Releasing {
            return None;
        }
        let bill = v
            .leased
            .map(|from| {
                Bill::of(
                    billed_hours(from, now),
                    self.limits.price_micros_per_vm_hour,
                )
            })
            .unwrap_or_default();
        self.vms.remove(&id);
        self.billed = self.billed.plus(bill);
        Some(bill)
    }

    /// Put a launch of `count` processors on running VMs: the busiest VMs that have room
    /// first (then by number), so that idle VMs stay idle and can go. Returns the processors
    /// placed (less than `count` only if the scheduler's idle count was wrong).
    pub fn allocate(&mut self, launch: LaunchId, count: u32) -> u32 {
        let per = self.limits.vm_processors;
        let mut order: Vec<(u32, VmId)> = self
            .vms
            .values()
            .filter(|v| v.phase == VmPhase::Ready && v.busy < per)
            .map(|v| (per - v.busy, v.id))
            .collect();
        order.sort_unstable();
        let mut left = count;
        let mut parts = Vec::new();
        for (room, id) in order {
            if left == 0 {
                break;
            }
            let take = room.min(left);
            if let Some(v) = self.vms.get_mut(&id) {
                v.busy += take;
                v.idle_since = None;
            }
            parts.push((id, take));
            left -= take;
        }
        self.alloc.insert(launch, parts);
        count - left
    }

    /// A launch here ended: its processors are free again.
    pub fn free(&mut self, launch: LaunchId, now: Time) {
        for (id, n) in self.alloc.remove(&launch).unwrap_or_default() {
            if let Some(v) = self.vms.get_mut(&id) {
                v.busy = v.busy.saturating_sub(n);
                if v.busy == 0 && v.phase == VmPhase::Ready {
                    v.idle_since = Some(now);
                }
            }
        }
    }

    /// The VMs a launch runs on.
    pub fn placement_of(&self, launch: LaunchId) -> &[(VmId, u32)] {
        self.alloc.get(&launch).map_or(&[], Vec::as_slice)
    }

    /// The bill so far: the VMs gone, plus every running or releasing VM billed up to `now`.
    pub fn bill_until(&self, now: Time) -> Bill {
        let price = self.limits.price_micros_per_vm_hour;
        self.vms
            .values()
            .filter_map(|v| v.leased)
            .map(|from| Bill::of(billed_hours(from, now), price))
            .fold(self.billed, Bill::plus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MINUTE;

    fn limits(per: u32, price: u64) -> CloudLimits {
        CloudLimits {
            vm_processors: per,
            min_vms: 0,
            max_vms: 4,
            lease_latency: 0,
            price_micros_per_vm_hour: price,
        }
    }

    #[test]
    fn every_started_hour_is_billed_and_at_least_one() {
        assert_eq!(billed_hours(0, 0), 1);
        assert_eq!(billed_hours(0, 59 * MINUTE), 1);
        assert_eq!(billed_hours(0, HOUR), 1);
        assert_eq!(billed_hours(0, HOUR + 1), 2);
        assert_eq!(billed_hours(10, 10 + 3 * HOUR), 3);
        assert_eq!(Bill::of(3, 65_000).dollars(), 0.195);
    }

    #[test]
    fn launches_pack_onto_busy_vms_and_idle_times_are_kept() {
        let mut c = CloudState::new(limits(4, 0));
        for i in 1..=2 {
            c.request(VmId(i), 0);
            assert!(c.leased(VmId(i), 100));
        }
        assert_eq!(c.capacity(), 8);
        assert_eq!(c.allocate(LaunchId(1), 3), 3);
        // The second launch fills VM 1 (1 free) before touching VM 2.
        assert_eq!(c.allocate(LaunchId(2), 2), 2);
        assert_eq!(c.placement_of(LaunchId(2)), [(VmId(1), 1), (VmId(2), 1)]);
        assert_eq!(c.vm(VmId(2)).unwrap().idle_since, None);
        c.free(LaunchId(2), 500);
        assert_eq!(c.vm(VmId(2)).unwrap().idle_since, Some(500));
        assert_eq!(c.vm(VmId(1)).unwrap().busy, 3);
        assert!(!c.release(VmId(1)), "a busy VM is not released");
        assert!(c.release(VmId(2)));
        assert_eq!(c.capacity(), 4);
        assert_eq!(c.live(), 1);
        assert_eq!(
            c.leasable(),
            2,
            "a releasing VM still counts toward max_vms"
        );
    }

    #[test]
    fn the_bill_counts_gone_and_running_vms() {
        let mut c = CloudState::new(limits(1, 65_000));
        c.request(VmId(1), 0);
        c.request(VmId(2), 0);
        c.leased(VmId(1), 0);
        c.leased(VmId(2), 30 * MINUTE);
        assert!(c.release(VmId(1)));
        assert_eq!(c.released(VmId(1), 59 * MINUTE), Some(Bill::of(1, 65_000)));
        assert_eq!(
            c.released(VmId(2), HOUR),
            None,
            "VM 2 was not being released"
        );
        // VM 2 has run 2 h 10 min at 2 h 40 min: 3 hours, plus VM 1's one.
        assert_eq!(c.bill_until(160 * MINUTE), Bill::of(4, 65_000));
        assert!(!c.lease_failed(VmId(3), 5));
        c.request(VmId(3), 0);
        assert!(c.lease_failed(VmId(3), 60_000));
        assert_eq!((c.lease_failures, c.retry_at), (1, Some(60_000)));
    }
}
