//! The state directory (like HyperQueue's server directory): everything a server keeps and
//! everything a client needs to find it.
//!
//! ```text
//! DIR/journal.sqlite      the journal (and its -wal, -shm files)
//! DIR/token               the API's bearer token, mode 0600, made on first start
//! DIR/server.json         {"url": ..., "pid": ...} while the server runs
//! DIR/logs/result.jsonl   one record per finished job (seed 003 appendix A.5)
//! DIR/logs/surveillance.jsonl  per-site load samples
//! DIR/sites/NAME/         the local backend's launch directories
//! DIR/output/JOB/         standard output and error of each component's launches
//! ```

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The paths of one state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    pub root: PathBuf,
}

impl StateDir {
    /// Create the directory (and its subdirectories) if needed.
    pub fn create(root: &Path) -> std::io::Result<StateDir> {
        for sub in ["logs", "sites", "output"] {
            std::fs::create_dir_all(root.join(sub))?;
        }
        Ok(StateDir {
            root: root.to_path_buf(),
        })
    }

    pub fn journal(&self) -> PathBuf {
        self.root.join("journal.sqlite")
    }
    pub fn token_file(&self) -> PathBuf {
        self.root.join("token")
    }
    pub fn server_file(&self) -> PathBuf {
        self.root.join("server.json")
    }
    pub fn result_log(&self) -> PathBuf {
        self.root.join("logs/result.jsonl")
    }
    pub fn surveillance_log(&self) -> PathBuf {
        self.root.join("logs/surveillance.jsonl")
    }
    pub fn site_dir(&self, site: &str) -> PathBuf {
        self.root.join("sites").join(site)
    }
    /// Standard output and error of one launch of one component.
    pub fn output(&self, job: u64, component: usize, launch: u64) -> (PathBuf, PathBuf) {
        let dir = self.root.join("output").join(job.to_string());
        (
            dir.join(format!("{component}.L{launch}.out")),
            dir.join(format!("{component}.L{launch}.err")),
        )
    }

    /// The API token: read it, or make a new one (mode 0600) on first start.
    pub fn token(&self) -> std::io::Result<String> {
        let path = self.token_file();
        if let Ok(t) = std::fs::read_to_string(&path) {
            let t = t.trim().to_string();
            if !t.is_empty() {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
                return Ok(t);
            }
        }
        let token = random_hex(32)?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)?;
        writeln!(f, "{token}")?;
        Ok(token)
    }
}

/// `n` random bytes from the operating system, in hex.
pub fn random_hex(n: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut buf = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}
