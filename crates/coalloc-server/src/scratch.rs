//! Scratch folders of this crate's unit tests: `coalloc-server-tests/<pid>/<name>` under the
//! system's temporary folder, made empty on request. The test harness has no hook at its
//! end, so a test run cannot remove its own folders; instead the first request of a run
//! removes the folders of earlier runs whose process is gone. At most the latest run's
//! folders stay behind, to look at after a failure.

use std::path::{Path, PathBuf};
use std::sync::Once;

/// The parent of every run's folders.
fn root() -> PathBuf {
    std::env::temp_dir().join("coalloc-server-tests")
}

/// The folder `name` of this run, as it is (to open again what a test left there).
pub(crate) fn path(name: &str) -> PathBuf {
    static SWEEP: Once = Once::new();
    SWEEP.call_once(|| sweep(&root()));
    root().join(std::process::id().to_string()).join(name)
}

/// An empty folder `name` of this run (made, or emptied if an earlier test of the same name
/// left it).
pub(crate) fn dir(name: &str) -> PathBuf {
    let dir = path(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

/// Remove the folders under `root` of runs whose process no longer exists.
fn sweep(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_dead_runs_folders_are_swept_and_a_live_ones_kept() {
        let root = super::dir("sweep-root");
        // No process has a pid this large (pid_max is at most 2^22).
        let dead = root.join("4294967");
        let live = root.join(std::process::id().to_string());
        let other = root.join("not-a-run");
        for d in [&dead, &live, &other] {
            std::fs::create_dir_all(d.join("x")).unwrap();
        }
        super::sweep(&root);
        assert!(!dead.exists());
        assert!(live.join("x").exists());
        assert!(other.exists());
        let again = super::dir("sweep-root");
        assert_eq!(again, root);
        assert_eq!(std::fs::read_dir(&again).unwrap().count(), 0);
    }
}
