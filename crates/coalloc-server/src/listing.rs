//! Listing jobs a page at a time: the query of `GET /v1/jobs` and `GET /v1/history` (filters
//! on state, user, name and submit time; a cursor), checked once into a [`JobFilter`] that
//! both the live listing (the driver's job table) and the history table (SQLite) apply.
//!
//! The cursor is a job number: a page holds jobs numbered after `after`, in number order,
//! and its `next` is where the following page starts. Jobs are numbered in submission order
//! and never renumbered, so walking the pages returns every job exactly once even while
//! jobs are being submitted (a job submitted meanwhile is on a later page).

use crate::msg::ApiError;
use serde::Deserialize;

/// Jobs in a page unless the query asks for fewer.
pub const DEFAULT_LIMIT: usize = 1_000;
/// The most jobs a page holds (about 300 bytes each in JSON: far below any body limit).
pub const MAX_LIMIT: usize = 10_000;

/// The states a job is listed under (`JobView::state`).
pub const STATES: [&str; 6] = [
    "queued", "claiming", "starting", "running", "finished", "failed",
];

/// The query string of the job listings.
#[derive(Debug, Default, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct JobsQuery {
    /// Comma-separated states: queued, claiming, starting, running, finished, failed;
    /// `pending` (queued, claiming, starting), `active` (pending and running), `ended`
    /// (finished, failed), `all`. Default: all.
    pub state: Option<String>,
    /// Only the jobs of this user.
    #[serde(alias = "owner")]
    pub user: Option<String>,
    /// Only the jobs of this name.
    pub name: Option<String>,
    /// Only jobs submitted at or after this time (milliseconds since the Unix epoch).
    pub since: Option<i64>,
    /// The cursor: only jobs numbered after this one (the last page's `next`).
    pub after: Option<u64>,
    /// At most this many jobs (default 1000, at most 10000).
    pub limit: Option<usize>,
}

/// A checked [`JobsQuery`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFilter {
    /// Indexes into [`STATES`] of the states wanted, ascending (every state: all six).
    pub states: Vec<usize>,
    pub user: Option<String>,
    pub name: Option<String>,
    pub since: Option<i64>,
    pub after: u64,
    pub limit: usize,
}

impl Default for JobFilter {
    fn default() -> JobFilter {
        JobFilter {
            states: (0..STATES.len()).collect(),
            user: None,
            name: None,
            since: None,
            after: 0,
            limit: DEFAULT_LIMIT,
        }
    }
}

impl JobsQuery {
    /// Check the query: a 400 names what is wrong.
    pub fn filter(&self) -> Result<JobFilter, ApiError> {
        let mut states = Vec::new();
        for word in self.state.iter().flat_map(|s| s.split(',')) {
            let word = word.trim().to_ascii_lowercase();
            let group: &[&str] = match word.as_str() {
                "" => &[],
                "all" => &STATES,
                "pending" => &STATES[..3],
                "active" => &STATES[..4],
                "ended" => &STATES[4..],
                w => match STATES.iter().position(|s| *s == w) {
                    Some(i) => &STATES[i..=i],
                    None => {
                        return Err(ApiError::bad(format!(
                            "unknown state `{w}` (queued, claiming, starting, running, finished, failed, pending, active, ended, all)"
                        )))
                    }
                },
            };
            states.extend(
                group
                    .iter()
                    .map(|g| STATES.iter().position(|s| s == g).unwrap_or(0)),
            );
        }
        states.sort_unstable();
        states.dedup();
        if states.is_empty() {
            states = (0..STATES.len()).collect();
        }
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 || limit > MAX_LIMIT {
            return Err(ApiError::bad(format!(
                "limit must be between 1 and {MAX_LIMIT}, not {limit}"
            )));
        }
        Ok(JobFilter {
            states,
            user: self.user.clone(),
            name: self.name.clone(),
            since: self.since,
            after: self.after.unwrap_or(0),
            limit,
        })
    }
}

impl JobFilter {
    /// Whether a job in this state is wanted.
    pub fn wants_state(&self, state: &str) -> bool {
        self.states.iter().any(|&i| STATES[i] == state)
    }

    /// Whether any of these states is wanted.
    pub fn wants_any(&self, states: &[&str]) -> bool {
        states.iter().any(|s| self.wants_state(s))
    }

    /// Whether a job of this user, name and submit time passes the other filters.
    pub fn matches(&self, user: Option<&str>, name: Option<&str>, submit: i64) -> bool {
        self.user.as_deref().is_none_or(|u| user == Some(u))
            && self.name.as_deref().is_none_or(|n| name == Some(n))
            && self.since.is_none_or(|t| submit >= t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(state: &str) -> JobsQuery {
        JobsQuery {
            state: Some(state.into()),
            ..JobsQuery::default()
        }
    }

    #[test]
    fn state_words_and_groups_become_sorted_indexes() {
        assert_eq!(q("active").filter().unwrap().states, vec![0, 1, 2, 3]);
        assert_eq!(q("failed,queued").filter().unwrap().states, vec![0, 5]);
        assert_eq!(q("ended, RUNNING").filter().unwrap().states, vec![3, 4, 5]);
        assert_eq!(q("").filter().unwrap().states, (0..6).collect::<Vec<_>>());
        let e = q("runing").filter().unwrap_err();
        assert_eq!(e.status, 400);
        assert!(
            e.message.starts_with("unknown state `runing`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn limits_are_bounded() {
        let over = JobsQuery {
            limit: Some(MAX_LIMIT + 1),
            ..JobsQuery::default()
        };
        assert_eq!(over.filter().unwrap_err().status, 400);
        assert_eq!(JobsQuery::default().filter().unwrap(), JobFilter::default());
    }

    #[test]
    fn user_name_and_since_filter() {
        let f = JobsQuery {
            user: Some("ann".into()),
            since: Some(100),
            ..JobsQuery::default()
        }
        .filter()
        .unwrap();
        assert!(f.matches(Some("ann"), None, 100));
        assert!(!f.matches(Some("bob"), None, 200));
        assert!(!f.matches(None, None, 200));
        assert!(!f.matches(Some("ann"), None, 99));
    }
}
