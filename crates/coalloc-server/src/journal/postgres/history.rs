//! The history of ended jobs in PostgreSQL: its rows written in the journal's transactions
//! ([`Rows`]), and the API's reader ([`PgHistory`]) on a connection of its own, as SQLite's
//! (`crate::history`).

use super::conn::{Conn, Gone};
use crate::history::{page_of, state_list, HistoryError, HistoryRead, HistoryRow};
use crate::listing::JobFilter;
use crate::views::{JobList, JobView};

/// History rows as the columns' arrays of one insert (the last row of a job wins, as
/// SQLite's `INSERT OR REPLACE`).
pub(super) struct Rows {
    job: Vec<i64>,
    user: Vec<Option<String>>,
    name: Vec<Option<String>>,
    state: Vec<String>,
    submit: Vec<i64>,
    end: Vec<Option<i64>>,
    view: Vec<String>,
}

impl Rows {
    pub(super) fn of(rows: &[HistoryRow]) -> Rows {
        let last: std::collections::BTreeMap<u64, &HistoryRow> =
            rows.iter().map(|r| (r.job, r)).collect();
        let rows: Vec<&HistoryRow> = last.into_values().collect();
        Rows {
            job: rows.iter().map(|r| r.job as i64).collect(),
            user: rows.iter().map(|r| r.user.clone()).collect(),
            name: rows.iter().map(|r| r.name.clone()).collect(),
            state: rows.iter().map(|r| r.state.clone()).collect(),
            submit: rows.iter().map(|r| r.submit).collect(),
            end: rows.iter().map(|r| r.end).collect(),
            view: rows.iter().map(|r| r.view.clone()).collect(),
        }
    }

    /// Write them inside the journal's transaction.
    pub(super) fn insert(&self, tx: &mut postgres::Transaction<'_>) -> Result<(), postgres::Error> {
        if self.job.is_empty() {
            return Ok(());
        }
        tx.execute(
            r#"INSERT INTO history (job, "user", name, state, submit, end_at, view)
               SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::int8[],
                                    $6::int8[], $7::text[])
               ON CONFLICT (job) DO UPDATE SET "user" = excluded."user", name = excluded.name,
                   state = excluded.state, submit = excluded.submit, end_at = excluded.end_at,
                   view = excluded.view"#,
            &[
                &self.job,
                &self.user,
                &self.name,
                &self.state,
                &self.submit,
                &self.end,
                &self.view,
            ],
        )?;
        Ok(())
    }
}

/// The API's reader of the history table.
pub struct PgHistory {
    conn: Conn,
    shown: String,
}

impl PgHistory {
    /// Connect to `url` (the journal has made the table, or will before anything is read).
    pub fn open(url: &str) -> Result<PgHistory, super::JournalError> {
        let shown = super::shown(url);
        let conn = Conn::open(url).map_err(|source| super::JournalError::Postgres {
            url: shown.clone(),
            source,
        })?;
        Ok(PgHistory { conn, shown })
    }

    fn err(&self, message: String) -> HistoryError {
        HistoryError {
            path: self.shown.clone(),
            message,
        }
    }

    /// `(job, view)` rows of a query.
    fn rows(
        &self,
        sql: String,
        args: impl FnOnce() -> Vec<Box<dyn postgres::types::ToSql + Sync + Send>> + Send + 'static,
    ) -> Result<Vec<(i64, String)>, HistoryError> {
        self.conn
            .call(move |c| {
                let args = args();
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    args.iter().map(|a| &**a as _).collect();
                let rows = c.query(&sql, &refs)?;
                Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
            })
            .map_err(|Gone| self.err("the connection's thread is gone".into()))?
            .map_err(|e: postgres::Error| self.err(e.to_string()))
    }
}

impl HistoryRead for PgHistory {
    fn get(&self, job: u64) -> Result<Option<JobView>, HistoryError> {
        let rows = self.rows(
            "SELECT job, view FROM history WHERE job = $1".into(),
            move || vec![Box::new(job as i64)],
        )?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|(_, t)| serde_json::from_str(&t).ok()))
    }

    fn page(&self, f: &JobFilter) -> Result<JobList, HistoryError> {
        let sql = format!(
            r#"SELECT job, view FROM history
               WHERE job > $1 AND state IN ({})
                 AND ($2::text IS NULL OR "user" = $2) AND ($3::text IS NULL OR name = $3)
                 AND ($4::int8 IS NULL OR submit >= $4)
               ORDER BY job LIMIT $5"#,
            state_list(f)
        );
        let (after, user, name, since, limit) = (
            f.after as i64,
            f.user.clone(),
            f.name.clone(),
            f.since,
            f.limit as i64 + 1,
        );
        let rows = self.rows(sql, move || {
            vec![
                Box::new(after),
                Box::new(user),
                Box::new(name),
                Box::new(since),
                Box::new(limit),
            ]
        })?;
        Ok(page_of(rows, f.limit))
    }
}
