//! The journal (DESIGN.md, "event-sourced state"): every input the core accepts is appended
//! here, in the order the core saw it, and committed before any of its effects leave the
//! server or its reply is sent. A restart replays the journal into a fresh core.
//!
//! The driver sees a journal through [`Store`] (DESIGN.md, "The server as a machine"):
//! [`Journal`] keeps it in SQLite (the embedded default, `journal.sqlite` in the state
//! directory); [`MemJournal`] keeps it in memory for the simulation harness, where a crash
//! drops the append it cuts short, as a power cut drops an un-synced write.
//!
//! Compaction (issue 23, item 4): once a snapshot of the state after entry `S` is on disk
//! (`driver::snapshot`), the entries before `S` are deleted; a restart reads the snapshot
//! and replays the entries after `S` only.

mod memory;
mod sqlite;

pub use memory::MemJournal;
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
