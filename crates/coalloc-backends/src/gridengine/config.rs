//! Where one Grid Engine cell is and how it is reached: [`GridEngineConfig`], and the cell's
//! `settings.sh` read into the environment of every command.

use std::path::PathBuf;
use std::time::Duration;

/// How long one Grid Engine command may take by default.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how to reach one Grid Engine cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GridEngineConfig {
    /// The site's name (for messages).
    pub name: String,
    /// A cell's `settings.sh` (`$SGE_ROOT/$SGE_CELL/common/settings.sh`): its `NAME=value`
    /// assignments of `SGE_ROOT`, `SGE_CELL`, `SGE_QMASTER_PORT`, `SGE_EXECD_PORT` and
    /// `SGE_CLUSTER_NAME` are read at every command; the fields below override them.
    pub settings: Option<PathBuf>,
    pub sge_root: Option<PathBuf>,
    pub cell: Option<String>,
    pub qmaster_port: Option<u16>,
    pub execd_port: Option<u16>,
    /// `-q QUEUE` for submissions, and the only queue whose slots `load` counts.
    pub queue: Option<String>,
    /// The parallel environment of components with more than one slot (`-pe PE COUNT`);
    /// without one, such components are rejected.
    pub pe: Option<String>,
    /// The longest any one command may run before it is killed.
    pub command_timeout: Duration,
    /// The directory holding the Grid Engine commands; `None` searches `PATH`.
    pub bin_dir: Option<PathBuf>,
    /// Put in every job name, as for Slurm ([`crate::slurm::script::name_of`]).
    pub name_tag: Option<String>,
    /// Whether coalloc may make advance reservations here (issue 31; the site's manager
    /// setting `reserve = true`, which says its user is a manager, an operator or in
    /// `arusers`): without it every reservation call is refused with the reason.
    pub reserve: bool,
}

impl GridEngineConfig {
    /// A configuration using the environment's cell, with the default timeout.
    pub fn new(name: impl Into<String>) -> GridEngineConfig {
        GridEngineConfig {
            name: name.into(),
            settings: None,
            sge_root: None,
            cell: None,
            qmaster_port: None,
            execd_port: None,
            queue: None,
            pe: None,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            bin_dir: None,
            name_tag: None,
            reserve: false,
        }
    }
}

/// The variables of a `settings.sh` that select a cell.
const SETTINGS: [&str; 5] = [
    "SGE_ROOT",
    "SGE_CELL",
    "SGE_QMASTER_PORT",
    "SGE_EXECD_PORT",
    "SGE_CLUSTER_NAME",
];

/// `NAME=value` assignments of `SETTINGS` in a `settings.sh` (`NAME=value; export NAME`
/// or `export NAME=value`, optionally quoted).
pub fn settings_env(text: &str) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for line in text.lines() {
        for part in line.split(';') {
            let part = part.trim();
            let part = part.strip_prefix("export ").unwrap_or(part).trim();
            let Some((name, value)) = part.split_once('=') else {
                continue;
            };
            if SETTINGS.contains(&name) {
                let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
                env.push((name.to_string(), value.to_string()));
            }
        }
    }
    env
}
