//! The SQLite journal, the embedded default's [`super::Store`].
//!
//! SQLite in WAL mode with `synchronous = FULL`: a commit is on disk when it returns. The
//! driver appends a whole batch of events (every request that arrived while the last batch
//! was being handled) in one transaction, so one fsync covers many submissions (group
//! commit). A turn whose effects stay in the server (a check-in, a launch's handle) is
//! committed with `synchronous = NORMAL` instead ([`Journal::append_unsynced`]): no fsync;
//! the next durable commit's fsync of the WAL, or [`Journal::sync`]'s, covers it (the WAL's
//! frames are checksummed in a chain, so a crash keeps a prefix of the commits). The history of ended jobs ([`crate::history`]) is a table of the same file,
//! written in the same transactions.
//!
//! The WAL is checkpointed into the database file by a thread of the journal's own, with a
//! connection of its own, every [`CHECKPOINT_EVERY`] commits, instead of by the driver in the commit that fills
//! the WAL past SQLite's threshold (which held the driver for a copy of the WAL: about a
//! tenth of its time under a stream of submissions, issue 23, item 5); the driver's
//! connection checkpoints only when the WAL has grown large. A checkpoint is crash-safe and
//! concurrent with the driver's writes (`PASSIVE`).
//!
//! Compaction (issue 23, item 4): entry `S` itself is kept, so that the next entry's number
//! (SQLite's rowid: the largest plus one) never falls back to one already covered by a
//! snapshot.

use super::{JournalError, Record, ReplayError, Store};
use crate::entry::Entry;
use crate::history::HistoryRow;
use rusqlite::{params, Connection};
use std::path::Path;

/// Commits between two wake-ups of the checkpointing thread. Waking it after every commit
/// made each commit cost four fsyncs instead of one: the checkpoint's two (the WAL, then the
/// database file), and the next commit's WAL, restarted after the complete checkpoint, synced
/// twice (its header, then its frames). Between checkpoints the WAL grows by this many
/// commits (a few pages each).
const CHECKPOINT_EVERY: u32 = 64;

/// The open journal.
pub struct Journal {
    conn: Connection,
    path: String,
    /// The number of the last entry committed (0: none yet).
    last: i64,
    /// Wakes the checkpointing thread (it ends when this is dropped), and the thread (joined
    /// on drop, so that its connection is closed when the journal is).
    checkpoints: Option<(std::sync::mpsc::SyncSender<()>, std::thread::JoinHandle<()>)>,
    /// Commits since the checkpointing thread was last woken.
    since_checkpoint: u32,
    /// The connection's `synchronous` is FULL (else NORMAL).
    full: bool,
    /// Commits made with NORMAL since the last fsync of the WAL.
    unsynced: bool,
}

/// Checkpoint the WAL of the database at `path` each time `wake` says, until its sender is
/// dropped.
fn checkpointer(path: &Path, wake: std::sync::mpsc::Receiver<()>) {
    let conn = match Connection::open(path) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("journal {}: no checkpoints: {e}", path.display());
            return;
        }
    };
    while wake.recv().is_ok() {
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::debug!("journal checkpoint: {e}");
        }
    }
}

impl Journal {
    /// Open (or create) the journal at `path`.
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        let p = path.display().to_string();
        let err = |source| JournalError::Sqlite {
            path: p.clone(),
            source,
        };
        let conn = Connection::open(path).map_err(err)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = FULL;
             CREATE TABLE IF NOT EXISTS journal (
                 seq   INTEGER PRIMARY KEY,
                 at    INTEGER NOT NULL,
                 entry TEXT NOT NULL
             );
             CREATE TABLE IF NOT EXISTS submitted (
                 job  INTEGER PRIMARY KEY,
                 at   INTEGER NOT NULL,
                 spec TEXT NOT NULL
             );",
        )
        .map_err(err)?;
        conn.execute_batch(crate::history::SCHEMA).map_err(err)?;
        let last = conn
            .query_row("SELECT coalesce(max(seq), 0) FROM journal", [], |r| {
                r.get(0)
            })
            .map_err(err)?;
        // The journal's thread checkpoints; the driver's connection only once the WAL has
        // grown past 10,000 pages (40 MB; the thread's passive checkpoints cannot finish
        // while commits keep coming, so the WAL would otherwise grow through a long stream
        // of them). If the thread cannot be started, SQLite's automatic checkpoints stay.
        let (checkpoints, wake) = std::sync::mpsc::sync_channel(1);
        let at = path.to_path_buf();
        let checkpoints = match std::thread::Builder::new()
            .name("checkpoint".into())
            .spawn(move || checkpointer(&at, wake))
        {
            Ok(thread) => {
                conn.execute_batch("PRAGMA wal_autocheckpoint = 10000;")
                    .map_err(err)?;
                Some((checkpoints, thread))
            }
            Err(e) => {
                tracing::warn!("journal {p}: no checkpointing thread: {e}");
                None
            }
        };
        Ok(Journal {
            conn,
            path: p,
            last,
            checkpoints,
            since_checkpoint: 0,
            full: true,
            unsynced: false,
        })
    }

    /// The number of the last entry committed (0: none yet).
    pub fn last_seq(&self) -> i64 {
        self.last
    }

    /// Delete the entries numbered below `seq` (a snapshot covers them); the number of
    /// entries deleted.
    ///
    /// The jobs those entries submitted are kept first in table `submitted` (job number,
    /// time, native spec; not the secret), in order: the server's history as submitted
    /// outlives compaction (`coalloc whatif` replays it), and weighs nothing on a restart.
    /// One transaction: a kill during it leaves the journal as it was.
    /// `COALLOC_COMPACT_PAUSE_MS` (tests only) stops it that long before its commit.
    pub fn compact_before(&mut self, seq: i64) -> Result<usize, JournalError> {
        let path = self.path.clone();
        let err = |source| JournalError::Sqlite {
            path: path.clone(),
            source,
        };
        self.synchronous(true).map_err(err)?;
        let tx = self.conn.transaction().map_err(err)?;
        tx.execute(
            "INSERT INTO submitted (at, spec)
                 SELECT at, json_extract(entry, '$.job') FROM journal
                 WHERE seq < ?1 AND json_extract(entry, '$.e') = 'submit' ORDER BY seq",
            params![seq],
        )
        .map_err(err)?;
        let n = tx
            .execute("DELETE FROM journal WHERE seq < ?1", params![seq])
            .map_err(err)?;
        if let Some(ms) = std::env::var("COALLOC_COMPACT_PAUSE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            // Tests only: a kill inside the transaction, before it commits.
            tracing::info!(before = seq, "journal compaction paused before its commit");
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        tx.commit().map_err(err)?;
        self.unsynced = false;
        Ok(n)
    }

    /// Every job submitted, in order: `(time, native spec)` of those a compaction moved to
    /// table `submitted`, then of the `submit` entries still in the journal. The k-th is
    /// job k (the core numbers accepted jobs densely from 1).
    pub fn submissions(&self) -> Result<Vec<(i64, String)>, ReplayError<String>> {
        let err = |source| {
            ReplayError::Journal(JournalError::Sqlite {
                path: self.path.clone(),
                source,
            })
        };
        let mut out: Vec<(i64, String)> = Vec::new();
        let mut stmt = self
            .conn
            .prepare("SELECT at, spec FROM submitted ORDER BY job")
            .map_err(err)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(err)?;
        for row in rows {
            out.push(row.map_err(err)?);
        }
        self.replay(|r| {
            if let Entry::Submit { job, .. } = r.entry {
                out.push((r.at, job));
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// Hand every record, in order, to `each` as it is read (a replay holds one record at a
    /// time, not the whole journal); how many there were. `each`'s error stops the reading
    /// and comes back with the record's number.
    pub fn replay<E>(
        &self,
        mut each: impl FnMut(Record) -> Result<(), E>,
    ) -> Result<usize, ReplayError<E>> {
        self.replay_after(0, |_, r| each(r))
    }

    /// [`Journal::replay`] of the records numbered after `after` (those a snapshot does not
    /// cover).
    pub fn replay_after<E>(
        &self,
        after: i64,
        mut each: impl FnMut(i64, Record) -> Result<(), E>,
    ) -> Result<usize, ReplayError<E>> {
        let err = |source| {
            ReplayError::Journal(JournalError::Sqlite {
                path: self.path.clone(),
                source,
            })
        };
        let mut stmt = self
            .conn
            .prepare("SELECT seq, at, entry FROM journal WHERE seq > ?1 ORDER BY seq")
            .map_err(err)?;
        let mut rows = stmt.query(params![after]).map_err(err)?;
        let mut n = 0;
        while let Some(row) = rows.next().map_err(err)? {
            let seq: i64 = row.get(0).map_err(err)?;
            let at: i64 = row.get(1).map_err(err)?;
            let text = row.get_ref(2).map_err(err)?.as_str().map_err(|e| {
                err(rusqlite::Error::FromSqlConversionFailure(
                    2,
                    rusqlite::types::Type::Text,
                    Box::new(e),
                ))
            })?;
            super::replay_row(&self.path, (seq, at, text), &mut each)?;
            n += 1;
        }
        Ok(n)
    }

    /// Append records, and write ended jobs to the history table, in one transaction; they
    /// are on disk when this returns.
    pub fn append(
        &mut self,
        records: &[Record],
        history: &[HistoryRow],
    ) -> Result<(), JournalError> {
        if records.is_empty() && history.is_empty() {
            return self.sync();
        }
        self.commit(records, history, true)?;
        // The commit's fsync of the WAL covers the commits made without one before it.
        self.unsynced = false;
        Ok(())
    }

    /// Commit without an fsync (`synchronous = NORMAL`); durable after the next
    /// [`Journal::append`] or [`Journal::sync`].
    pub fn append_unsynced(
        &mut self,
        records: &[Record],
        history: &[HistoryRow],
    ) -> Result<(), JournalError> {
        if records.is_empty() && history.is_empty() {
            return Ok(());
        }
        self.commit(records, history, false)?;
        self.unsynced = true;
        Ok(())
    }

    /// Make the commits made by [`Journal::append_unsynced`] durable: an fsync of the WAL,
    /// which holds them (the same sync a FULL commit ends with).
    pub fn sync(&mut self) -> Result<(), JournalError> {
        if !self.unsynced {
            return Ok(());
        }
        let wal = format!("{}-wal", self.path);
        std::fs::File::open(&wal)
            .and_then(|f| f.sync_data())
            .map_err(|e| JournalError::Lost {
                path: wal,
                message: format!("cannot sync: {e}"),
            })?;
        self.unsynced = false;
        Ok(())
    }

    /// The connection's commits end with an fsync of the WAL (`full`) or not.
    fn synchronous(&mut self, full: bool) -> rusqlite::Result<()> {
        if self.full != full {
            let mode = if full { "FULL" } else { "NORMAL" };
            self.conn
                .execute_batch(&format!("PRAGMA synchronous = {mode};"))?;
            self.full = full;
        }
        Ok(())
    }

    /// One transaction; `full`: with its fsync.
    fn commit(
        &mut self,
        records: &[Record],
        history: &[HistoryRow],
        full: bool,
    ) -> Result<(), JournalError> {
        let path = self.path.clone();
        let err = |source| JournalError::Sqlite {
            path: path.clone(),
            source,
        };
        self.synchronous(full).map_err(err)?;
        let tx = self.conn.transaction().map_err(err)?;
        {
            let mut stmt = tx
                .prepare_cached("INSERT INTO journal (at, entry) VALUES (?1, ?2)")
                .map_err(err)?;
            for r in records {
                let text = serde_json::to_string(&r.entry).expect("entries serialize");
                stmt.execute(params![r.at, text]).map_err(err)?;
            }
        }
        // The connection's last rowid, read before the history's rows are inserted: after
        // them it would be the last history row's (a snapshot then claimed to cover the
        // journal only up to that number, and a restart replayed what it held twice).
        let last = if records.is_empty() {
            self.last
        } else {
            tx.last_insert_rowid()
        };
        crate::history::insert(&tx, history).map_err(err)?;
        tx.commit().map_err(err)?;
        self.last = last;
        self.since_checkpoint += 1;
        if self.since_checkpoint >= CHECKPOINT_EVERY {
            // A checkpoint already asked for covers these commits too.
            if let Some((wake, _)) = &self.checkpoints {
                let _ = wake.try_send(());
            }
            self.since_checkpoint = 0;
        }
        Ok(())
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        if let Some((wake, thread)) = self.checkpoints.take() {
            drop(wake);
            let _ = thread.join();
        }
    }
}

impl Store for Journal {
    fn last_seq(&self) -> i64 {
        self.last
    }
    fn append(&mut self, records: &[Record], history: &[HistoryRow]) -> Result<(), JournalError> {
        Journal::append(self, records, history)
    }
    fn append_unsynced(
        &mut self,
        records: &[Record],
        history: &[HistoryRow],
    ) -> Result<(), JournalError> {
        Journal::append_unsynced(self, records, history)
    }
    fn sync(&mut self) -> Result<(), JournalError> {
        Journal::sync(self)
    }
    fn replay_after(
        &self,
        after: i64,
        each: &mut dyn FnMut(i64, Record) -> Result<(), String>,
    ) -> Result<usize, ReplayError<String>> {
        Journal::replay_after(self, after, each)
    }
    fn compact_before(&mut self, seq: i64) -> Result<usize, JournalError> {
        Journal::compact_before(self, seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for a test's journal; the journal's path in it.
    fn scratch(tag: &str) -> std::path::PathBuf {
        let dir = crate::scratch::dir(&format!("journal{tag}"));
        dir.join("journal.sqlite")
    }

    /// SQLite's journals, each in a scratch directory of its own.
    struct Sqlite;

    impl crate::journal::contract::Subject for Sqlite {
        fn fresh(&mut self, tag: &str) -> Box<dyn Store> {
            Box::new(Journal::open(&scratch(&format!("-contract-{tag}"))).unwrap())
        }
        fn reopen(&mut self, tag: &str) -> Box<dyn Store> {
            let dir = crate::scratch::path(&format!("journal-contract-{tag}"));
            Box::new(Journal::open(&dir.join("journal.sqlite")).unwrap())
        }
    }

    #[test]
    fn the_store_contract_holds() {
        crate::journal::contract::all(&mut Sqlite);
        for tag in ["reopen", "unsynced", "compact", "history", "refused"] {
            std::fs::remove_dir_all(crate::scratch::path(&format!("journal-contract-{tag}")))
                .unwrap();
        }
    }

    #[test]
    fn unsynced_commits_are_kept_in_order_with_the_durable_ones() {
        let path = scratch("-u");
        let dir = path.parent().unwrap().to_path_buf();
        let mut j = Journal::open(&path).unwrap();
        let rec = |at: i64, launch: u64| Record {
            at,
            entry: Entry::Ready { launch },
        };
        j.append_unsynced(&[rec(1, 1)], &[]).unwrap();
        assert!(j.unsynced);
        // Numbered like any other entry, and read back before any sync.
        assert_eq!(j.last_seq(), 1);
        j.sync().unwrap();
        assert!(!j.unsynced);
        j.append_unsynced(&[rec(2, 2), rec(3, 3)], &[]).unwrap();
        // A durable commit after them syncs them too.
        j.append(&[rec(4, 4)], &[]).unwrap();
        assert!(!j.unsynced && j.full);
        j.append_unsynced(&[rec(5, 5)], &[]).unwrap();
        assert!(!j.full);
        drop(j);
        let mut back = Vec::new();
        Journal::open(&path)
            .unwrap()
            .replay(|r| {
                back.push(r.at);
                Ok::<_, String>(())
            })
            .unwrap();
        assert_eq!(back, vec![1, 2, 3, 4, 5]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn compaction_keeps_the_jobs_submitted_in_order() {
        let path = scratch("-c");
        let dir = path.parent().unwrap().to_path_buf();
        let mut j = Journal::open(&path).unwrap();
        let submit = |at: i64, spec: &str| Record {
            at,
            entry: Entry::Submit {
                job: spec.into(),
                secret: "s3cret".into(),
            },
        };
        let recs = [
            submit(1, "{\"a\":1}"),
            Record {
                at: 2,
                entry: Entry::Tick,
            },
            submit(3, "{\"b\":'2'}"),
            submit(4, "c"),
            submit(5, "d"),
        ];
        j.append(&recs, &[]).unwrap();
        // Entries 1-3 go (two submissions), then 4; a submission stays in the journal.
        assert_eq!(j.compact_before(4).unwrap(), 3);
        assert_eq!(j.compact_before(5).unwrap(), 1);
        drop(j);
        let j = Journal::open(&path).unwrap();
        let want: Vec<(i64, String)> = vec![
            (1, "{\"a\":1}".into()),
            (3, "{\"b\":'2'}".into()),
            (4, "c".into()),
            (5, "d".into()),
        ];
        assert_eq!(j.submissions().unwrap(), want);
        assert_eq!(j.replay(|_| Ok::<_, String>(())).unwrap(), 1);
        let secrets: i64 = j
            .conn
            .query_row(
                "SELECT count(*) FROM submitted WHERE spec LIKE '%s3cret%'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(secrets, 0, "no secret is kept");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
