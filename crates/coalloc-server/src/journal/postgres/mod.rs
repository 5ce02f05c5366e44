//! The PostgreSQL journal (issue 32, item 1): `server.journal = "postgres://user@host/db"`.
//! One database holds what the state directory holds with SQLite: the journal, the jobs a
//! compaction took out of it (`submitted`), the history of ended jobs (`history`, written in
//! the journal's transactions), the newest snapshot (`snapshot`, `postgres::snapshots`), and the
//! lease and the tag in launches' names that its servers share (`lease`, `tag`: [`lease`]).
//!
//! Durability: a durable append ([`PgJournal::append`]) is one transaction committed with
//! `synchronous_commit = on` (the session's setting, made so at connect): PostgreSQL has
//! flushed its WAL when the commit returns, so a submission is acknowledged only after it is
//! on the database's disk, as with SQLite's `synchronous = FULL`. One transaction holds the
//! whole batch of the driver's turn (group commit, as with SQLite). An unsynced append
//! ([`PgJournal::append_unsynced`]) is a transaction with `SET LOCAL synchronous_commit =
//! off`: committed and visible at once, and kept if the server dies, but lost if the
//! database's host does before its WAL writer flushes (within `wal_writer_delay`, 200 ms by
//! default), the last ones first. [`PgJournal::sync`] makes them durable with a durable
//! commit of its own (the lease's heartbeat, below): flushing the WAL up to that commit
//! flushes everything before it. So the promise is SQLite's: what was told to anyone was
//! durable first.
//!
//! Fencing and the lease (issue 32, item 2): the `lease` table's one row carries a fencing
//! number, `epoch`. A server takes the lease by raising it ([`PgJournal::lead`], waiting as
//! a standby while another holds it; [`lease`] says when it may), and every write (append,
//! sync, compaction, snapshot) checks, in its transaction, that the lease is still at the
//! number it took (`SELECT ... FOR KEY SHARE`: a server that raises the number locks the
//! row `FOR UPDATE` first, so it waits for the transactions that checked it, and every later
//! check sees the new one). The lease's renewals and heartbeats (`UPDATE`s that change no
//! key) do not wait for them: a snapshot's transaction of seconds would otherwise hold the
//! renewals back until the leader, loaded, gave its lease up (seen in bench/scale.sh runs
//! with the default term of 3 s, bench/RESULTS.md). A server whose
//! lease another took is refused ([`JournalError::Fenced`]) and writes nothing more; its
//! driver stops as on any journal error. Each entry also records the epoch it was written
//! under. [`PgJournal::open`] takes the lease unconditionally and does not renew it (tests
//! and tools; any server may take it from such a journal).
//!
//! Entries are numbered by the journal (`seq`, one after the last), not by a sequence: a
//! second writer's numbers would collide with the primary key even without the fence.

mod conn;
mod history;
pub mod lease;
pub mod shared;
mod snapshots;

pub use history::PgHistory;
pub use lease::{Leader, LeaseTerms, OnLost};
pub use shared::SharedFiles;

use super::{JournalError, Record, ReplayError, SnapshotPlace, Store};
use crate::history::HistoryRow;
use conn::{Conn, Gone};
use std::sync::Arc;

/// The tables (made by the first server to open the database).
const SCHEMA: &str = r#"
    CREATE TABLE IF NOT EXISTS lease (
        id     INT PRIMARY KEY CHECK (id = 1),
        epoch  BIGINT NOT NULL,
        holder TEXT NOT NULL,
        since  TIMESTAMPTZ NOT NULL DEFAULT now(),
        beat   TIMESTAMPTZ NOT NULL DEFAULT now(),
        owner  TEXT NOT NULL DEFAULT '',
        url    TEXT NOT NULL DEFAULT '',
        expires TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    INSERT INTO lease (id, epoch, holder) VALUES (1, 0, '') ON CONFLICT (id) DO NOTHING;
    CREATE TABLE IF NOT EXISTS journal (
        seq   BIGINT PRIMARY KEY,
        at    BIGINT NOT NULL,
        entry TEXT NOT NULL,
        epoch BIGINT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS submitted (
        job  BIGSERIAL PRIMARY KEY,
        at   BIGINT NOT NULL,
        spec TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS history (
        job    BIGINT PRIMARY KEY,
        "user" TEXT,
        name   TEXT,
        state  TEXT NOT NULL,
        submit BIGINT NOT NULL,
        end_at BIGINT,
        view   TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS history_user ON history ("user", job);
    CREATE TABLE IF NOT EXISTS tag (
        id       INT PRIMARY KEY CHECK (id = 1),
        name_tag TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS snapshot (
        seq   BIGINT NOT NULL,
        part  INT NOT NULL,
        bytes BYTEA NOT NULL,
        PRIMARY KEY (seq, part)
    );
"#;

/// The advisory lock that makes the tables (two servers starting at once would race on
/// `CREATE TABLE IF NOT EXISTS`).
const SCHEMA_LOCK: i64 = 0x0063_6f61_6c6c_6f63;

/// A connection string as messages show it: without its password.
pub fn shown(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        if let Some((userinfo, host)) = rest.rsplit_once('@') {
            let user = userinfo.split(':').next().unwrap_or_default();
            return format!("{scheme}://{user}@{host}");
        }
        return url.to_string();
    }
    url.split_whitespace()
        .filter(|w| !w.starts_with("password="))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The open journal in PostgreSQL.
pub struct PgJournal {
    conn: Conn,
    /// The connection string without its password.
    shown: String,
    /// The number of the last entry committed (0: none yet).
    last: i64,
    /// The lease's fencing number this journal took at its opening.
    epoch: i64,
    /// Commits made without waiting for the WAL's flush since the last that waited.
    unsynced: bool,
    place: Arc<snapshots::PgPlace>,
    /// The lease's renewals (a journal that leads, [`PgJournal::lead`]).
    renewer: Option<lease::Renewer>,
    /// The launches' name tag of the servers of this database (one that leads).
    name_tag: Option<String>,
}

/// What a fenced transaction ends with: done, or refused by the lease's number now.
type Fenced<T> = Result<T, i64>;

/// Check, inside a transaction, that the lease is still at `epoch`, and hold it there until
/// the commit; the lease's number if it is not.
fn fence(tx: &mut postgres::Transaction<'_>, epoch: i64) -> Result<Fenced<()>, postgres::Error> {
    let now: i64 = tx
        .query_one("SELECT epoch FROM lease WHERE id = 1 FOR KEY SHARE", &[])?
        .get(0);
    Ok(if now == epoch { Ok(()) } else { Err(now) })
}

/// Make the tables if needed (and the lease's columns item 1's tables lack).
fn schema(c: &mut postgres::Client) -> Result<(), postgres::Error> {
    let mut tx = c.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
    tx.batch_execute(SCHEMA)?;
    tx.batch_execute(lease::SCHEMA)?;
    tx.batch_execute(shared::SCHEMA)?;
    tx.commit()
}

/// Try to take the lease ([`lease::take`]) in a transaction of its own.
fn take_lease(
    c: &mut postgres::Client,
    terms: Option<&LeaseTerms>,
    force: bool,
) -> Result<Result<i64, Leader>, postgres::Error> {
    let mut tx = c.transaction()?;
    let taken = lease::take(&mut tx, terms, force)?;
    tx.commit()?;
    Ok(taken)
}

impl PgJournal {
    /// Connect to `url`, make the tables if needed, and take the journal's lease at once,
    /// without renewing it (any journal opened on the database before is deposed: its next
    /// write is refused; any server may take the lease from this one).
    pub fn open(url: &str) -> Result<PgJournal, JournalError> {
        let shown = shown(url);
        let conn = Conn::open(url).map_err(|source| pg_err(&shown, source))?;
        let epoch = conn
            .call(|c| {
                c.batch_execute("SET synchronous_commit = on")?;
                schema(c)?;
                take_lease(c, None, true)
            })
            .map_err(|Gone| gone(&shown))?
            .map_err(|source| pg_err(&shown, source))?
            .expect("a forced take takes the lease");
        PgJournal::opened(url, shown, conn, epoch, None)
    }

    /// Connect to `url`, make the tables if needed, and take the journal's lease on `terms`
    /// ([`lease`]): at once if it is free, else after waiting as a standby, telling
    /// `standby` who leads whenever that changes. The lease is then renewed until this
    /// journal is dropped (which releases it); `on_lost` is called, on the renewals' thread,
    /// if it is lost.
    pub fn lead(
        url: &str,
        terms: &LeaseTerms,
        standby: &mut dyn FnMut(&Leader),
        on_lost: OnLost,
    ) -> Result<PgJournal, JournalError> {
        let shown = shown(url);
        let err = |source| pg_err(&shown, source);
        let mut conn = Conn::open(url).map_err(err)?;
        let ttl = terms.ttl;
        let holder = terms.holder.clone();
        conn.call(move |c| {
            lease::journal_session(c, ttl, &holder)?;
            schema(c)
        })
        .map_err(|Gone| gone(&shown))?
        .map_err(err)?;
        let mut seen: Option<Leader> = None;
        let epoch = loop {
            let t = terms.clone();
            let tried = conn
                .call(move |c| take_lease(c, Some(&t), false))
                .map_err(|Gone| gone(&shown))?;
            match tried {
                Ok(Ok(epoch)) => break epoch,
                Ok(Err(leader)) => {
                    if seen.as_ref() != Some(&leader) {
                        tracing::info!(journal = %shown, epoch = leader.epoch, holder = %leader.holder,
                            leader = %leader.url, "standby: the journal's lease is held by another server");
                        standby(&leader);
                        seen = Some(leader);
                    }
                }
                Err(e) if lease::busy(&e) => {}
                // A standby outlives the database's restarts: it connects again.
                Err(e) if seen.is_some() => {
                    tracing::warn!(journal = %shown, "standby: {e}; trying again");
                    if e.is_closed() {
                        let holder = terms.holder.clone();
                        let again = Conn::open(url).and_then(|c| {
                            c.call(move |c| lease::journal_session(c, ttl, &holder))
                                .map_err(|Gone| e)??;
                            Ok(c)
                        });
                        if let Ok(c) = again {
                            conn = c;
                        }
                    }
                }
                Err(e) => return Err(err(e)),
            }
            std::thread::sleep(lease::poll(ttl));
        };
        let mine = terms.name_tag.clone();
        let tag = conn
            .call(move |c| lease::shared_tag(c, &mine))
            .map_err(|Gone| gone(&shown))?
            .map_err(err)?;
        let renewer =
            lease::Renewer::start(url, shown.clone(), epoch, ttl, on_lost).map_err(err)?;
        let mut j = PgJournal::opened(url, shown, conn, epoch, Some(ttl))?;
        j.renewer = Some(renewer);
        j.name_tag = Some(tag);
        Ok(j)
    }

    /// The journal on `conn`, whose lease is at `epoch`; `ttl`: the lease's term, which
    /// bounds how long a transaction of the snapshots' may idle.
    fn opened(
        url: &str,
        shown: String,
        conn: Conn,
        epoch: i64,
        ttl: Option<std::time::Duration>,
    ) -> Result<PgJournal, JournalError> {
        let last = conn
            .call(|c| {
                let last: i64 = c
                    .query_one("SELECT coalesce(max(seq), 0)::int8 FROM journal", &[])?
                    .get(0);
                Ok(last)
            })
            .map_err(|Gone| gone(&shown))?
            .map_err(|source| pg_err(&shown, source))?;
        tracing::info!(journal = %shown, epoch, last, "PostgreSQL journal opened; lease taken");
        Ok(PgJournal {
            conn,
            place: Arc::new(snapshots::PgPlace::new(url, shown.clone(), epoch, ttl)),
            shown,
            last,
            epoch,
            unsynced: false,
            renewer: None,
            name_tag: None,
        })
    }

    /// The tag in launches' names that every server of this database uses (the first
    /// one's, [`LeaseTerms::name_tag`]); `None` for a journal that does not lead.
    pub fn name_tag(&self) -> Option<&str> {
        self.name_tag.as_deref()
    }

    /// The database's shared files, written under this journal's lease
    /// ([`shared::SharedFiles`]).
    pub fn shared_files(&self) -> SharedFiles {
        SharedFiles::new(self.place.clone(), Some(self.epoch))
    }

    /// The lease's fencing number this journal writes under.
    pub fn epoch(&self) -> i64 {
        self.epoch
    }

    /// Every job submitted, in order: `(time, native spec)` of those a compaction moved to
    /// table `submitted`, then of the `submit` entries still in the journal (as
    /// [`super::Journal::submissions`]).
    pub fn submissions(&self) -> Result<Vec<(i64, String)>, ReplayError<String>> {
        let mut out: Vec<(i64, String)> = self
            .conn
            .call(|c| {
                let rows = c.query("SELECT at, spec FROM submitted ORDER BY job", &[])?;
                Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
            })
            .map_err(|Gone| gone(&self.shown))?
            .map_err(|source| self.err(source))?;
        self.replay_after(0, &mut |_, r| {
            if let crate::entry::Entry::Submit { job, .. } = r.entry {
                out.push((r.at, job));
            }
            Ok(())
        })?;
        Ok(out)
    }

    fn err(&self, source: postgres::Error) -> JournalError {
        pg_err(&self.shown, source)
    }

    /// Run `f` in a transaction on the connection's thread, fenced by the lease; `sync`:
    /// its commit waits for the WAL's flush.
    fn fenced<R: Send + 'static>(
        &self,
        sync: bool,
        f: impl FnOnce(&mut postgres::Transaction<'_>) -> Result<R, postgres::Error> + Send + 'static,
    ) -> Result<R, JournalError> {
        let epoch = self.epoch;
        let out = self
            .conn
            .call(move |c| -> Result<Fenced<R>, postgres::Error> {
                let mut tx = c.transaction()?;
                if !sync {
                    tx.batch_execute("SET LOCAL synchronous_commit = off")?;
                }
                if let Err(now) = fence(&mut tx, epoch)? {
                    return Ok(Err(now));
                }
                let r = f(&mut tx)?;
                tx.commit()?;
                Ok(Ok(r))
            })
            .map_err(|Gone| gone(&self.shown))?
            .map_err(|source| self.err(source))?;
        out.map_err(|now| JournalError::Fenced {
            url: self.shown.clone(),
            mine: self.epoch,
            now,
        })
    }

    /// One transaction of `records` (numbered after the last) and `history`.
    fn commit(
        &mut self,
        records: &[Record],
        history: &[HistoryRow],
        sync: bool,
    ) -> Result<(), JournalError> {
        let n = records.len() as i64;
        let seqs: Vec<i64> = (self.last + 1..=self.last + n).collect();
        let ats: Vec<i64> = records.iter().map(|r| r.at).collect();
        let entries: Vec<String> = records
            .iter()
            .map(|r| serde_json::to_string(&r.entry).expect("entries serialize"))
            .collect();
        let rows = history::Rows::of(history);
        let epoch = self.epoch;
        self.fenced(sync, move |tx| {
            if !seqs.is_empty() {
                tx.execute(
                    "INSERT INTO journal (seq, at, entry, epoch)
                     SELECT s, a, e, $4 FROM unnest($1::int8[], $2::int8[], $3::text[]) AS t(s, a, e)",
                    &[&seqs, &ats, &entries, &epoch],
                )?;
            }
            rows.insert(tx)
        })?;
        self.last += n;
        Ok(())
    }
}

/// A PostgreSQL error of the journal at `shown`.
fn pg_err(shown: &str, source: postgres::Error) -> JournalError {
    JournalError::Postgres {
        url: shown.to_string(),
        source,
    }
}

/// The connection's thread is gone.
fn gone(shown: &str) -> JournalError {
    JournalError::Lost {
        path: shown.to_string(),
        message: "the connection's thread is gone".into(),
    }
}

impl Store for PgJournal {
    fn last_seq(&self) -> i64 {
        self.last
    }

    fn append(&mut self, records: &[Record], history: &[HistoryRow]) -> Result<(), JournalError> {
        if records.is_empty() && history.is_empty() {
            return self.sync();
        }
        self.commit(records, history, true)?;
        // Its commit's flush of the WAL covers the commits before it.
        self.unsynced = false;
        Ok(())
    }

    fn append_unsynced(
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

    /// A durable commit of the lease's heartbeat, fenced like any write: its WAL's flush
    /// makes the unsynced commits before it durable.
    fn sync(&mut self) -> Result<(), JournalError> {
        if !self.unsynced {
            return Ok(());
        }
        self.fenced(true, |tx| {
            tx.execute("UPDATE lease SET beat = now() WHERE id = 1", &[])
                .map(|_| ())
        })?;
        self.unsynced = false;
        Ok(())
    }

    fn replay_after(
        &self,
        after: i64,
        each: &mut dyn FnMut(i64, Record) -> Result<(), String>,
    ) -> Result<usize, ReplayError<String>> {
        type Batch = Result<Vec<(i64, i64, String)>, postgres::Error>;
        // The connection's thread reads the rows a batch at a time (a cursor: the journal
        // is never held in memory whole) while this one decodes and hands them on.
        let (rows, batches) = std::sync::mpsc::sync_channel::<Batch>(4);
        self.conn
            .spawn(move |c| {
                let read = (|| -> Result<(), postgres::Error> {
                    let mut tx = c.transaction()?;
                    let portal = tx.bind(
                        "SELECT seq, at, entry FROM journal WHERE seq > $1 ORDER BY seq",
                        &[&after],
                    )?;
                    loop {
                        let got = tx.query_portal(&portal, 4096)?;
                        if got.is_empty() {
                            return Ok(());
                        }
                        let batch = got.iter().map(|r| (r.get(0), r.get(1), r.get(2)));
                        if rows.send(Ok(batch.collect())).is_err() {
                            // The reader stopped at a record it refused.
                            return Ok(());
                        }
                    }
                })();
                if let Err(e) = read {
                    let _ = rows.send(Err(e));
                }
            })
            .map_err(|Gone| gone(&self.shown))?;
        let mut n = 0;
        for batch in batches {
            for (seq, at, text) in batch.map_err(|source| self.err(source))? {
                super::replay_row(&self.shown, (seq, at, &text), each)?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// As SQLite's: the jobs submitted by the entries that go are kept in `submitted` (no
    /// secret), in one transaction with the deletion; entry `seq` itself stays.
    fn compact_before(&mut self, seq: i64) -> Result<usize, JournalError> {
        let n = self.fenced(true, move |tx| {
            tx.execute(
                "INSERT INTO submitted (at, spec)
                     SELECT at, entry::jsonb ->> 'job' FROM journal
                     WHERE seq < $1 AND entry::jsonb ->> 'e' = 'submit' ORDER BY seq",
                &[&seq],
            )?;
            tx.execute("DELETE FROM journal WHERE seq < $1", &[&seq])
        })?;
        self.unsynced = false;
        Ok(n as usize)
    }

    fn snapshot_place(&self) -> Option<Arc<dyn SnapshotPlace>> {
        Some(self.place.clone())
    }
}
