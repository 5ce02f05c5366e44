//! Sites: the clusters and clouds components run on (seed 004 §III-A).

use super::Millis;
use std::collections::BTreeMap;
use std::fmt;

/// A cluster has fixed capacity and its own resource manager; a cloud leases VMs.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum SiteKind {
    #[default]
    Cluster,
    Cloud,
}

impl SiteKind {
    pub fn name(self) -> &'static str {
        match self {
            SiteKind::Cluster => "cluster",
            SiteKind::Cloud => "cloud",
        }
    }

    pub fn from_name(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "cluster" => Ok(SiteKind::Cluster),
            "cloud" => Ok(SiteKind::Cloud),
            _ => Err(format!(
                "unknown site kind `{s}` (expected one of: cluster, cloud)"
            )),
        }
    }
}

impl fmt::Display for SiteKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Limits and price of a cloud site (seed 004 §III-A, §III-B).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct CloudLimits {
    /// Processors per leased VM.
    pub vm_processors: u32,
    /// VMs kept leased at all times.
    pub min_vms: u32,
    /// VMs leased at most.
    pub max_vms: u32,
    /// Time from a lease request to a usable VM.
    pub lease_latency: Millis,
    /// Price per VM-hour in millionths of a dollar (0 for a private cloud).
    pub price_micros_per_vm_hour: u64,
}

/// A place components run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct Site {
    /// Unique name; ordered jobs name it.
    pub name: String,
    pub kind: SiteKind,
    /// Processors in all (for a cloud: at most `max_vms * vm_processors`).
    pub processors: u32,
    /// Idle processors now, for dry runs; a live driver reports this instead.
    pub idle: Option<u32>,
    /// Resource-manager settings, verbatim (`type` selects the backend).
    pub manager: BTreeMap<String, String>,
    /// Bandwidth to other sites, bytes per second (seed 000 §2.6's transfer estimates).
    pub bandwidth: BTreeMap<String, u64>,
    /// Logical files that have a replica here (seed 000 §2.3's replica catalog).
    pub files: Vec<String>,
    /// Present for cloud sites.
    pub cloud: Option<CloudLimits>,
}

impl Site {
    /// A cluster of `processors` processors with nothing else set.
    pub fn cluster(name: impl Into<String>, processors: u32) -> Site {
        Site {
            name: name.into(),
            processors,
            ..Site::default()
        }
    }

    /// A cloud site with these limits; its processors are `max_vms * vm_processors`.
    pub fn cloud(name: impl Into<String>, limits: CloudLimits) -> Site {
        Site {
            name: name.into(),
            kind: SiteKind::Cloud,
            processors: limits.max_vms.saturating_mul(limits.vm_processors),
            cloud: Some(limits),
            ..Site::default()
        }
    }
}

/// A named set of sites — a *subsystem* (seed 004 §III-A: "the KOALA-C resource manager can
/// configure this set into multiple subsets of sites"). Subsystems may share sites.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct Subsystem {
    pub name: String,
    /// Indexes into the site list, in the order given.
    pub sites: Vec<usize>,
}
