//! The state directory (like HyperQueue's server directory): everything a server keeps and
//! everything a client needs to find it.
//!
//! ```text
//! DIR/journal.sqlite      the journal (and its -wal, -shm files)
//! DIR/snapshot.bin       the state at a journal entry (driver::snapshot); the journal
//!                         keeps the entries after it
//!                         (neither file with `server.journal = "postgres://..."`: the
//!                         journal, snapshot and history are the database's tables)
//! DIR/token               the API's bearer token, mode 0600, made on first start
//! DIR/users.json          the users' token hashes (`users`)
//! DIR/agents/             the agent link's certificate and the sites' credentials
//! DIR/api-tls/            the API's generated certificate (HTTPS beyond loopback)
//!                         (these four shared by the servers of one PostgreSQL journal,
//!                         `journal::postgres::shared`)
//! DIR/server.json         {"url": ..., "pid": ...} while the server runs
//! DIR/logs/result.jsonl   one record per finished job (seed 003 appendix A.5)
//! DIR/logs/surveillance.jsonl  per-site load samples
//! DIR/sites/NAME/         the local backend's launch directories
//! DIR/output/JOB/         standard output and error of each component's launches
//! DIR/files/SITE/NAME     input files a transfer put on a local site (its replica cache)
//! DIR/scratch/JOB.COMP.LLAUNCH/  RSL $(SCRATCH_DIRECTORY) of a launch on a site of this host
//! ```

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The paths of one state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    pub root: PathBuf,
    /// The tag that servers sharing a PostgreSQL journal share ([`StateDir::shared_tag`]).
    tag: Option<String>,
}

impl StateDir {
    /// This server's tag in the names it gives its launches at a resource manager
    /// ([`coalloc_backends::kind::name_tag`] of this directory, unless shared).
    pub fn name_tag(&self) -> String {
        self.tag
            .clone()
            .unwrap_or_else(|| coalloc_backends::kind::name_tag(&self.root))
    }

    /// This directory with `tag` for its launches' names: an active server's and its
    /// standbys' (issue 32, item 2), which adopt each other's launches, are the same.
    pub fn shared_tag(self, tag: String) -> StateDir {
        StateDir {
            tag: Some(tag),
            ..self
        }
    }

    /// Create the directory (and its subdirectories) if needed.
    pub fn create(root: &Path) -> std::io::Result<StateDir> {
        for sub in ["logs", "sites", "output"] {
            std::fs::create_dir_all(root.join(sub))?;
        }
        Ok(StateDir {
            root: root.to_path_buf(),
            tag: None,
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
    /// Where transfers put input files for a site that shares this machine's file system
    /// (its replica cache, see `catalog`).
    pub fn files(&self, site: &str) -> PathBuf {
        self.root.join("files").join(site)
    }
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
        write_private(&path, format!("{token}\n").as_bytes())?;
        Ok(token)
    }
}

pub use coalloc_link::proto::random_hex;

/// Where a server's shared files are written before its own disk (the journal's database,
/// `crate::journal::postgres::shared`): `(path under the state directory, bytes)`.
pub type Mirror = std::sync::Arc<dyn Fn(&str, &[u8]) -> Result<(), String> + Send + Sync>;

/// Write `bytes` to `path` whole, mode 0600: into a file beside it, synced, then renamed
/// over it (its folder made if needed).
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Write a shared file, `name` in the shared store (its path under the state directory)
/// and `path` on this disk: to `mirror` first when there is one (a refusal there writes
/// nothing), then to the disk ([`write_private`]).
pub fn save_shared(
    path: &Path,
    name: &str,
    bytes: &[u8],
    mirror: Option<&Mirror>,
) -> Result<(), String> {
    if let Some(m) = mirror {
        m(name, bytes)?;
    }
    write_private(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::StateDir;

    #[test]
    fn the_name_tag_is_the_same_for_a_directory_and_differs_between_directories() {
        let base = crate::scratch::dir("tag");
        let a = StateDir::create(&base.join("a")).unwrap();
        let b = StateDir::create(&base.join("b")).unwrap();
        let tag = a.name_tag();
        assert_eq!(tag.len(), 8);
        assert!(tag.bytes().all(|c| c.is_ascii_hexdigit()), "{tag}");
        assert_eq!(StateDir::create(&base.join("a")).unwrap().name_tag(), tag);
        // The same directory by another spelling of its path.
        let other = StateDir::create(&base.join("b").join("..").join("a")).unwrap();
        assert_eq!(other.name_tag(), tag);
        assert_ne!(b.name_tag(), tag);
        let _ = std::fs::remove_dir_all(&base);
    }
}
