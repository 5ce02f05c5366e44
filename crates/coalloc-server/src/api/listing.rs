//! Listing routes: a page of the jobs in memory (`GET /v1/jobs`) and of the history of
//! ended jobs that left memory (`GET /v1/history`), with the same filters and cursor
//! ([`crate::listing`]).

use super::auth::own_listing;
use super::AppState;
use crate::history::{HistoryError, HistoryRead};
use crate::listing::{JobFilter, JobsQuery};
use crate::msg::{ApiError, Request};
use crate::users::Caller;
use crate::views::{ErrorBody, JobList};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::Json;

/// A page of the jobs in memory (queued, running, and ended ones until they age out into
/// the history), by number, with their components' sites and states; filters on state,
/// user, name and submit time; `next` is the cursor of the following page.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs", params(JobsQuery), security(("token" = [])),
    responses(
        (status = 200, description = "a page of jobs", body = JobList),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
    ))]
pub async fn list(
    State(s): State<AppState>,
    caller: Caller,
    query: Result<Query<JobsQuery>, QueryRejection>,
) -> Result<Json<JobList>, ApiError> {
    let mut filter = query_filter(query)?;
    own_listing(&caller, &mut filter)?;
    Ok(Json(s.ask(|reply| Request::Jobs { filter, reply }).await?))
}

/// A listing's query, checked.
pub(super) fn query_filter(
    query: Result<Query<JobsQuery>, QueryRejection>,
) -> Result<JobFilter, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad(e.body_text()))?;
    q.filter()
}

/// A page of the ended jobs that have left memory (older than the server's `min_job_age`),
/// by number: their last view, with the same filters and cursor as `GET /v1/jobs`.
#[utoipa::path(get, path = "/v1/history", tag = "jobs", params(JobsQuery), security(("token" = [])),
    responses(
        (status = 200, description = "a page of ended jobs", body = JobList),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
    ))]
pub async fn history(
    State(s): State<AppState>,
    caller: Caller,
    query: Result<Query<JobsQuery>, QueryRejection>,
) -> Result<Json<JobList>, ApiError> {
    let mut filter = query_filter(query)?;
    own_listing(&caller, &mut filter)?;
    read_history(&s, move |h| h.page(&filter)).await.map(Json)
}

/// Read the history on a blocking thread (a query never holds up the async workers).
pub(super) async fn read_history<T: Send + 'static>(
    s: &AppState,
    read: impl FnOnce(&dyn HistoryRead) -> Result<T, HistoryError> + Send + 'static,
) -> Result<T, ApiError> {
    let history = s.history.clone();
    tokio::task::spawn_blocking(move || read(&*history))
        .await
        .map_err(|e| ApiError::new(500, e.to_string()))?
        .map_err(|e| ApiError::new(500, e.to_string()))
}
