//! The journal (DESIGN.md, "event-sourced state"): every input the core accepts is appended
//! here, in the order the core saw it, and committed before any of its effects leave the
//! server or its reply is sent. A restart replays the journal into a fresh core.
//!
//! The driver sees a journal through [`Store`] (DESIGN.md, "The server as a machine"):
//! [`Journal`] keeps it in SQLite (the embedded default, `journal.sqlite` in the state
//! directory); [`MemJournal`] keeps it in memory for the simulation harness, where a crash
//! drops the append it cuts short, as a power cut drops an un-synced write.
//!
//! PostgreSQL (issue 32, item 1; `server.journal = "postgres://..."`): [`PgJournal`] keeps
//! the journal, the history of ended jobs and the snapshots in one PostgreSQL database
//! (`journal::postgres`), with the same promise (a durable append has committed when it
//! returns). The snapshots' place and the history's reader are the rest of the seam:
//! [`SnapshotPlace`] (a file in the state directory, or rows beside the journal) and
//! [`crate::history::HistoryRead`]; [`open`] opens all three for `coalloc serve`.
//!
//! Active and standby servers (issue 32, item 2): any number of `coalloc serve` may share one
//! PostgreSQL database; one leads, by the journal's lease ([`postgres::lease`]), and the
//! others wait as standbys until it dies ([`lead`], which `coalloc serve` calls before it
//! builds anything else, and `crate::standby`, which answers the API meanwhile). SQLite's
//! journal has no lease: its state directory is one server's.
//!
//! Compaction (issue 23, item 4): once a snapshot of the state after entry `S` is on disk
//! (`driver::snapshot`), the entries before `S` are deleted; a restart reads the snapshot
//! and replays the entries after `S` only.

pub mod contract;
mod memory;
mod place;
pub mod postgres;
mod sqlite;

pub use memory::MemJournal;
pub use place::{FilePlace, SnapshotBytes, SnapshotPlace};
pub use postgres::{Leader, LeaseTerms, OnLost, PgHistory, PgJournal, SharedFiles};
pub use sqlite::Journal;

use crate::entry::Entry;
use crate::history::HistoryRow;
use coalloc_core::model::Time;

/// Why the journal could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Sqlite {
        path: String,
        source: rusqlite::Error,
    },
    #[error("journal {url}: {source}")]
    Postgres {
        url: String,
        source: ::postgres::Error,
    },
    /// Another server took the journal's lease since this one opened it (its fencing
    /// number, the lease's `epoch`, is no longer the lease's): nothing of the write is kept.
    #[error("journal {url}: deposed: this server's lease is epoch {mine}, the journal's is now {now}; nothing more is written")]
    Fenced { url: String, mine: i64, now: i64 },
    /// A write that did not reach the disk (the in-memory journal's crash).
    #[error("journal {path}: {message}")]
    Lost { path: String, message: String },
    #[error("journal {path}, entry {seq}: cannot read it: {message}")]
    Corrupt {
        path: String,
        seq: i64,
        message: String,
    },
}

/// Why a replay stopped: the journal could not be read, or record `n` (from 1) was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError<E> {
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The entry numbered so (its `seq`) was refused.
    #[error("journal entry {0}: {1}")]
    Record(i64, E),
}

/// One journaled input: when the core saw it, and what it was.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub at: Time,
    pub entry: Entry,
}

/// Hand one stored entry (`seq`, `at`, its JSON `text`) of the journal at `path` to a
/// replay's `each`: what every [`Store::replay_after`] does with the rows it reads.
fn replay_row<E, F: FnMut(i64, Record) -> Result<(), E> + ?Sized>(
    path: &str,
    (seq, at, text): (i64, Time, &str),
    each: &mut F,
) -> Result<(), ReplayError<E>> {
    let entry = serde_json::from_str(text).map_err(|e| {
        ReplayError::Journal(JournalError::Corrupt {
            path: path.to_owned(),
            seq,
            message: e.to_string(),
        })
    })?;
    each(seq, Record { at, entry }).map_err(|e| ReplayError::Record(seq, e))
}

/// Where the driver's journal is kept: what it appends, replays, and compacts.
pub trait Store: Send {
    /// The number of the last entry committed (0: none yet).
    fn last_seq(&self) -> i64;

    /// Append records, and the history rows of ended jobs, at once; they are durable when
    /// this returns Ok, and none of them is when it returns an error.
    fn append(&mut self, records: &[Record], history: &[HistoryRow]) -> Result<(), JournalError>;

    /// [`Store::append`] without waiting for the disk: the records are committed, in order
    /// after the others, but a crash may drop them (the last ones first) until the next
    /// [`Store::append`] or [`Store::sync`] makes them durable. For the turns whose effects
    /// stay in the server (a component's check-in, a launch's handle): nothing of them is
    /// told to anyone before the sync. A journal that cannot defer its writes makes them
    /// durable at once.
    fn append_unsynced(
        &mut self,
        records: &[Record],
        history: &[HistoryRow],
    ) -> Result<(), JournalError> {
        self.append(records, history)
    }

    /// Make every record appended so far durable (a no-op when nothing waits).
    fn sync(&mut self) -> Result<(), JournalError> {
        Ok(())
    }

    /// Hand every record numbered after `after`, in order, to `each` as it is read; how many
    /// there were. `each`'s error stops the reading and comes back with the record's number.
    fn replay_after(
        &self,
        after: i64,
        each: &mut dyn FnMut(i64, Record) -> Result<(), String>,
    ) -> Result<usize, ReplayError<String>>;

    /// Delete the entries numbered below `seq` (a snapshot covers them); how many went.
    fn compact_before(&mut self, seq: i64) -> Result<usize, JournalError>;

    /// Where the snapshots of the state this journal holds are kept; `None`: the state
    /// directory's `snapshot.bin` ([`FilePlace`]).
    fn snapshot_place(&self) -> Option<std::sync::Arc<dyn SnapshotPlace>> {
        None
    }
}

/// Where `coalloc serve` keeps its journal (`server.journal`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backing {
    /// `journal.sqlite` in the state directory (the embedded default).
    Sqlite,
    /// A PostgreSQL database, by its connection string (`postgres://user@host/db`).
    Postgres(String),
}

/// The journal, the snapshots' place and the history's reader of a server.
pub struct Storage {
    pub journal: Box<dyn Store>,
    pub history: std::sync::Arc<dyn crate::history::HistoryRead>,
}

/// For a PostgreSQL journal, take its lease on `terms` ([`PgJournal::lead`]: waiting as a
/// standby while another server holds it, telling `standby` who); `None` for SQLite.
pub fn lead(
    backing: &Backing,
    terms: &LeaseTerms,
    standby: &mut dyn FnMut(&Leader),
    on_lost: OnLost,
) -> Result<Option<PgJournal>, JournalError> {
    match backing {
        Backing::Sqlite => Ok(None),
        Backing::Postgres(url) => PgJournal::lead(url, terms, standby, on_lost).map(Some),
    }
}

/// Open the storage `backing` names, for the state directory `state`; `led`: the PostgreSQL
/// journal [`lead`] took (else one is opened taking the lease at once).
pub fn open(
    backing: &Backing,
    state: &crate::state::StateDir,
    led: Option<PgJournal>,
) -> Result<Storage, JournalError> {
    Ok(match backing {
        Backing::Sqlite => {
            let journal = Journal::open(&state.journal())?;
            let history = crate::history::History::open(&state.journal()).map_err(|e| {
                JournalError::Lost {
                    path: state.journal().display().to_string(),
                    message: e.to_string(),
                }
            })?;
            Storage {
                journal: Box::new(journal),
                history: std::sync::Arc::new(history),
            }
        }
        Backing::Postgres(url) => {
            let journal = match led {
                Some(j) => j,
                None => PgJournal::open(url)?,
            };
            let history = postgres::PgHistory::open(url)?;
            Storage {
                journal: Box::new(journal),
                history: std::sync::Arc::new(history),
            }
        }
    })
}

/// A journal that holds nothing: what the driver keeps while its own is lent to the thread
/// that reads it during a replay.
pub(crate) struct Lent;

impl Store for Lent {
    fn last_seq(&self) -> i64 {
        0
    }
    fn append(&mut self, _: &[Record], _: &[HistoryRow]) -> Result<(), JournalError> {
        Err(JournalError::Lost {
            path: "(lent)".into(),
            message: "the journal is being replayed".into(),
        })
    }
    fn replay_after(
        &self,
        _: i64,
        _: &mut dyn FnMut(i64, Record) -> Result<(), String>,
    ) -> Result<usize, ReplayError<String>> {
        Ok(0)
    }
    fn compact_before(&mut self, _: i64) -> Result<usize, JournalError> {
        Ok(0)
    }
}
