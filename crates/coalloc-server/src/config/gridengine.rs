//! `manager = { type = "gridengine", ... }`: a site that is one Grid Engine cell
//! (coalloc_backends::gridengine). The cell is named by its `settings` file (the cell's
//! `$SGE_ROOT/$SGE_CELL/common/settings.sh`) or by `sge_root` and `cell`, with optional
//! `qmaster_port` and `execd_port` (else the settings file's, or the environment's);
//! `queue` restricts submissions and the load to one cluster queue; `pe` is the parallel
//! environment of components of more than one slot (required for them).

use super::{BackendKind, PROVIDER_KEYS};
use coalloc_backends::gridengine::GridEngineConfig;
use coalloc_core::model::Site;
use coalloc_core::SpecError;

/// The keys of a Grid Engine site's `manager` table (besides the provider's).
pub(super) const KEYS: &[&str] = &[
    "type",
    "settings",
    "sge_root",
    "cell",
    "qmaster_port",
    "execd_port",
    "queue",
    "pe",
];

/// Whether `key` belongs in a Grid Engine site's `manager` table.
pub(super) fn known(key: &str) -> bool {
    KEYS.contains(&key) || PROVIDER_KEYS.contains(&key)
}

pub(super) fn backend(site: &Site) -> Result<BackendKind, SpecError> {
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
    use crate::config::{BackendKind, ServerConfig};

    fn parse(manager: &str) -> Result<BackendKind, String> {
        ServerConfig::parse(&format!(
            "[[site]]\nname = \"g\"\nprocessors = 8\nmanager = {{ type = \"gridengine\"{manager} }}\n"
        ))
        .map(|c| c.backends[0].clone())
        .map_err(|e| e.to_string())
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
