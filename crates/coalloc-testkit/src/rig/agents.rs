//! The agent rig of scripts/agents/ (sites in network namespaces of their own, two of them
//! real Slurm clusters with their own munge keys, one with a compute side that cannot reach
//! the server), found through `COALLOC_AGENT_RIG` (up.sh's BASE). Unset, a test prints
//! "skipped" and passes, unless `COALLOC_REQUIRE_AGENTS=1`, when it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

static LOCK: Mutex<()> = Mutex::new(());

/// One site of `sites.tsv`.
#[derive(Debug, Clone)]
pub struct RigSite {
    pub name: String,
    pub netns: String,
    pub kind: String,
    pub slurm_conf: Option<PathBuf>,
    pub login_addr: String,
    /// The login node's address as the compute side reaches it (the agent's relay).
    pub compute_addr: String,
    pub compute_netns: Option<String>,
}

/// The rig, held by one test at a time; dropped, every link is up again and every Slurm
/// job cancelled.
pub struct AgentRig {
    pub base: PathBuf,
    pub sites: Vec<RigSite>,
    _lock: MutexGuard<'static, ()>,
}

impl AgentRig {
    /// The rig, locked for this test; `None` (skipped) when it is not configured.
    pub fn begin(test: &str) -> Option<AgentRig> {
        let Some(base) = std::env::var_os("COALLOC_AGENT_RIG") else {
            assert!(
                std::env::var_os("COALLOC_REQUIRE_AGENTS").is_none(),
                "{test}: COALLOC_REQUIRE_AGENTS is set but COALLOC_AGENT_RIG is not"
            );
            eprintln!("{test}: skipped (COALLOC_AGENT_RIG is unset; see scripts/agents/README.md)");
            return None;
        };
        let lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let base = PathBuf::from(base);
        let text = std::fs::read_to_string(base.join("sites.tsv"))
            .unwrap_or_else(|e| panic!("{test}: {}: {e}", base.join("sites.tsv").display()));
        let opt = |s: &str| (s != "-").then(|| s.to_string());
        let sites = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                RigSite {
                    name: f[0].into(),
                    netns: f[1].into(),
                    kind: f[2].into(),
                    slurm_conf: opt(f[3]).map(PathBuf::from),
                    login_addr: f[4].into(),
                    compute_addr: f[5].into(),
                    compute_netns: opt(f[6]),
                }
            })
            .collect();
        let rig = AgentRig {
            base,
            sites,
            _lock: lock,
        };
        for s in rig.sites.iter().filter(|s| s.slurm_conf.is_some()) {
            rig.cancel_all(&s.name);
        }
        Some(rig)
    }

    pub fn site(&self, name: &str) -> &RigSite {
        self.sites.iter().find(|s| s.name == name).unwrap()
    }

    /// The server's address on the bridge (the root namespace's side).
    pub fn server_addr(&self) -> String {
        let a = &self.sites[0].login_addr;
        format!("{}.1", a.rsplit_once('.').unwrap().0)
    }

    /// Run a command inside a namespace.
    pub fn exec(netns: &str, program: &str, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", netns, program])
            .args(args)
            .output()
            .unwrap()
    }

    /// A Slurm command of site `name`, in its namespace.
    pub fn slurm(&self, name: &str, program: &str, args: &[&str]) -> String {
        let s = self.site(name);
        let out = Command::new("ip")
            .args(["netns", "exec", &s.netns, "env"])
            .arg(format!(
                "SLURM_CONF={}",
                s.slurm_conf.as_ref().unwrap().display()
            ))
            .arg(program)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Slurm job ids queued or running at site `name`.
    pub fn active_jobs(&self, name: &str) -> Vec<String> {
        self.slurm(name, "squeue", &["-h", "-t", "PD,R,CG,CF", "-o", "%i"])
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    pub fn cancel_all(&self, name: &str) {
        let _ = self.slurm(name, "scancel", &["--user=root"]);
    }

    /// Take site `name`'s link to the bridge down, or up again.
    pub fn link(&self, name: &str, up: bool) {
        let i = self.sites.iter().position(|s| s.name == name).unwrap() + 1;
        let prefix = self.sites[0].netns.trim_end_matches("-site1");
        let dev = format!("{prefix}-s{i}-h");
        let st = Command::new("ip")
            .args(["link", "set", &dev, if up { "up" } else { "down" }])
            .status()
            .unwrap();
        assert!(st.success(), "ip link set {dev}");
    }

    pub fn base(&self) -> &Path {
        &self.base
    }
}

impl Drop for AgentRig {
    fn drop(&mut self) {
        for i in 0..self.sites.len() {
            let name = self.sites[i].name.clone();
            self.link(&name, true);
            if self.sites[i].slurm_conf.is_some() {
                self.cancel_all(&name);
            }
        }
    }
}
