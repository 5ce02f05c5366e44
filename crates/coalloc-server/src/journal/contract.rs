//! What every [`Store`] promises, as tests any implementation runs (issue 32, item 1):
//! SQLite's and the in-memory journal's unit tests run them, and so does the PostgreSQL
//! journal's test against a real cluster (coalloc-testkit's `tests/postgres_store.rs`).
//! Each check panics, with what differed, when the store breaks the promise.

use super::{Record, ReplayError, Store};
use crate::entry::Entry;
use crate::history::HistoryRow;

/// The stores a check runs on.
pub trait Subject {
    /// A new, empty store, called `tag` (each check uses tags of its own).
    fn fresh(&mut self, tag: &str) -> Box<dyn Store>;
    /// Store `tag` opened again, as by a restart (the previous one has been dropped).
    fn reopen(&mut self, tag: &str) -> Box<dyn Store>;
}

/// Run every check.
pub fn all(s: &mut dyn Subject) {
    records_survive_a_reopen_in_order(s);
    unsynced_appends_are_numbered_and_kept_in_order(s);
    compaction_deletes_what_a_snapshot_covers_and_numbering_goes_on(s);
    history_rows_do_not_move_the_last_entry_number(s);
    a_refused_record_stops_the_replay_with_its_number(s);
}

/// Every record after `after`, with its number.
pub fn read(j: &dyn Store, after: i64) -> Vec<(i64, Record)> {
    let mut out = Vec::new();
    j.replay_after(after, &mut |seq, r| {
        out.push((seq, r));
        Ok(())
    })
    .expect("the journal reads");
    out
}

fn rec(at: i64, entry: Entry) -> Record {
    Record { at, entry }
}

/// An ended job's history row.
pub fn row(job: u64) -> HistoryRow {
    HistoryRow {
        job,
        user: Some("ann".into()),
        name: None,
        state: "cancelled".into(),
        submit: 0,
        end: Some(1),
        view: "{}".into(),
    }
}

pub fn records_survive_a_reopen_in_order(s: &mut dyn Subject) {
    let mut j = s.fresh("reopen");
    assert_eq!(j.last_seq(), 0);
    assert!(read(&*j, 0).is_empty());
    let recs = vec![rec(5, Entry::Tick), rec(7, Entry::Cancel { job: 3 })];
    j.append(&recs, &[]).unwrap();
    j.append(&[rec(9, Entry::Started { launch: 4 })], &[])
        .unwrap();
    assert_eq!(j.last_seq(), 3);
    drop(j);
    let j = s.reopen("reopen");
    assert_eq!(j.last_seq(), 3);
    let back = read(&*j, 0);
    let seqs: Vec<i64> = back.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
    assert_eq!(back[0].1, recs[0]);
    assert_eq!(back[1].1, recs[1]);
    assert_eq!(back[2].1.entry, Entry::Started { launch: 4 });
    // After a number: only those after it.
    let tail: Vec<i64> = read(&*j, 2).iter().map(|(s, _)| *s).collect();
    assert_eq!(tail, vec![3]);
}

pub fn unsynced_appends_are_numbered_and_kept_in_order(s: &mut dyn Subject) {
    let mut j = s.fresh("unsynced");
    let ready = |at: i64| rec(at, Entry::Ready { launch: at as u64 });
    j.append_unsynced(&[ready(1)], &[]).unwrap();
    // Numbered like any other entry, and read back before any sync.
    assert_eq!(j.last_seq(), 1);
    assert_eq!(read(&*j, 0).len(), 1);
    j.sync().unwrap();
    j.append_unsynced(&[ready(2), ready(3)], &[]).unwrap();
    // A durable append after them makes them durable too.
    j.append(&[ready(4)], &[]).unwrap();
    j.append_unsynced(&[ready(5)], &[]).unwrap();
    j.sync().unwrap();
    // Nothing waits: a no-op.
    j.sync().unwrap();
    assert_eq!(j.last_seq(), 5);
    drop(j);
    let j = s.reopen("unsynced");
    let back: Vec<(i64, i64)> = read(&*j, 0).iter().map(|(s, r)| (*s, r.at)).collect();
    assert_eq!(back, vec![(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]);
}

pub fn compaction_deletes_what_a_snapshot_covers_and_numbering_goes_on(s: &mut dyn Subject) {
    let mut j = s.fresh("compact");
    let recs: Vec<Record> = (1..=5).map(|at| rec(at, Entry::Tick)).collect();
    j.append(&recs, &[]).unwrap();
    assert_eq!(j.compact_before(4).unwrap(), 3);
    let left: Vec<i64> = read(&*j, 0).iter().map(|(s, _)| *s).collect();
    assert_eq!(left, vec![4, 5]);
    // Nothing more to delete below 4.
    assert_eq!(j.compact_before(4).unwrap(), 0);
    assert_eq!(j.compact_before(5).unwrap(), 1);
    drop(j);
    let mut j = s.reopen("compact");
    // Entry 5 is kept: the next number is 6, never one a snapshot covered.
    assert_eq!(j.last_seq(), 5);
    j.append(&[rec(6, Entry::Tick)], &[]).unwrap();
    assert_eq!(j.last_seq(), 6);
    let left: Vec<(i64, i64)> = read(&*j, 0).iter().map(|(s, r)| (*s, r.at)).collect();
    assert_eq!(left, vec![(5, 5), (6, 6)]);
}

/// The number of the last entry stays the journal's when a commit writes history rows
/// (more of them than entries, or none of the entries).
pub fn history_rows_do_not_move_the_last_entry_number(s: &mut dyn Subject) {
    let mut j = s.fresh("history");
    let forget = |jobs: Vec<u64>| rec(1, Entry::Forget { jobs });
    let rows: Vec<HistoryRow> = (1..=50).map(row).collect();
    j.append(&[forget((1..=50).collect())], &rows).unwrap();
    assert_eq!(j.last_seq(), 1);
    j.append(&[], &[row(51)]).unwrap();
    assert_eq!(j.last_seq(), 1);
    j.append(&[forget(vec![52]), forget(vec![53])], &[row(52), row(53)])
        .unwrap();
    assert_eq!(j.last_seq(), 3);
    drop(j);
    assert_eq!(s.reopen("history").last_seq(), 3);
}

pub fn a_refused_record_stops_the_replay_with_its_number(s: &mut dyn Subject) {
    let mut j = s.fresh("refused");
    let recs: Vec<Record> = (1..=4).map(|at| rec(at, Entry::Tick)).collect();
    j.append(&recs, &[]).unwrap();
    let mut seen = Vec::new();
    let e = j
        .replay_after(0, &mut |seq, _| {
            seen.push(seq);
            if seq == 3 {
                Err("no".into())
            } else {
                Ok(())
            }
        })
        .unwrap_err();
    assert!(
        matches!(&e, ReplayError::Record(3, m) if m == "no"),
        "{e:?}"
    );
    assert_eq!(seen, vec![1, 2, 3]);
    // The store is still usable after a replay cut short.
    j.append(&[rec(5, Entry::Tick)], &[]).unwrap();
    assert_eq!(read(&*j, 3).len(), 2);
}
