//! The filters `coalloc status` and `coalloc history` share (state, user, name, since), as
//! the query of the server's job listings, and the printing of a listing page by page.

use crate::client::Client;
use crate::error::CliError;
use crate::jobs_cmd::{job_rows, JOB_HEADER};
use crate::table::Streamed;
use clap::Args;
use coalloc_core::spec::units::{parse_duration, Scalar};
use serde_json::Value;
use std::io::Write;

#[derive(Args, Debug, Clone)]
pub struct ListArgs {
    /// Only jobs in these states, comma-separated: queued, claiming, starting, running,
    /// finished, failed; or pending (queued, claiming, starting), active (pending and
    /// running), ended (finished, failed), all.
    #[arg(long, value_name = "STATES")]
    pub state: Option<String>,
    /// Only the jobs of this user.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Only the jobs of this name.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Only jobs submitted since T: a time in milliseconds since the Unix epoch (12 digits
    /// or more), or a duration back from now (`90s`, `2h`, `1d`; a bare number is seconds).
    #[arg(long, value_name = "T")]
    pub since: Option<String>,
    /// Print JSON: one array of the jobs, written a page at a time.
    #[arg(long)]
    pub json: bool,
}

/// `--since` as milliseconds since the Unix epoch.
fn since_ms(t: &str, now: i64) -> Result<i64, CliError> {
    let t = t.trim();
    if let Ok(ms) = t.parse::<i64>() {
        if t.len() >= 12 {
            return Ok(ms);
        }
    }
    parse_duration(&Scalar::Str(t.into()))
        .map(|d| now - d)
        .map_err(|e| {
            CliError::bad(format!(
                "--since: {e}; or milliseconds since the Unix epoch"
            ))
        })
}

impl ListArgs {
    /// The query string, with `default_state` when no `--state` is given.
    pub fn query(&self, default_state: &str) -> Result<Vec<(&'static str, String)>, CliError> {
        let mut q = vec![(
            "state",
            self.state.clone().unwrap_or_else(|| default_state.into()),
        )];
        if let Some(u) = &self.user {
            q.push(("user", u.clone()));
        }
        if let Some(n) = &self.name {
            q.push(("name", n.clone()));
        }
        if let Some(t) = &self.since {
            q.push((
                "since",
                since_ms(t, coalloc_server::driver::wall_ms())?.to_string(),
            ));
        }
        Ok(q)
    }

    /// Print every page of the listing at `path` as it comes: a table, or a JSON array.
    pub fn print(&self, client: &Client, path: &str, default_state: &str) -> Result<(), CliError> {
        let query = self.query(default_state)?;
        let mut out = std::io::stdout().lock();
        let mut table = Streamed::new(&JOB_HEADER);
        let mut first = true;
        let io = |e: std::io::Error| CliError::Internal(format!("writing: {e}"));
        if self.json {
            write!(out, "[").map_err(io)?;
        }
        client.pages(path, &query, |jobs| {
            if self.json {
                for j in jobs {
                    let sep = if first { "\n" } else { ",\n" };
                    first = false;
                    write!(out, "{sep}{j}").map_err(io)?;
                }
            } else {
                let rows = job_rows(&Value::from(jobs.to_vec()));
                if first || !rows.is_empty() {
                    first = false;
                    write!(out, "{}", table.page(&rows)).map_err(io)?;
                }
            }
            out.flush().map_err(io)
        })?;
        if self.json {
            writeln!(out, "{}]", if first { "" } else { "\n" }).map_err(io)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::since_ms;

    #[test]
    fn since_is_a_time_or_a_duration_back() {
        assert_eq!(since_ms("1764078000000", 0).unwrap(), 1_764_078_000_000);
        assert_eq!(since_ms("2h", 10_000_000).unwrap(), 10_000_000 - 7_200_000);
        assert_eq!(since_ms("90", 100_000).unwrap(), 10_000);
        assert!(since_ms("yesterday", 0).is_err());
    }
}
