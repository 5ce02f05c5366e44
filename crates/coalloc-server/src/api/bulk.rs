//! Routes on many jobs at once: a batch submission (`POST /v1/jobs/batch`) and the
//! cancellation of a job array's elements (`DELETE /v1/arrays/{id}`; arrays are submitted
//! with `POST /v1/jobs?array=A-B`, see [`crate::driver::arrays`]).

use super::auth::{may_touch, owned, owner_of};
use super::AppState;
use crate::driver::arrays::parse_indexes;
use crate::msg::{ApiError, Request};
use crate::users::Caller;
use crate::views::{ArrayCancelled, BatchBody, BatchError, BatchSubmitted, ErrorBody};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;

/// The most jobs one batch may hold.
const MAX_BATCH: usize = 100_000;

/// Submit many jobs in one request (the native spec in JSON, each): they are journaled in
/// one transaction and numbered in the batch's order. A batch with a job that does not
/// parse is refused whole (400, naming the job); a job the scheduler refuses is `null` in
/// the answer, with its reason in `errors`.
#[utoipa::path(post, path = "/v1/jobs/batch", tag = "jobs", security(("token" = [])),
    request_body = BatchBody,
    responses(
        (status = 201, description = "submitted", body = BatchSubmitted),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
    ))]
pub async fn batch(
    State(s): State<AppState>,
    caller: Caller,
    body: String,
) -> Result<(StatusCode, Json<BatchSubmitted>), ApiError> {
    let b: BatchBody =
        serde_json::from_str(&body).map_err(|e| ApiError::bad(format!("batch: {e}")))?;
    if b.jobs.len() > MAX_BATCH {
        return Err(ApiError::bad(format!(
            "batch: {} jobs; at most {MAX_BATCH} in one request",
            b.jobs.len()
        )));
    }
    let jobs = b
        .jobs
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            coalloc_core::spec::native::from_json_value(v)
                .map_err(|e| ApiError::bad(format!("batch: job {i}: {e}")))
                .and_then(|j| owned(&caller, j))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let answers = s.ask(|reply| Request::Submit { jobs, reply }).await?;
    let mut errors = Vec::new();
    let jobs = answers
        .into_iter()
        .enumerate()
        .map(|(index, a)| {
            // A job beyond the queue cap waits for admission; its number is all a batch says.
            a.map(|(id, _awaiting)| id)
                .map_err(|error| errors.push(BatchError { index, error }))
                .ok()
        })
        .collect();
    Ok((StatusCode::CREATED, Json(BatchSubmitted { jobs, errors })))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ArrayQuery {
    /// Only the elements of these indexes, `A-B` (inclusive) or `A`; default: every one.
    indexes: Option<String>,
}

/// Cancel an array's elements (every one, or those of `indexes`) that have not ended, in one
/// request; the array is known by its first job's number.
#[utoipa::path(delete, path = "/v1/arrays/{id}", tag = "jobs", params(("id" = u64, Path, description = "the array's first job"), ArrayQuery), security(("token" = [])),
    responses(
        (status = 200, description = "cancelled", body = ArrayCancelled),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such array", body = ErrorBody),
    ))]
pub async fn cancel_array(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<u64>,
    query: Result<Query<ArrayQuery>, QueryRejection>,
) -> Result<Json<ArrayCancelled>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad(e.body_text()))?;
    may_touch(&caller, id, owner_of(&s, id).await?.as_deref())?;
    let indexes = q
        .indexes
        .as_deref()
        .map(parse_indexes)
        .transpose()
        .map_err(ApiError::bad)?;
    let cancelled = s
        .ask(|reply| Request::CancelArray {
            first: id,
            indexes,
            reply,
        })
        .await??;
    Ok(Json(ArrayCancelled {
        array: id,
        cancelled,
    }))
}
