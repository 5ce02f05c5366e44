//! PostgreSQL replicated (issue 32, item 3): a primary and a streaming replica, each on a
//! "host" of its own (a network namespace, [`crate::rig::netns`]), and a third for
//! `coalloc serve`. Plain streaming replication, PostgreSQL's own: the replica is
//! `pg_basebackup -R` of the primary, and the primary waits for it at every commit
//! (`synchronous_standby_names = '*'`, `synchronous_commit = on`, which is the journal's
//! session setting), so a commit acknowledged to coalloc is on both hosts' disks. When the
//! primary dies, promoting the replica (`pg_ctl promote`) is the operator's job, or a
//! tool's (Patroni, pg_auto_failover); here the test does it. Once promoted, the replica
//! runs alone: it was copied before the primary was made to wait for it, so it waits for no
//! standby.
//!
//! Namespaces `cpr-site1` (the primary, 10.232.0.11), `cpr-site2` (the replica,
//! 10.232.0.12), `cpr-site3` (coalloc, 10.232.0.13), on the bridge `cpr-wan`; both clusters
//! on port 5432 of their host. Skipped without PostgreSQL's binaries or without namespaces
//! (root), as [`super::Cluster::start`] and [`Topology::up`] say.

use super::{found, ok, Cluster};
use crate::rig::netns::Topology;
use std::time::{Duration, Instant};

const PREFIX: &str = "cpr";
const NET: &str = "10.232";
const PORT: u16 = 5432;

/// The primary, its replica and their hosts (dropped: both stopped, the namespaces gone).
pub struct Replicated {
    pub primary: Cluster,
    pub replica: Cluster,
    topology: Topology,
}

impl Replicated {
    /// The three hosts, the primary with database `db`, and the replica streaming from it
    /// synchronously; `None` (skipped) without PostgreSQL or namespaces.
    pub fn start(db: &str) -> Option<Replicated> {
        let bin = found()?;
        let topology = Topology::up("postgres-replicated", PREFIX, NET, 3, &[])?;
        let host = |i| (topology.netns(i), topology.addr(i));
        let (ns, addr) = host(1);
        let mut primary = Cluster::new("primary", bin.clone(), Some(&ns), &addr, PORT);
        primary.initdb();
        // The other hosts may connect, and the replica stream (trust: a test's cluster).
        let hba = primary.data().join("pg_hba.conf");
        let mut text = std::fs::read_to_string(&hba).unwrap();
        text +=
            &format!("host all all {NET}.0.0/24 trust\nhost replication all {NET}.0.0/24 trust\n");
        std::fs::write(&hba, text).unwrap();
        primary.launch();
        primary.create_db(db);
        let (ns, addr) = host(2);
        let mut replica = Cluster::new("replica", bin, Some(&ns), &addr, PORT);
        ok(
            "pg_basebackup",
            replica
                .pg("pg_basebackup")
                .args([
                    "-h",
                    &primary.addr,
                    "-p",
                    &PORT.to_string(),
                    "-U",
                    "coalloc",
                ])
                .arg("-D")
                .arg(replica.data())
                .args(["-R", "-X", "stream", "--checkpoint=fast", "--no-sync"])
                .output(),
        );
        replica.launch();
        primary.psql(
            "postgres",
            "ALTER SYSTEM SET synchronous_standby_names = '*'",
        );
        primary.psql("postgres", "SELECT pg_reload_conf()");
        let t = Instant::now();
        while primary.psql("postgres", "SELECT sync_state FROM pg_stat_replication") != "sync" {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "the replica is not synchronous"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(Replicated {
            primary,
            replica,
            topology,
        })
    }

    /// The connection string of database `db` that reaches whichever host is the primary:
    /// both hosts, the first that accepts writes (libpq's multi-host form, which
    /// rust-postgres reads too).
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://coalloc@{}:{PORT},{}:{PORT}/{db}?target_session_attrs=read-write&connect_timeout=2",
            self.primary.addr, self.replica.addr
        )
    }

    /// Move the calling thread into coalloc's host (`cpr-site3`): the servers it starts
    /// from then on run there, and its calls to them go there ([`Topology::enter`]).
    pub fn enter_coalloc_host(&self) {
        self.topology.enter(3);
    }
}

impl Cluster {
    /// `kill -9` of the postmaster (its other processes end by themselves when they notice).
    pub fn kill(&mut self) {
        let pid = std::fs::read_to_string(self.data().join("postmaster.pid")).unwrap();
        let lines: Vec<&str> = pid.lines().collect();
        self.shm = lines
            .get(6)
            .and_then(|l| l.split_whitespace().nth(1))
            .map(str::to_string);
        ok(
            "kill -9 the postmaster",
            std::process::Command::new("kill")
                .args(["-9", lines[0]])
                .output(),
        );
        self.running = false;
    }

    /// `pg_ctl promote`: a replica becomes a primary (waits until it accepts writes).
    pub fn promote(&self) {
        ok(
            "pg_ctl promote",
            self.pg("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .args(["-w", "-t", "60", "promote"])
                .output(),
        );
    }
}
