//! The in-memory journal of the simulation harness: records and history rows in vectors
//! behind a shared handle, so that they outlive the driver that wrote them (a crash drops
//! the driver; the harness restarts a new one on the same [`MemJournal`]). A crash can also
//! be set to cut the next append short: nothing of it is kept and the driver hears an
//! error, as from a write that never reached the disk. Records appended without a sync
//! ([`Store::append_unsynced`]) are kept until [`MemJournal::lose_unsynced`], the crash of
//! the host under a server: it drops every one not made durable since.
//!
//! Fencing (issue 32, item 2, as `journal::postgres` does it): [`MemJournal::lead`] takes the
//! journal's lease, raising its fencing number, and gives a handle that writes under it;
//! every later write of a handle whose number is no longer the journal's (a deposed
//! leader's) is refused with [`JournalError::Fenced`] and keeps nothing. Like PostgreSQL's,
//! a write that carries nothing (an empty append, a sync with nothing unsynced) is no write
//! and is not checked. A handle that never led ([`MemJournal::default`]'s) writes unfenced.
//! Each record keeps the number it was written under ([`MemJournal::epochs_after`]). A
//! leading handle's last entry number is its own, as a PostgreSQL journal's is: the last it
//! wrote or found when it took the lease, not its successor's (a deposed driver would
//! otherwise take a snapshot of its own state as covering its successor's entries:
//! harness seed 758 `--failover`).

use super::{JournalError, Record, ReplayError, Store};
use crate::history::HistoryRow;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Default)]
struct Inner {
    /// `(seq, record)`, in order; compaction removes from the front.
    records: Vec<(i64, Record)>,
    /// The fencing number each of `records` was written under.
    epochs: Vec<i64>,
    /// The lease's fencing number (0: never taken).
    epoch: i64,
    /// Per fencing number, the last entry its handle wrote or found when it took the lease.
    lasts: std::collections::BTreeMap<i64, i64>,
    history: Vec<HistoryRow>,
    last: i64,
    /// The last record made durable (appended with a sync, or synced since).
    synced: i64,
    /// How many history rows are durable.
    history_synced: usize,
    /// The next append fails and keeps nothing.
    cut_next: bool,
    appends: u64,
}

/// A journal in memory; clones share it (and write under the same fencing number).
#[derive(Debug, Clone, Default)]
pub struct MemJournal {
    shared: Arc<Mutex<Inner>>,
    /// The fencing number this handle writes under (`None`: unfenced).
    mine: Option<i64>,
}

impl MemJournal {
    fn inner(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding it is a test's failure already; the data is still whole.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take the journal's lease: raise its fencing number and give a handle that writes
    /// under it (every other handle's writes are refused from now on).
    pub fn lead(&self) -> MemJournal {
        let mut i = self.inner();
        i.epoch += 1;
        let (epoch, last) = (i.epoch, i.last);
        i.lasts.insert(epoch, last);
        MemJournal {
            shared: self.shared.clone(),
            mine: Some(i.epoch),
        }
    }

    /// The fencing number this handle writes under (`None`: it never led).
    pub fn epoch(&self) -> Option<i64> {
        self.mine
    }

    /// The fencing number each kept record numbered after `after` was written under, with
    /// its number.
    pub fn epochs_after(&self, after: i64) -> Vec<(i64, i64)> {
        let i = self.inner();
        let from = i.records.partition_point(|(s, _)| *s <= after);
        let seqs = i.records[from..].iter().map(|(s, _)| *s);
        seqs.zip(i.epochs[from..].iter().copied()).collect()
    }

    /// Refused if this handle's number is no longer the journal's.
    fn fence(&self, i: &Inner) -> Result<(), JournalError> {
        match self.mine {
            Some(mine) if mine != i.epoch => Err(JournalError::Fenced {
                url: "(memory)".into(),
                mine,
                now: i.epoch,
            }),
            _ => Ok(()),
        }
    }

    /// The next append fails and keeps nothing (a crash in the middle of a commit).
    pub fn cut_next_append(&self) {
        self.inner().cut_next = true;
    }

    /// Every record kept, with its number.
    pub fn records(&self) -> Vec<(i64, Record)> {
        self.inner().records.clone()
    }

    /// The history rows written.
    pub fn history(&self) -> Vec<HistoryRow> {
        self.inner().history.clone()
    }

    /// How many appends succeeded.
    pub fn appends(&self) -> u64 {
        self.inner().appends
    }

    /// The host under the server went down: every record and history row appended without
    /// a sync since the last durable one is gone, and numbering goes on after the durable
    /// ones (as SQLite's would). How many records were dropped.
    pub fn lose_unsynced(&self) -> usize {
        let mut i = self.inner();
        let synced = i.synced;
        let keep = i.records.partition_point(|(s, _)| *s <= synced);
        let dropped = i.records.len() - keep;
        i.records.truncate(keep);
        i.epochs.truncate(keep);
        i.lasts.values_mut().for_each(|l| *l = (*l).min(synced));
        let rows = i.history_synced;
        i.history.truncate(rows);
        i.last = synced;
        dropped
    }

    fn push(
        &mut self,
        records: &[Record],
        history: &[HistoryRow],
        sync: bool,
    ) -> Result<(), JournalError> {
        let mut i = self.inner();
        if records.is_empty() && history.is_empty() {
            if sync && (i.synced != i.last || i.history_synced != i.history.len()) {
                self.fence(&i)?;
                i.synced = i.last;
                i.history_synced = i.history.len();
            }
            return Ok(());
        }
        self.fence(&i)?;
        if std::mem::take(&mut i.cut_next) {
            return Err(JournalError::Lost {
                path: "(memory)".into(),
                message: "the server crashed before the commit reached the disk".into(),
            });
        }
        let epoch = i.epoch;
        for r in records {
            i.last += 1;
            let seq = i.last;
            i.records.push((seq, r.clone()));
            i.epochs.push(epoch);
        }
        let last = i.last;
        i.lasts.insert(epoch, last);
        i.history.extend_from_slice(history);
        i.appends += 1;
        if sync {
            i.synced = i.last;
            i.history_synced = i.history.len();
        }
        Ok(())
    }
}

impl Store for MemJournal {
    fn last_seq(&self) -> i64 {
        let i = self.inner();
        match self.mine {
            Some(e) => i.lasts.get(&e).copied().unwrap_or(i.last),
            None => i.last,
        }
    }

    fn append(&mut self, records: &[Record], history: &[HistoryRow]) -> Result<(), JournalError> {
        self.push(records, history, true)
    }

    fn append_unsynced(
        &mut self,
        records: &[Record],
        history: &[HistoryRow],
    ) -> Result<(), JournalError> {
        self.push(records, history, false)
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        self.push(&[], &[], true)
    }

    fn replay_after(
        &self,
        after: i64,
        each: &mut dyn FnMut(i64, Record) -> Result<(), String>,
    ) -> Result<usize, ReplayError<String>> {
        let records: Vec<(i64, Record)> = {
            let i = self.inner();
            let from = i.records.partition_point(|(s, _)| *s <= after);
            i.records[from..].to_vec()
        };
        let mut n = 0;
        for (seq, r) in records {
            n += 1;
            each(seq, r).map_err(|e| ReplayError::Record(seq, e))?;
        }
        Ok(n)
    }

    fn compact_before(&mut self, seq: i64) -> Result<usize, JournalError> {
        let mut i = self.inner();
        self.fence(&i)?;
        let n = i.records.partition_point(|(s, _)| *s < seq);
        i.records.drain(..n);
        i.epochs.drain(..n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::Entry;

    fn rec(at: i64) -> Record {
        Record {
            at,
            entry: Entry::Tick,
        }
    }

    /// In-memory journals by tag; reopening one is a clone of its handle.
    #[derive(Default)]
    struct Mem(std::collections::BTreeMap<String, MemJournal>);

    impl crate::journal::contract::Subject for Mem {
        fn fresh(&mut self, tag: &str) -> Box<dyn Store> {
            let j = MemJournal::default();
            self.0.insert(tag.into(), j.clone());
            Box::new(j)
        }
        fn reopen(&mut self, tag: &str) -> Box<dyn Store> {
            Box::new(self.0[tag].clone())
        }
    }

    #[test]
    fn the_store_contract_holds() {
        crate::journal::contract::all(&mut Mem::default());
    }

    #[test]
    fn a_cut_append_keeps_nothing_and_the_next_one_goes_on_numbering() {
        let mut j = MemJournal::default();
        j.append(&[rec(1), rec(2)], &[]).unwrap();
        j.cut_next_append();
        assert!(j.append(&[rec(3)], &[]).is_err());
        assert_eq!(j.last_seq(), 2);
        j.append(&[rec(4)], &[]).unwrap();
        let mut seen = Vec::new();
        let n = j
            .clone()
            .replay_after(1, &mut |seq, r| {
                seen.push((seq, r.at));
                Ok(())
            })
            .unwrap();
        assert_eq!(n, 2);
        assert_eq!(seen, vec![(2, 2), (3, 4)]);
        assert_eq!(j.compact_before(3).unwrap(), 2);
        assert_eq!(j.records().len(), 1);
        assert_eq!(j.last_seq(), 3);
    }

    #[test]
    fn a_deposed_handles_writes_are_refused_and_keep_nothing() {
        let j = MemJournal::default();
        let mut a = j.lead();
        a.append(&[rec(1)], &[]).unwrap();
        a.append_unsynced(&[rec(2)], &[]).unwrap();
        let mut b = j.lead();
        assert_eq!((a.epoch(), b.epoch()), (Some(1), Some(2)));
        let refused = |r: Result<(), JournalError>| {
            matches!(
                r,
                Err(JournalError::Fenced {
                    mine: 1,
                    now: 2,
                    ..
                })
            )
        };
        assert!(refused(a.append(&[rec(3)], &[])));
        assert!(refused(a.append_unsynced(&[rec(3)], &[])));
        // Record 2 waits for a sync: a deposed one is refused; nothing waiting, no write.
        assert!(refused(a.sync()));
        assert!(matches!(
            a.compact_before(2),
            Err(JournalError::Fenced { .. })
        ));
        b.append(&[rec(4)], &[]).unwrap();
        assert!(a.append(&[], &[]).is_ok() && a.sync().is_ok());
        assert_eq!(j.epochs_after(0), vec![(1, 1), (2, 1), (3, 2)]);
        // Each leading handle's last entry is its own: the deposed one's stays.
        assert_eq!((a.last_seq(), b.last_seq(), j.last_seq()), (2, 3, 3));
        assert_eq!(b.compact_before(2).unwrap(), 1);
        assert_eq!(j.epochs_after(0), vec![(2, 1), (3, 2)]);
        // A handle that never led writes unfenced.
        let mut c = j.clone();
        c.append(&[rec(5)], &[]).unwrap();
        assert_eq!(j.last_seq(), 4);
    }

    #[test]
    fn the_hosts_crash_drops_what_was_not_synced_and_numbering_goes_on_from_the_durable() {
        let mut j = MemJournal::default();
        j.append(&[rec(1)], &[]).unwrap();
        j.append_unsynced(&[rec(2), rec(3)], &[]).unwrap();
        assert_eq!(j.last_seq(), 3);
        assert_eq!(j.lose_unsynced(), 2);
        assert_eq!(j.last_seq(), 1);
        j.append_unsynced(&[rec(4)], &[]).unwrap();
        j.sync().unwrap();
        j.append_unsynced(&[rec(5)], &[]).unwrap();
        assert_eq!(j.lose_unsynced(), 1);
        let at: Vec<(i64, i64)> = j.records().iter().map(|(s, r)| (*s, r.at)).collect();
        assert_eq!(at, vec![(1, 1), (2, 4)]);
        // A synced append makes the lazy ones before it durable too.
        j.append_unsynced(&[rec(6)], &[]).unwrap();
        j.append(&[rec(7)], &[]).unwrap();
        assert_eq!(j.lose_unsynced(), 0);
        assert_eq!(j.records().len(), 4);
    }
}
