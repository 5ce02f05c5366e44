//! The site list: `[[site]]` tables in a SITES.toml file or in the server's configuration.
//!
//! ```toml
//! [[site]]
//! name = "fs0"
//! processors = 144
//! idle = 100                          # dry runs only: idle processors now
//! manager = { type = "slurm", slurm_conf = "/tmp/slurm-clusters/alpha/slurm.conf" }
//! bandwidth = { fs1 = "100MB" }       # bytes per second to other sites (seed 000 §2.6)
//! files = ["poisson-grid.dat"]        # logical files with a replica here (seed 000 §2.3)
//!
//! [[site]]
//! name = "ec2"
//! kind = "cloud"                      # seed 004 §III-A
//! cloud = { vm_processors = 1, min_vms = 0, max_vms = 128, lease_latency = "2m", price_per_vm_hour = 0.065 }
//! ```

use super::native::toml_doc;
use super::units::{parse_duration, parse_size, Scalar};
use crate::error::SpecError;
use crate::model::{CloudLimits, Site, SiteKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A file that holds only a site list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SitesDoc {
    #[serde(default)]
    pub site: Vec<SiteDoc>,
}

/// One `[[site]]` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteDoc {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Required for clusters; for clouds it defaults to `max_vms * vm_processors`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processors: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<i64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub manager: BTreeMap<String, Scalar>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bandwidth: BTreeMap<String, Scalar>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud: Option<CloudDoc>,
}

/// A cloud site's `cloud = { ... }`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloudDoc {
    pub vm_processors: i64,
    #[serde(default)]
    pub min_vms: i64,
    pub max_vms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_latency: Option<Scalar>,
    /// Dollars per VM-hour (0 for a private cloud).
    #[serde(default)]
    pub price_per_vm_hour: f64,
}

/// Read a SITES.toml text.
pub fn parse_sites(text: &str) -> Result<Vec<Site>, SpecError> {
    sites_from_docs(&toml_doc::<SitesDoc>(text)?.site)
}

fn count(field: String, v: i64, min: i64) -> Result<u32, SpecError> {
    if v < min {
        return Err(SpecError::invalid(
            field,
            format!("must be at least {min} (got {v})"),
        ));
    }
    u32::try_from(v).map_err(|_| SpecError::invalid(field, format!("is too large ({v})")))
}

/// Check a site list: names unique and non-empty, sizes sane, bandwidth targets known.
pub fn sites_from_docs(docs: &[SiteDoc]) -> Result<Vec<Site>, SpecError> {
    if docs.is_empty() {
        return Err(SpecError::invalid(
            "site",
            "the site list is empty: add a [[site]] table",
        ));
    }
    let mut sites = Vec::with_capacity(docs.len());
    for (i, d) in docs.iter().enumerate() {
        let f = |name: &str| format!("site[{i}].{name}");
        if d.name.trim().is_empty() {
            return Err(SpecError::invalid(f("name"), "must not be empty"));
        }
        if let Some(j) = docs[..i].iter().position(|o| o.name == d.name) {
            return Err(SpecError::invalid(
                f("name"),
                format!("duplicate site name `{}` (site[{j}] has it too)", d.name),
            ));
        }
        let kind = match &d.kind {
            Some(k) => SiteKind::from_name(k).map_err(|r| SpecError::invalid(f("kind"), r))?,
            None if d.cloud.is_some() => SiteKind::Cloud,
            None => SiteKind::Cluster,
        };
        let cloud = match (&d.cloud, kind) {
            (Some(c), SiteKind::Cloud) => Some(cloud_limits(c, &f)?),
            (None, SiteKind::Cloud) => {
                return Err(SpecError::invalid(
                    f("cloud"),
                    "a cloud site needs `cloud = { vm_processors = .., max_vms = .. }`",
                ))
            }
            (Some(_), SiteKind::Cluster) => {
                return Err(SpecError::invalid(
                    f("cloud"),
                    "only cloud sites have cloud limits",
                ))
            }
            (None, SiteKind::Cluster) => None,
        };
        let most = cloud
            .as_ref()
            .map(|c| u64::from(c.max_vms) * u64::from(c.vm_processors));
        let processors = match (d.processors, most) {
            (Some(p), Some(m)) if p as u64 > m => {
                return Err(SpecError::invalid(
                    f("processors"),
                    format!("is more than max_vms * vm_processors ({p} > {m})"),
                ))
            }
            (Some(p), _) => count(f("processors"), p, 1)?,
            (None, Some(m)) => {
                u32::try_from(m).map_err(|_| SpecError::invalid(f("processors"), "is too large"))?
            }
            (None, None) => {
                return Err(SpecError::invalid(
                    f("processors"),
                    "is required for a cluster",
                ))
            }
        };
        let idle = d.idle.map(|v| count(f("idle"), v, 0)).transpose()?;
        if let Some(idle) = idle {
            if idle > processors {
                return Err(SpecError::invalid(
                    f("idle"),
                    format!("is more than the site's processors ({idle} > {processors})"),
                ));
            }
        }
        let mut bandwidth = BTreeMap::new();
        for (to, v) in &d.bandwidth {
            if !docs.iter().any(|o| &o.name == to) {
                return Err(SpecError::invalid(
                    f(&format!("bandwidth.{to}")),
                    format!("names no site in the list (`{to}`)"),
                ));
            }
            let bps =
                parse_size(v).map_err(|r| SpecError::invalid(f(&format!("bandwidth.{to}")), r))?;
            bandwidth.insert(to.clone(), bps);
        }
        for key in ["reserve_ahead", "start_delay"] {
            if let Some(v) = d.manager.get(key) {
                parse_duration(v)
                    .map_err(|r| SpecError::invalid(f(&format!("manager.{key}")), r))?;
            }
        }
        sites.push(Site {
            name: d.name.clone(),
            kind,
            processors,
            idle,
            manager: d
                .manager
                .iter()
                .map(|(k, v)| (k.clone(), v.to_text()))
                .collect(),
            bandwidth,
            files: d.files.clone(),
            cloud,
        });
    }
    Ok(sites)
}

fn cloud_limits(c: &CloudDoc, f: &dyn Fn(&str) -> String) -> Result<CloudLimits, SpecError> {
    let vm_processors = count(f("cloud.vm_processors"), c.vm_processors, 1)?;
    let min_vms = count(f("cloud.min_vms"), c.min_vms, 0)?;
    let max_vms = count(f("cloud.max_vms"), c.max_vms, 0)?;
    if min_vms > max_vms {
        return Err(SpecError::invalid(
            f("cloud.min_vms"),
            format!("is more than max_vms ({min_vms} > {max_vms})"),
        ));
    }
    let lease_latency = c
        .lease_latency
        .as_ref()
        .map(parse_duration)
        .transpose()
        .map_err(|r| SpecError::invalid(f("cloud.lease_latency"), r))?
        .unwrap_or(0);
    if !(c.price_per_vm_hour.is_finite() && c.price_per_vm_hour >= 0.0) {
        return Err(SpecError::invalid(
            f("cloud.price_per_vm_hour"),
            format!(
                "must be a price of zero or more (got {})",
                c.price_per_vm_hour
            ),
        ));
    }
    Ok(CloudLimits {
        vm_processors,
        min_vms,
        max_vms,
        lease_latency,
        price_micros_per_vm_hour: (c.price_per_vm_hour * 1e6).round() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_clusters_and_clouds() {
        let sites = parse_sites(
            r#"
[[site]]
name = "fs0"
processors = 144
idle = 100
bandwidth = { ec2 = "100MB" }
files = ["grid.dat"]
[[site]]
name = "ec2"
cloud = { vm_processors = 2, max_vms = 64, lease_latency = "2m", price_per_vm_hour = 0.065 }
"#,
        )
        .unwrap();
        assert_eq!(sites[0].processors, 144);
        assert_eq!(sites[0].idle, Some(100));
        assert_eq!(sites[0].bandwidth["ec2"], 100_000_000);
        assert_eq!(sites[1].kind, SiteKind::Cloud);
        assert_eq!(sites[1].processors, 128);
        let c = sites[1].cloud.as_ref().unwrap();
        assert_eq!(
            (c.lease_latency, c.price_micros_per_vm_hour),
            (120_000, 65_000)
        );
    }

    #[test]
    fn rejects_bad_site_lists() {
        let err = |t: &str| parse_sites(t).unwrap_err().to_string();
        assert_eq!(
            err("[[site]]\nname='a'\nprocessors=4\n[[site]]\nname='a'\nprocessors=2\n"),
            "site[1].name: duplicate site name `a` (site[0] has it too)"
        );
        assert_eq!(
            err("[[site]]\nname='a'\nprocessors=4\nidle=5\n"),
            "site[0].idle: is more than the site's processors (5 > 4)"
        );
        assert_eq!(
            err("[[site]]\nname='a'\n"),
            "site[0].processors: is required for a cluster"
        );
        assert_eq!(
            err(""),
            "site: the site list is empty: add a [[site]] table"
        );
        assert!(
            err("[[site]]\nname='a'\nprocesors=4\n").starts_with("3:1: unknown field `procesors`")
        );
    }
}
