//! The history of ended jobs (like Slurm's accounting, `sacct`): a table beside the journal,
//! in the same SQLite file. An ended job leaves the driver's memory once it is older than
//! `min_job_age`; its last view (`GET /v1/jobs/{id}`'s answer) is written here in the very
//! transaction that journals its `forget` entry, so a crash leaves it either in memory or
//! here, never lost and never in both.
//!
//! The API reads the table through a connection of its own ([`History`]): WAL mode lets it
//! read while the driver writes, and a history query never holds the driver up. It sees
//! the reader through [`HistoryRead`], the storage seam's part for the history (issue 32,
//! item 1): with a PostgreSQL journal the table is the database's, and so is its reader
//! (`journal::postgres::PgHistory`).

use crate::listing::{JobFilter, STATES};
use crate::views::{JobList, JobView};
use rusqlite::{params, params_from_iter, Connection, OpenFlags, OptionalExtension, Transaction};
use std::path::Path;
use std::sync::Mutex;

/// The table (made with the journal's).
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS history (
        job    INTEGER PRIMARY KEY,
        user   TEXT,
        name   TEXT,
        state  TEXT NOT NULL,
        submit INTEGER NOT NULL,
        end_at INTEGER,
        view   TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS history_user ON history (user, job);";

/// One ended job, as the history keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryRow {
    pub job: u64,
    pub user: Option<String>,
    pub name: Option<String>,
    pub state: String,
    pub submit: i64,
    pub end: Option<i64>,
    /// The job's [`JobView`] in JSON.
    pub view: String,
}

impl HistoryRow {
    pub fn of(v: &JobView) -> HistoryRow {
        HistoryRow {
            job: v.id,
            user: v.user.clone(),
            name: v.name.clone(),
            state: v.state.clone(),
            submit: v.submit,
            end: v.end,
            view: serde_json::to_string(v).expect("views serialize"),
        }
    }
}

/// Write rows inside the journal's transaction.
pub fn insert(tx: &Transaction, rows: &[HistoryRow]) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT OR REPLACE INTO history (job, user, name, state, submit, end_at, view)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for r in rows {
        stmt.execute(params![
            r.job as i64,
            r.user,
            r.name,
            r.state,
            r.submit,
            r.end,
            r.view
        ])?;
    }
    Ok(())
}

/// Why the history could not be read.
#[derive(Debug, thiserror::Error)]
#[error("history {path}: {message}")]
pub struct HistoryError {
    pub path: String,
    pub message: String,
}

/// What the API asks of the history.
pub trait HistoryRead: Send + Sync {
    /// One ended job, if the history has it.
    fn get(&self, job: u64) -> Result<Option<JobView>, HistoryError>;
    /// One page of the ended jobs that pass `f`, by number.
    fn page(&self, f: &JobFilter) -> Result<JobList, HistoryError>;
}

/// The states `f` wants, as an SQL list of the listing's own words (never the client's
/// text): `'queued','running'`.
pub(crate) fn state_list(f: &JobFilter) -> String {
    let states: Vec<String> = f
        .states
        .iter()
        .map(|&i| format!("'{}'", STATES[i]))
        .collect();
    states.join(",")
}

/// A page of `(job, view)` rows read in order, at most `limit + 1` of them: the views, and
/// the cursor of the next page if there were more.
pub(crate) fn page_of(rows: impl IntoIterator<Item = (i64, String)>, limit: usize) -> JobList {
    let mut jobs = Vec::new();
    let mut next = None;
    for (job, text) in rows {
        if jobs.len() == limit {
            next = jobs.last().map(|j: &JobView| j.id);
            break;
        }
        match serde_json::from_str::<JobView>(&text) {
            Ok(v) => jobs.push(v),
            Err(e) => tracing::warn!(job, "history: a row that does not read: {e}"),
        }
    }
    JobList { jobs, next }
}

/// The API's reader of the history table.
pub struct History {
    conn: Mutex<Connection>,
    path: String,
}

impl History {
    /// Open the journal file read-only (the driver has made the table).
    pub fn open(path: &Path) -> Result<History, HistoryError> {
        let p = path.display().to_string();
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| HistoryError {
            path: p.clone(),
            message: source.to_string(),
        })?;
        Ok(History {
            conn: Mutex::new(conn),
            path: p,
        })
    }

    fn err(&self, source: rusqlite::Error) -> HistoryError {
        HistoryError {
            path: self.path.clone(),
            message: source.to_string(),
        }
    }
}

impl HistoryRead for History {
    fn get(&self, job: u64) -> Result<Option<JobView>, HistoryError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let text: Option<String> = conn
            .query_row(
                "SELECT view FROM history WHERE job = ?1",
                [job as i64],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    fn page(&self, f: &JobFilter) -> Result<JobList, HistoryError> {
        let sql = format!(
            "SELECT job, view FROM history
             WHERE job > ?1 AND state IN ({})
               AND (?2 IS NULL OR user = ?2) AND (?3 IS NULL OR name = ?3)
               AND (?4 IS NULL OR submit >= ?4)
             ORDER BY job LIMIT ?5",
            state_list(f)
        );
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let args: [rusqlite::types::Value; 5] = [
            (f.after as i64).into(),
            f.user.clone().into(),
            f.name.clone().into(),
            f.since.into(),
            (f.limit as i64 + 1).into(),
        ];
        let rows = stmt
            .query_map(params_from_iter(args), |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| self.err(e))?;
        let rows = rows
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        Ok(page_of(rows, f.limit))
    }
}
