//! Snapshots in PostgreSQL: the newest snapshot's bytes in table `snapshot`, in parts of
//! [`PART`] bytes (a `bytea` value holds at most 1 GB, and a part at a time keeps the
//! memory a publication needs small). A publication inserts the new snapshot's parts and
//! deletes the older ones in one fenced, durable transaction, so the table holds one whole
//! snapshot at every moment; each uses a connection of its own (it runs on the snapshot's
//! thread while the driver goes on writing the journal).

use super::conn::{Conn, Gone};
use crate::journal::{SnapshotBytes, SnapshotPlace};
use std::io::Read;
use std::path::Path;

/// The bytes of one part.
const PART: usize = 8 << 20;

/// The snapshots of one PostgreSQL journal.
pub(super) struct PgPlace {
    url: String,
    shown: String,
    /// The journal's fencing number: a deposed server publishes nothing.
    epoch: i64,
    /// The lease's term, when the journal leads: how long a transaction may idle
    /// ([`super::lease`]).
    ttl: Option<std::time::Duration>,
}

impl PgPlace {
    pub(super) fn new(
        url: &str,
        shown: String,
        epoch: i64,
        ttl: Option<std::time::Duration>,
    ) -> PgPlace {
        PgPlace {
            url: url.to_string(),
            shown,
            epoch,
            ttl,
        }
    }

    /// Run `f` on a connection of its own.
    pub(super) fn with<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> Result<R, String> + Send + 'static,
    ) -> Result<R, String> {
        let conn = Conn::open(&self.url).map_err(|e| e.to_string())?;
        let ttl = self.ttl;
        conn.call(move |c| {
            if let Some(ttl) = ttl {
                super::lease::leader_session(c, ttl).map_err(|e| e.to_string())?;
            }
            f(c)
        })
        .map_err(|Gone| "the connection's thread is gone".to_string())?
    }
}

impl SnapshotPlace for PgPlace {
    fn describe(&self) -> String {
        format!("{} (table snapshot)", self.shown)
    }

    /// Copy `tmp` into the table a part at a time, then delete it.
    fn publish(&self, tmp: &Path, seq: i64) -> Result<(), String> {
        let path = tmp.to_path_buf();
        let epoch = self.epoch;
        self.with(move |c| {
            let mut file = std::fs::File::open(&path).map_err(|e| e.to_string())?;
            let pg = |e: postgres::Error| e.to_string();
            let mut tx = c.transaction().map_err(pg)?;
            if let Err(now) = super::fence(&mut tx, epoch).map_err(pg)? {
                return Err(format!(
                    "deposed: the lease is at epoch {now}, this server's is {epoch}"
                ));
            }
            tx.execute("DELETE FROM snapshot WHERE seq = $1", &[&seq])
                .map_err(pg)?;
            let mut buf = vec![0u8; PART];
            for part in 0i32.. {
                let mut n = 0;
                while n < PART {
                    match file.read(&mut buf[n..]).map_err(|e| e.to_string())? {
                        0 => break,
                        k => n += k,
                    }
                }
                if n == 0 && part > 0 {
                    break;
                }
                tx.execute(
                    "INSERT INTO snapshot (seq, part, bytes) VALUES ($1, $2, $3)",
                    &[&seq, &part, &&buf[..n]],
                )
                .map_err(pg)?;
                if n < PART {
                    break;
                }
            }
            tx.execute("DELETE FROM snapshot WHERE seq <> $1", &[&seq])
                .map_err(pg)?;
            tx.commit().map_err(pg)?;
            Ok(())
        })?;
        std::fs::remove_file(tmp).map_err(|e| e.to_string())
    }

    fn load(&self) -> Result<Option<SnapshotBytes>, String> {
        self.with(|c| {
            let pg = |e: postgres::Error| e.to_string();
            let mut tx = c.transaction().map_err(pg)?;
            let portal = tx
                .bind(
                    "SELECT bytes FROM snapshot
                     WHERE seq = (SELECT max(seq) FROM snapshot) ORDER BY part",
                    &[],
                )
                .map_err(pg)?;
            let mut bytes: Option<Vec<u8>> = None;
            loop {
                let rows = tx.query_portal(&portal, 4).map_err(pg)?;
                if rows.is_empty() {
                    break;
                }
                for r in rows {
                    bytes
                        .get_or_insert_with(Vec::new)
                        .extend_from_slice(r.get::<_, &[u8]>(0));
                }
            }
            Ok(bytes.map(SnapshotBytes::Owned))
        })
    }
}
