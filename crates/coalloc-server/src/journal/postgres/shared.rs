//! The files every server of one PostgreSQL database shares (issue 32 item 2), in table
//! `shared`: the admin's token, the users' token hashes, the agent sites' credentials and
//! the certificates the servers generate for the API and for agents ([`SHARED`], paths in
//! the state directory). A standby adopts them before it answers (the API's certificate)
//! and again when it takes the lease, so that clients, components and agents that pinned
//! or were given the first server's find the same at its successor; the leader offers the
//! ones the table lacks once it has built them, and every change it makes (`coalloc user
//! add`, `coalloc site add`) is written here, fenced by the lease, before it is written to
//! its own disk or acknowledged. The database thus holds the private keys, as it holds
//! everything else the servers know; an operator's own certificate (`server.tls_cert`) is
//! not copied.

use super::snapshots::PgPlace;
use std::path::Path;
use std::sync::Arc;

/// The shared files, as paths under the state directory.
pub const SHARED: [&str; 7] = [
    "token",
    "users.json",
    "agents/credentials.json",
    "agents/cert.der",
    "agents/key.der",
    "api-tls/cert.der",
    "api-tls/key.der",
];

pub(super) const SCHEMA: &str = r#"
    CREATE TABLE IF NOT EXISTS shared (
        name  TEXT PRIMARY KEY,
        bytes BYTEA NOT NULL
    );
"#;

/// The shared files of one database, read by any server and written by the leader.
#[derive(Clone)]
pub struct SharedFiles {
    place: Arc<PgPlace>,
    /// `None`: a reader (a server that does not lead yet) that may not write.
    epoch: Option<i64>,
}

impl SharedFiles {
    pub(super) fn new(place: Arc<PgPlace>, epoch: Option<i64>) -> SharedFiles {
        SharedFiles { place, epoch }
    }

    /// A reader of the database at `url`, for a server that does not lead (yet).
    pub fn reader(url: &str) -> SharedFiles {
        let place = PgPlace::new(url, super::shown(url), 0, None);
        SharedFiles::new(Arc::new(place), None)
    }

    /// Every shared file the table holds (none before the first server made the table).
    pub fn all(&self) -> Result<Vec<(String, Vec<u8>)>, String> {
        self.place.with(|c| {
            let pg = |e: postgres::Error| e.to_string();
            let made: bool = c
                .query_one("SELECT to_regclass('shared') IS NOT NULL", &[])
                .map_err(pg)?
                .get(0);
            if !made {
                return Ok(Vec::new());
            }
            let rows = c
                .query("SELECT name, bytes FROM shared ORDER BY name", &[])
                .map_err(pg)?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    /// Write `name`'s `bytes` (`only_new`: unless the table has it already), in a
    /// transaction fenced by the lease: refused once another server leads.
    pub fn put(&self, name: &str, bytes: &[u8], only_new: bool) -> Result<(), String> {
        let Some(epoch) = self.epoch else {
            return Err("this server does not lead: it writes no shared file".into());
        };
        let (name, bytes) = (name.to_string(), bytes.to_vec());
        self.place.with(move |c| {
            let pg = |e: postgres::Error| e.to_string();
            let mut tx = c.transaction().map_err(pg)?;
            if let Err(now) = super::fence(&mut tx, epoch).map_err(pg)? {
                return Err(format!(
                    "deposed: the lease is at epoch {now}, this server's is {epoch}"
                ));
            }
            let sql = if only_new {
                "INSERT INTO shared (name, bytes) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING"
            } else {
                "INSERT INTO shared (name, bytes) VALUES ($1, $2)
                 ON CONFLICT (name) DO UPDATE SET bytes = excluded.bytes"
            };
            tx.execute(sql, &[&name, &bytes]).map_err(pg)?;
            tx.commit().map_err(pg)
        })
    }

    /// Write every shared file the table holds into the state directory `root` (replacing
    /// this server's own); how many.
    pub fn adopt(&self, root: &Path) -> Result<usize, String> {
        let all = self.all()?;
        for (name, bytes) in &all {
            if SHARED.contains(&name.as_str()) {
                crate::state::write_private(&root.join(name), bytes)
                    .map_err(|e| format!("{name}: {e}"))?;
            }
        }
        Ok(all.len())
    }

    /// Offer the table every shared file of `root` it lacks (the first leader's).
    pub fn offer(&self, root: &Path) -> Result<(), String> {
        for name in SHARED {
            if let Ok(bytes) = std::fs::read(root.join(name)) {
                self.put(name, &bytes, true)?;
            }
        }
        Ok(())
    }
}
