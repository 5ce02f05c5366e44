//! Carrying out the core's provisioning decisions (seed 004 §III-B): a `LeaseVm` goes to the
//! site's provider, whose answer comes back as `VmLeased` or `LeaseFailed`; a `ReleaseVm`
//! gives the VM back and comes back as `VmReleased`. A leased VM adds its processors to the
//! site's backend, a released one takes them away: on replay too, so that a restarted server
//! has the cloud sites it had. Leases and releases that were under way when the server
//! stopped are asked for again after the replay.

use super::Driver;
use crate::entry::Entry;
use crate::views::CloudView;
use serde_json::json;

/// Where one VM is.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct VmInfo {
    pub site: usize,
    /// The provider's name for it, once leased.
    pub node: Option<String>,
    pub releasing: bool,
}

impl Driver {
    pub(super) fn vm_processors(&self, site: usize) -> i64 {
        self.config.sites[site]
            .cloud
            .as_ref()
            .map_or(0, |c| i64::from(c.vm_processors))
    }

    pub(crate) fn lease_vm(&mut self, site: usize, vm: u64) {
        self.vms.insert(
            vm,
            VmInfo {
                site,
                node: None,
                releasing: false,
            },
        );
        if !self.replaying {
            self.workers[site].lease(vm);
            self.emit(
                json!({"event": "vm_requested", "site": self.config.sites[site].name, "vm": vm}),
            );
        }
    }

    pub(crate) fn release_vm(&mut self, site: usize, vm: u64) {
        let node = match self.vms.get_mut(&vm) {
            Some(v) => {
                v.releasing = true;
                v.node.clone().unwrap_or_default()
            }
            None => return,
        };
        if !self.replaying {
            self.workers[site].release(vm, node);
        }
    }

    /// The backend side of a VM entry the core accepted.
    pub(crate) fn vm_effect(&mut self, e: &Entry) {
        match e {
            Entry::VmLeased { site, vm, node } => {
                self.backends[*site].resize(self.vm_processors(*site));
                self.vms.insert(
                    *vm,
                    VmInfo {
                        site: *site,
                        node: Some(node.clone()),
                        releasing: false,
                    },
                );
                self.emit(json!({"event": "vm_leased", "site": self.config.sites[*site].name, "vm": vm, "node": node}));
            }
            Entry::VmReleased { site, vm } => {
                self.backends[*site].resize(-self.vm_processors(*site));
                self.vms.remove(vm);
                self.emit(json!({"event": "vm_released", "site": self.config.sites[*site].name, "vm": vm}));
            }
            Entry::LeaseFailed { vm, .. } => {
                self.vms.remove(vm);
            }
            _ => {}
        }
    }

    /// A provider's answer to a lease.
    pub(crate) fn leased(&mut self, site: usize, vm: u64, result: Result<String, String>) {
        let e = match result {
            Ok(node) => Entry::VmLeased { site, vm, node },
            Err(reason) => {
                tracing::warn!(site, vm, "lease failed: {reason}");
                Entry::LeaseFailed { site, vm, reason }
            }
        };
        if let Err(r) = self.apply(e) {
            tracing::warn!(site, vm, "the core refused a lease report: {r}");
        }
    }

    pub(crate) fn released(&mut self, site: usize, vm: u64) {
        if let Err(r) = self.apply(Entry::VmReleased { site, vm }) {
            tracing::warn!(site, vm, "the core refused a release report: {r}");
        }
    }

    /// After a replay: ask again for what was under way.
    pub(crate) fn resume_vms(&mut self) {
        let open: Vec<(u64, VmInfo)> = self.vms.iter().map(|(k, v)| (*k, v.clone())).collect();
        for (vm, v) in open {
            match (&v.node, v.releasing) {
                (None, _) => self.workers[v.site].lease(vm),
                (Some(node), true) => self.workers[v.site].release(vm, node.clone()),
                (Some(_), false) => {}
            }
        }
    }

    /// A cloud site's VMs and bill, for the sites view.
    pub(crate) fn cloud_view(&self, site: usize) -> Option<CloudView> {
        let c = self.core.cloud(site)?;
        let bill = c.bill_until(self.now);
        Some(CloudView {
            vms: c.live(),
            capacity: c.capacity(),
            leases: c.leases,
            lease_failures: c.lease_failures,
            peak_vms: c.peak_vms,
            vm_hours: bill.vm_hours,
            cost: bill.dollars(),
            price_per_vm_hour: c.limits.price_micros_per_vm_hour as f64 / 1e6,
            nodes: self
                .vms
                .values()
                .filter(|v| v.site == site)
                .filter_map(|v| v.node.clone())
                .collect(),
        })
    }
}
