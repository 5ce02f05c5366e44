//! Outside programs the observability tests drive (Debian's `prometheus` and `chromium`,
//! installed by scripts/test.sh): finding them, a free loopback port, a temporary folder,
//! and a child process stopped when the test ends, however it ends.

use std::path::PathBuf;
use std::process::Child;

/// The program's path, or `None` (the test then says it was skipped) unless
/// `COALLOC_REQUIRE_TOOLS=1` (scripts/test.sh), when a missing program fails the test.
pub fn tool(names: &[&str]) -> Option<PathBuf> {
    let found = names.iter().find_map(|n| {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(n))
                .find(|f| f.is_file())
        })
    });
    if found.is_none() {
        assert!(
            std::env::var("COALLOC_REQUIRE_TOOLS").as_deref() != Ok("1"),
            "{names:?} not found: scripts/test.sh installs it with apt-get"
        );
        eprintln!("skipped: {names:?} not found (scripts/test.sh installs it)");
    }
    found
}

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A new empty folder for this test under the system's temporary folder.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("coalloc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A child process killed (and reaped) when dropped.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
