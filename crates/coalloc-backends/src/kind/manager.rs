//! A site's `manager` table read into its [`BackendKind`] ([`backend_of`]): `type` (local,
//! slurm, gridengine, agent) and the keys each type knows, every mistake named by its field.
//! Here beside [`backend_for`](super::backend_for) so that the server's configuration and a
//! site agent's read a site the same way without the agent importing the server.
//!
//! A Grid Engine site (coalloc_backends::gridengine) is named by its `settings` file (the
//! cell's `$SGE_ROOT/$SGE_CELL/common/settings.sh`) or by `sge_root` and `cell`, with
//! optional `qmaster_port` and `execd_port` (else the settings file's, or the environment's);
//! `queue` restricts submissions and the load to one cluster queue; `pe` is the parallel
//! environment of components of more than one slot (required for them).
//!
//! `reserve = true` on a Slurm or Grid Engine site says that coalloc's user there may make
//! advance reservations (a Slurm operator, a Grid Engine `arusers` member; issue 31): the
//! core reads it to choose sites for reserving jobs, the backend to answer `may_reserve`.

use super::BackendKind;
use crate::gridengine::GridEngineConfig;
use crate::slurm::preempt::Preempt;
use crate::slurm::Launch;
use coalloc_core::model::Site;
use coalloc_core::spec::units::{parse_duration, Scalar};
use coalloc_core::SpecError;

/// The keys of a cloud site's VM provider in its `manager` table (the server reads them).
pub const PROVIDER_KEYS: &[&str] = &[
    "provider",
    "lease_program",
    "release_program",
    "provider_timeout",
];

/// The keys of a Grid Engine site's `manager` table (besides the provider's).
const GRIDENGINE_KEYS: &[&str] = &[
    "type",
    "settings",
    "sge_root",
    "cell",
    "qmaster_port",
    "execd_port",
    "queue",
    "pe",
    "reserve",
    "reserve_ahead",
    "start_delay",
];

/// The backend a site's `manager` table names.
pub fn backend_of(site: &Site) -> Result<BackendKind, SpecError> {
    let field = |k: &str| format!("site `{}`: manager.{k}", site.name);
    let get = |k: &str| site.manager.get(k).cloned();
    let known: &[&str] = match get("type").as_deref().unwrap_or("local") {
        "local" => &[
            "type",
            "reserve",
            "reserve_ahead",
            "start_delay",
            "background",
            "background_max",
            "background_period",
            "provider",
            "lease_program",
            "release_program",
            "provider_timeout",
        ],
        "slurm" => &[
            "type",
            "slurm_conf",
            "cluster",
            "partition",
            "launch",
            "preempt_partition",
            "preempt_qos",
            "preempt_action",
            "reserve",
            "reserve_ahead",
            "start_delay",
            "provider",
            "lease_program",
            "release_program",
            "provider_timeout",
        ],
        "agent" => &["type", "grace", "reserve", "reserve_ahead", "start_delay"],
        "gridengine" => {
            let known = |k: &str| GRIDENGINE_KEYS.contains(&k) || PROVIDER_KEYS.contains(&k);
            if let Some(k) = site.manager.keys().find(|k| !known(k)) {
                return Err(SpecError::invalid(
                    field(k),
                    format!("unknown key (known: {})", GRIDENGINE_KEYS.join(", ")),
                ));
            }
            return gridengine(site);
        }
        other => {
            return Err(SpecError::invalid(
                field("type"),
                format!("unknown backend `{other}` (known: local, slurm, gridengine, agent)"),
            ))
        }
    };
    if let Some(k) = site.manager.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(SpecError::invalid(
            field(k),
            format!("unknown key (known: {})", known.join(", ")),
        ));
    }
    Ok(match get("type").as_deref().unwrap_or("local") {
        "agent" => BackendKind::Agent {
            grace: match get("grace") {
                None => 30_000,
                Some(g) => parse_duration(&Scalar::Str(g))
                    .map_err(|r| SpecError::invalid(field("grace"), r))?,
            },
        },
        "slurm" => {
            let (conf, cluster) = (get("slurm_conf"), get("cluster"));
            if conf.is_none() && cluster.is_none() {
                return Err(SpecError::invalid(
                    field("slurm_conf"),
                    "a Slurm site needs `slurm_conf` (its slurm.conf) or `cluster` (its -M name)",
                ));
            }
            let launch = match get("launch") {
                None => Launch::default(),
                Some(word) => Launch::from_name(&word).ok_or_else(|| {
                    SpecError::invalid(
                        field("launch"),
                        format!(
                            "unknown launch `{word}` (known: {})",
                            Launch::NAMES.join(", ")
                        ),
                    )
                })?,
            };
            let (partition, qos) = (get("preempt_partition"), get("preempt_qos"));
            let requeue = match get("preempt_action").as_deref() {
                None | Some("requeue") => true,
                Some("cancel") => false,
                Some(other) => {
                    return Err(SpecError::invalid(
                        field("preempt_action"),
                        format!("unknown action `{other}` (known: requeue, cancel)"),
                    ))
                }
            };
            let preempt = (partition.is_some() || qos.is_some()).then_some(Preempt {
                partition,
                qos,
                requeue,
            });
            BackendKind::Slurm {
                conf,
                cluster,
                partition: get("partition"),
                launch,
                preempt,
            }
        }
        _ => {
            let background = match get("background") {
                None => 0,
                Some(v) => v.parse::<u32>().map_err(|_| {
                    SpecError::invalid(field("background"), "must be a whole number of slots")
                })?,
            };
            if background > site.processors {
                return Err(SpecError::invalid(
                    field("background"),
                    format!("is more than the site's {} processors", site.processors),
                ));
            }
            let varying = match get("background_max") {
                None => None,
                Some(v) => {
                    let max = v.parse::<u32>().ok().filter(|m| *m >= background && *m <= site.processors).ok_or_else(|| {
                        SpecError::invalid(
                            field("background_max"),
                            format!("must be a whole number of slots between background and the site's {} processors", site.processors),
                        )
                    })?;
                    let period = get("background_period").unwrap_or_else(|| "30s".into());
                    let period = parse_duration(&Scalar::Str(period))
                        .ok()
                        .filter(|p| *p > 0)
                        .ok_or_else(|| {
                            SpecError::invalid(
                                field("background_period"),
                                "must be a duration such as \"30s\"",
                            )
                        })?;
                    Some((max, period))
                }
            };
            BackendKind::Local {
                background,
                varying,
            }
        }
    })
}

/// A Grid Engine site's backend (its keys checked by [`backend_of`]).
fn gridengine(site: &Site) -> Result<BackendKind, SpecError> {
    let field = |k: &str| format!("site `{}`: manager.{k}", site.name);
    let get = |k: &str| site.manager.get(k).cloned();
    let port = |k: &str| -> Result<Option<u16>, SpecError> {
        get(k)
            .map(|v| {
                v.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| SpecError::invalid(field(k), "must be a TCP port (1-65535)"))
            })
            .transpose()
    };
    let mut c = GridEngineConfig::new(site.name.clone());
    c.settings = get("settings").map(Into::into);
    c.sge_root = get("sge_root").map(Into::into);
    if c.settings.is_none() && c.sge_root.is_none() {
        return Err(SpecError::invalid(
            field("settings"),
            "a Grid Engine site needs `settings` (its cell's settings.sh) or `sge_root`",
        ));
    }
    c.cell = get("cell");
    c.qmaster_port = port("qmaster_port")?;
    c.execd_port = port("execd_port")?;
    c.queue = get("queue");
    c.pe = get("pe");
    for (k, v) in [("queue", &c.queue), ("pe", &c.pe), ("cell", &c.cell)] {
        if v.as_deref().is_some_and(|v| v.trim().is_empty()) {
            return Err(SpecError::invalid(field(k), "must not be empty"));
        }
    }
    Ok(BackendKind::GridEngine(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use coalloc_core::spec::sites::parse_sites;

    fn parse(manager: &str) -> Result<BackendKind, String> {
        let sites = parse_sites(&format!(
            "[[site]]\nname = \"g\"\nprocessors = 8\nmanager = {{ type = \"gridengine\"{manager} }}\n"
        ))
        .map_err(|e| e.to_string())?;
        backend_of(&sites[0]).map_err(|e| e.to_string())
    }

    #[test]
    fn a_grid_engine_site_is_read_with_every_key() {
        let b = parse(
            ", settings = \"/ge/delta/common/settings.sh\", queue = \"main.q\", pe = \"mpi\", \
             qmaster_port = 6960, execd_port = 6961, cell = \"delta\", sge_root = \"/ge\"",
        )
        .unwrap();
        let BackendKind::GridEngine(c) = b else {
            panic!("{b:?}")
        };
        assert_eq!(c.name, "g");
        assert_eq!(
            c.settings.as_deref(),
            Some(std::path::Path::new("/ge/delta/common/settings.sh"))
        );
        assert_eq!((c.qmaster_port, c.execd_port), (Some(6960), Some(6961)));
        assert_eq!(
            (c.queue.as_deref(), c.pe.as_deref(), c.cell.as_deref()),
            (Some("main.q"), Some("mpi"), Some("delta"))
        );
    }

    /// The core reads `start_delay` beside `reserve_ahead` (`scheduler::reserve`, checked
    /// as a duration by `parse_sites`): every kind of manager table takes both (the
    /// simulation harness's seeds with a `start_delay` found the server refusing them).
    #[test]
    fn every_manager_takes_the_reservation_keys() {
        for manager in [
            "type = \"local\"",
            "type = \"slurm\", slurm_conf = \"/s.conf\"",
            "type = \"gridengine\", sge_root = \"/ge\"",
            "type = \"agent\"",
        ] {
            let sites = parse_sites(&format!(
                "[[site]]\nname = \"s\"\nprocessors = 8\nmanager = {{ {manager}, reserve = true, \
                 reserve_ahead = \"1h\", start_delay = \"3s\" }}\n"
            ))
            .unwrap();
            assert!(backend_of(&sites[0]).is_ok(), "{manager}");
        }
    }

    #[test]
    fn the_reserve_setting_reaches_the_backend() {
        for (manager, want) in [
            (
                "type = \"gridengine\", sge_root = \"/ge\", reserve = true",
                true,
            ),
            ("type = \"gridengine\", sge_root = \"/ge\"", false),
            (
                "type = \"slurm\", slurm_conf = \"/s.conf\", reserve = true",
                true,
            ),
            (
                "type = \"slurm\", slurm_conf = \"/s.conf\", reserve = false",
                false,
            ),
        ] {
            let sites = parse_sites(&format!(
                "[[site]]\nname = \"s\"\nprocessors = 8\nmanager = {{ {manager} }}\n"
            ))
            .unwrap();
            let kind = backend_of(&sites[0]).unwrap();
            let parts = crate::kind::BackendParts {
                index: 0,
                work_dir: std::env::temp_dir(),
                launcher: None,
                cloud_on_demand: false,
                name_tag: "t".into(),
            };
            let b = crate::kind::backend_for(&sites[0], &kind, parts).unwrap();
            assert_eq!(b.may_reserve(), want, "{manager}");
        }
    }

    #[test]
    fn bad_grid_engine_sites_name_the_field() {
        for (manager, want) in [
            ("", "manager.settings"),
            (
                ", sge_root = \"/ge\", qmaster_port = 0",
                "manager.qmaster_port",
            ),
            (
                ", sge_root = \"/ge\", execd_port = \"x\"",
                "manager.execd_port",
            ),
            (", sge_root = \"/ge\", pe = \"\"", "manager.pe"),
            (
                ", sge_root = \"/ge\", slurm_conf = \"/s\"",
                "manager.slurm_conf",
            ),
        ] {
            let e = parse(manager).unwrap_err();
            assert!(e.contains(want), "{manager}: {e}");
        }
    }
}
