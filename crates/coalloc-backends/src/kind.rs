//! Which resource manager a site runs and how its backend is made: [`BackendKind`] (read
//! from a site's `manager` table by [`backend_of`], for the server's configuration and a
//! site agent's alike), [`backend_for`], and the [`name_tag`] a backend puts in its launches'
//! names. Here rather than in the server (issue 30 item 3) so that both the server and a
//! site agent make a site's backend the same way without the agent importing the server.

mod manager;

pub use manager::{backend_of, PROVIDER_KEYS};

use crate::gridengine::{GridEngineCell, GridEngineConfig};
use crate::local::{BackgroundLoad, LocalCluster, LocalConfig};
use crate::slurm::preempt::Preempt;
use crate::slurm::{Launch, SlurmCluster, SlurmConfig};
use crate::Backend;
use coalloc_core::model::Millis;
use coalloc_core::scheduler::reserve::may_reserve;
use std::sync::Arc;
use std::time::Duration;

/// How a site's components are run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendKind {
    /// Processor slots on this machine (coalloc-backends' local backend).
    Local {
        /// Slots held by simulated other users: a background load, in slots (0: none).
        background: u32,
        /// A varying background load instead: every `period` ms the held slots are drawn
        /// again on `[background, max]` (`background_max`, `background_period`).
        varying: Option<(u32, Millis)>,
    },
    /// An independent Slurm cluster, by its slurm.conf or its `-M` name.
    Slurm {
        conf: Option<String>,
        cluster: Option<String>,
        partition: Option<String>,
        /// `batch` (sbatch) or `allocation` (salloc + srun).
        launch: Launch,
        /// The local jobs GP may preempt (`preempt_partition`, `preempt_qos`,
        /// `preempt_action = "requeue" | "cancel"`).
        preempt: Option<Preempt>,
    },
    /// A site reached through its agent (`coalloc agent` on its login node), which runs the
    /// site's own backend there.
    Agent {
        /// How long the agent's link may be down before the site counts as failed.
        grace: Millis,
    },
    /// A Grid Engine cell; its name tag is the server's to set.
    GridEngine(GridEngineConfig),
}

/// Where and how a site's backend runs (the server's host, or an agent's).
pub struct BackendParts {
    /// The site's place in its configuration (seeds its background load).
    pub index: usize,
    /// The local backend's launch directories.
    pub work_dir: std::path::PathBuf,
    pub launcher: Option<crate::local::LauncherCommand>,
    /// A cloud site provisioned on demand: no processors until VMs are leased.
    pub cloud_on_demand: bool,
    /// The tag in the names of the launches (Slurm job names).
    pub name_tag: String,
}

/// The backend of one site that runs its resource manager's commands itself.
pub fn backend_for(
    site: &coalloc_core::model::Site,
    kind: &BackendKind,
    parts: BackendParts,
) -> Result<Arc<dyn Backend>, String> {
    match kind {
        BackendKind::Local {
            background,
            varying,
        } => {
            let c = LocalCluster::new(LocalConfig {
                name: site.name.clone(),
                slots: site.processors,
                initial_slots: parts.cloud_on_demand.then_some(0),
                work_dir: parts.work_dir,
                background: varying.map(|(max, period)| BackgroundLoad {
                    min: *background,
                    max,
                    period: Duration::from_millis(period as u64),
                    seed: parts.index as u64,
                }),
                launcher: parts.launcher,
            })
            .map_err(|e| e.to_string())?;
            if *background > 0 && varying.is_none() {
                c.set_background_slots(*background);
            }
            Ok(Arc::new(c))
        }
        BackendKind::Slurm {
            conf,
            cluster,
            partition,
            launch,
            preempt,
        } => {
            let mut c = SlurmConfig::new(site.name.clone());
            c.launch = *launch;
            c.slurm_conf = conf.as_ref().map(Into::into);
            c.cluster = cluster.clone();
            c.partition = partition.clone();
            c.preempt = preempt.clone();
            c.name_tag = Some(parts.name_tag);
            c.reserve = may_reserve(site);
            Ok(Arc::new(SlurmCluster::new(c)))
        }
        BackendKind::GridEngine(c) => {
            let mut c = c.clone();
            c.name_tag = Some(parts.name_tag);
            c.reserve = may_reserve(site);
            Ok(Arc::new(GridEngineCell::new(c)))
        }
        BackendKind::Agent { .. } => Err("an agent site runs no resource manager here".into()),
    }
}

/// The tag of the launches a backend run from state directory `root` makes, in their names
/// at a resource manager (Slurm job names, `coalloc-{tag}-J…`): eight hex digits of a hash
/// (64-bit FNV-1a) of this machine's host name and the directory's absolute path. The same
/// across restarts on the same directory; different for two servers (or agents) of one user
/// (other directories or hosts), whose launch numbers coincide.
pub fn name_tag(root: &std::path::Path) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let path = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = host
        .trim()
        .as_bytes()
        .iter()
        .chain(b"\0")
        .chain(path.as_os_str().as_encoded_bytes());
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x}", hash as u32)
}
