//! The journal (DESIGN.md, "event-sourced state"): every input the core accepts is appended
//! here, in the order the core saw it, and committed before any of its effects leave the
//! server or its reply is sent. A restart replays the journal into a fresh core.
//!
//! SQLite in WAL mode with `synchronous = FULL`: a commit is on disk when it returns. The
//! driver appends a whole batch of events (every request that arrived while the last batch
//! was being handled) in one transaction, so one fsync covers many submissions (group
//! commit). The history of ended jobs ([`crate::history`]) is a table of the same file,
//! written in the same transactions.

use crate::entry::Entry;
use crate::history::HistoryRow;
use coalloc_core::model::Time;
use rusqlite::{params, Connection};
use std::path::Path;

/// Why the journal could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Sqlite {
        path: String,
        source: rusqlite::Error,
    },
    #[error("journal {path}, entry {seq}: cannot read it: {message}")]
    Corrupt {
        path: String,
        seq: i64,
        message: String,
    },
}

/// One journaled input: when the core saw it, and what it was.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub at: Time,
    pub entry: Entry,
}

/// The open journal.
pub struct Journal {
    conn: Connection,
    path: String,
}

impl Journal {
    /// Open (or create) the journal at `path` and read every record in it.
    pub fn open(path: &Path) -> Result<(Journal, Vec<Record>), JournalError> {
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
             );",
        )
        .map_err(err)?;
        conn.execute_batch(crate::history::SCHEMA).map_err(err)?;
        let mut records = Vec::new();
        {
            let mut stmt = conn
                .prepare("SELECT seq, at, entry FROM journal ORDER BY seq")
                .map_err(err)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                })
                .map_err(err)?;
            for row in rows {
                let (seq, at, text) = row.map_err(err)?;
                let entry = serde_json::from_str(&text).map_err(|e| JournalError::Corrupt {
                    path: p.clone(),
                    seq,
                    message: e.to_string(),
                })?;
                records.push(Record { at, entry });
            }
        }
        Ok((Journal { conn, path: p }, records))
    }

    /// Append records, and write ended jobs to the history table, in one transaction; they
    /// are on disk when this returns.
    pub fn append(
        &mut self,
        records: &[Record],
        history: &[HistoryRow],
    ) -> Result<(), JournalError> {
        if records.is_empty() && history.is_empty() {
            return Ok(());
        }
        let path = self.path.clone();
        let err = |source| JournalError::Sqlite {
            path: path.clone(),
            source,
        };
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
        crate::history::insert(&tx, history).map_err(err)?;
        tx.commit().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_a_reopen_in_order() {
        let dir = std::env::temp_dir().join(format!("coalloc-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("journal.sqlite");
        let (mut j, old) = Journal::open(&path).unwrap();
        assert!(old.is_empty());
        let recs = vec![
            Record {
                at: 5,
                entry: Entry::Tick,
            },
            Record {
                at: 7,
                entry: Entry::Cancel { job: 3 },
            },
        ];
        j.append(&recs, &[]).unwrap();
        j.append(
            &[Record {
                at: 9,
                entry: Entry::Started { launch: 4 },
            }],
            &[],
        )
        .unwrap();
        drop(j);
        let (_, back) = Journal::open(&path).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back[..2], recs[..]);
        assert_eq!(back[2].entry, Entry::Started { launch: 4 });
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
