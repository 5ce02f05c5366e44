//! A throwaway PostgreSQL cluster for the tests of the PostgreSQL journal (issue 32): `initdb`
//! into a folder of its own under the system's temporary folder, `pg_ctl start` on a free
//! loopback port with its Unix socket in that folder, trust authentication for the role
//! `coalloc`, and an immediate stop and the folder removed when dropped. As root (CI), the
//! cluster runs as the `postgres` user (`runuser`): PostgreSQL refuses to run as root.
//!
//! The binaries are Debian's (`/usr/lib/postgresql/N/bin`, the newest N), or those of
//! `COALLOC_PG_BIN`. Without them, [`Cluster::start`] says so and gives `None` (the test
//! skips), unless `COALLOC_REQUIRE_POSTGRES=1` (CI, where scripts/test.sh installs them):
//! then it panics.
//!
//! [`replicated`]: a primary and its streaming replica on hosts of their own (network
//! namespaces), for the replicated setup's test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod replicated;

/// A running cluster.
pub struct Cluster {
    /// The cluster's folder: `data/`, the socket, `log`.
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
    /// The address it listens on.
    pub addr: String,
    /// The network namespace it runs in (`None`: this process's).
    netns: Option<String>,
    /// The id of the System V shared memory segment of a cluster killed with `kill -9`
    /// ([`Cluster::kill`]), removed when dropped.
    shm: Option<String>,
    /// The user the server runs as (`None`: this process's).
    run_as: Option<String>,
    running: bool,
}

/// The folder of PostgreSQL's binaries, if there is one.
pub fn binaries() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("COALLOC_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// PostgreSQL is required (`COALLOC_REQUIRE_POSTGRES=1`).
fn required() -> bool {
    std::env::var("COALLOC_REQUIRE_POSTGRES").is_ok_and(|v| v == "1")
}

/// This process runs as root.
fn root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The binaries, or `None` (said so) when they are not there and not required.
fn found() -> Option<PathBuf> {
    let bin = binaries();
    if bin.is_none() {
        assert!(
            !required(),
            "COALLOC_REQUIRE_POSTGRES=1 but no PostgreSQL binaries (/usr/lib/postgresql/N/bin or COALLOC_PG_BIN)"
        );
        eprintln!("skipped: no PostgreSQL binaries (install postgresql, or set COALLOC_PG_BIN)");
    }
    bin
}

fn ok(what: &str, out: std::io::Result<Output>) -> Output {
    let out = out.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

impl Cluster {
    /// Start a cluster named `tag` (its folder's name); `None` when PostgreSQL is not
    /// installed and not required.
    pub fn start(tag: &str) -> Option<Cluster> {
        let bin = found()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut c = Cluster::new(tag, bin, None, "127.0.0.1", port);
        c.initdb();
        c.launch();
        Some(c)
    }

    /// A cluster listening on `addr` (an address of this namespace, e.g. a bridge's) that
    /// trusts role `coalloc` from network `net` (`10.226.0.0/24`): the database of servers
    /// in other network namespaces.
    pub fn start_on(tag: &str, addr: &str, net: &str) -> Option<Cluster> {
        let bin = found()?;
        let port = std::net::TcpListener::bind(format!("{addr}:0"))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut c = Cluster::new(tag, bin, None, addr, port);
        c.initdb();
        let hba = c.data().join("pg_hba.conf");
        let mut text = std::fs::read_to_string(&hba).unwrap();
        text += &format!("host all coalloc {net} trust\n");
        std::fs::write(&hba, text).unwrap();
        c.launch();
        Some(c)
    }

    /// A cluster not made yet: its folder `tag` (made, emptied, the cluster's user's), to
    /// listen on `addr:port` inside network namespace `netns` (`None`: this process's).
    fn new(tag: &str, bin: PathBuf, netns: Option<&str>, addr: &str, port: u16) -> Cluster {
        let dir = std::env::temp_dir().join(format!("coalloc-pg-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let run_as = root().then(|| "postgres".to_string());
        if let Some(user) = &run_as {
            ok(
                "chown the cluster's folder",
                Command::new("chown").arg(user).arg(&dir).output(),
            );
        }
        Cluster {
            dir,
            bin,
            port,
            addr: addr.to_string(),
            netns: netns.map(str::to_string),
            run_as,
            running: false,
            shm: None,
        }
    }

    /// `initdb`: trust authentication for the role `coalloc`.
    fn initdb(&self) {
        ok(
            "initdb",
            self.pg("initdb")
                .arg("-D")
                .arg(self.data())
                .args(["-U", "coalloc", "--auth=trust", "-E", "UTF8", "--no-sync"])
                .output(),
        );
    }

    /// `pg_ctl start` on the cluster's address and port, its socket in its folder.
    fn launch(&mut self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses={} -c fsync=on",
            self.port,
            self.dir.display(),
            self.addr
        );
        ok(
            "pg_ctl start",
            self.pg("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .arg("-l")
                .arg(self.dir.join("log"))
                .args(["-w", "-t", "60", "-o", &options, "start"])
                .output(),
        );
        self.running = true;
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// A command of the cluster's binaries, run as the cluster's user in its namespace.
    fn pg(&self, program: &str) -> Command {
        let mut argv: Vec<std::ffi::OsString> = Vec::new();
        if let Some(ns) = &self.netns {
            argv.extend(["nsenter".into(), format!("--net=/run/netns/{ns}").into()]);
            argv.push("--".into());
        }
        if let Some(user) = &self.run_as {
            argv.extend(["runuser", "-u", user, "--"].map(Into::into));
        }
        argv.push(self.bin.join(program).into());
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]).current_dir(&self.dir);
        c
    }

    /// The connection string of database `db` (as the role `coalloc`, over TCP on loopback).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://coalloc@{}:{}/{db}", self.addr, self.port)
    }

    /// Make database `db`; its connection string.
    pub fn create_db(&self, db: &str) -> String {
        ok(
            "createdb",
            Command::new(self.bin.join("createdb"))
                .args(["-h", &self.addr, "-p", &self.port.to_string()])
                .args(["-U", "coalloc", db])
                .output(),
        );
        self.url(db)
    }

    /// Run SQL on database `db` with `psql`: what it printed (unaligned, tuples only).
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = ok(
            "psql",
            Command::new(self.bin.join("psql"))
                .args(["-h", &self.addr, "-p", &self.port.to_string()])
                .args(["-U", "coalloc"])
                .args(["-d", db, "-AtX", "-v", "ON_ERROR_STOP=1", "-c", sql])
                .output(),
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The cluster's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stop the cluster (immediately: nothing of it is kept).
    pub fn stop(&mut self) {
        if !std::mem::take(&mut self.running) {
            return;
        }
        let out = self
            .pg("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        if !out.as_ref().is_ok_and(|o| o.status.success()) {
            eprintln!("pg_ctl stop: {out:?}");
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
        if let Some(id) = self.shm.take() {
            let _ = Command::new("ipcrm").args(["-m", &id]).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
