//! Cloud provisioning (seed 004 §III-A, §III-B): how cloud sites grow and shrink.
//!
//! A cloud site ([`crate::model::SiteKind::Cloud`]) is a virtual cluster of leased VMs, each
//! with `vm_processors` processors, between `min_vms` and `max_vms` of them, each usable
//! `lease_latency` after it is asked for, and billed per started hour at the site's price
//! (0 for a private cloud). The scheduler asks for VMs and gives them back with commands
//! ([`crate::scheduler::Command::LeaseVm`], [`crate::scheduler::Command::ReleaseVm`]); the
//! driver carries them out and reports back ([`crate::scheduler::Event::VmLeased`],
//! [`crate::scheduler::Event::LeaseFailed`], [`crate::scheduler::Event::VmReleased`]).
//!
//! - [`cloud`]: one cloud site's VMs, which launch runs on which VM, and the bill.
//! - [`on_demand`]: the On-Demand policy's lease and release decisions (seed 004 §III-B).
//!
//! With [`Provisioning::Static`] cloud sites are fixed pools of `max_vms` VMs, leased before
//! the scheduler starts and never released (what the scheduler did before provisioning
//! existed; nothing is billed).

pub mod cloud;
pub mod on_demand;

pub use cloud::{billed_hours, Bill, CloudState, Vm, VmId, VmPhase};
pub use on_demand::OnDemandParams;

/// How cloud sites are provisioned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Provisioning {
    /// Every cloud site is a fixed pool of `max_vms` VMs; no commands, no bill.
    Static,
    /// On-Demand (seed 004 §III-B).
    OnDemand(OnDemandParams),
}

impl Default for Provisioning {
    fn default() -> Self {
        Provisioning::OnDemand(OnDemandParams::default())
    }
}

impl Provisioning {
    pub const NAMES: &'static [&'static str] = &["on-demand", "static"];

    /// The policy by name, with default parameters.
    pub fn from_name(name: &str) -> Result<Provisioning, String> {
        match name.to_ascii_lowercase().as_str() {
            "on-demand" | "od" => Ok(Provisioning::default()),
            "static" => Ok(Provisioning::Static),
            _ => Err(format!(
                "unknown provisioning policy `{name}` (expected one of: {})",
                Self::NAMES.join(", ")
            )),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Provisioning::Static => "static",
            Provisioning::OnDemand(_) => "on-demand",
        }
    }
}
