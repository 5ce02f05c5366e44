//! The component runtime's routes (seed 002 §3.3): barrier check-in, held until the job
//! commits or aborts or the hold runs out, and the job-scoped rendezvous store. The wire
//! format is fixed in coalloc-runtime's documentation.

use super::auth::{job_or_admin, job_secret};
use super::AppState;
use crate::msg::{ApiError, BarrierAnswer, Request};
use crate::views::{CheckIn, ErrorBody};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use std::time::Duration;

/// Check in at the job's start barrier: held until the job commits (`released`), aborts
/// (`aborted`) or the hold runs out (`waiting`: ask again).
#[utoipa::path(post, path = "/v1/jobs/{id}/barrier", tag = "runtime",
    params(("id" = u64, Path, description = "the job's number")), security(("secret" = []), ("token" = [])),
    request_body = CheckIn,
    responses(
        (status = 200, description = "the barrier's state", body = BarrierAnswer),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "another job's secret or launch", body = ErrorBody),
        (status = 404, description = "no such job or launch", body = ErrorBody),
    ))]
pub async fn barrier(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(job): Path<u64>,
    body: String,
) -> Result<Json<BarrierAnswer>, ApiError> {
    let secret = job_secret(&s, &headers)?;
    let c: CheckIn =
        serde_json::from_str(&body).map_err(|e| ApiError::bad(format!("check-in: {e}")))?;
    // Held until the job commits or aborts this start, or the hold runs out (`waiting`:
    // the caller checks in again).
    let ask = s.ask(|reply| Request::Barrier {
        job,
        secret,
        launch: c.launch,
        local_rank: c.local_rank,
        ok: c.ok,
        reason: c.reason.clone(),
        hold: true,
        reply,
    });
    match tokio::time::timeout(s.hold, ask).await {
        Ok(answer) => Ok(Json(answer??)),
        Err(_) => Ok(Json(BarrierAnswer::Waiting)),
    }
}

/// Put a value in the job's rendezvous store (seed 002 §3.3): the raw body, at most 1 MiB.
#[utoipa::path(put, path = "/v1/jobs/{id}/kv/{key}", tag = "runtime", params(("id" = u64, Path, description = "the job's number"), ("key" = String, Path, description = "1 to 1024 bytes")), security(("secret" = []), ("token" = [])),
    request_body(content = String, content_type = "text/plain", example = json!("10.0.0.5:4040")),
    responses(
        (status = 204, description = "stored"),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "another job's secret or launch", body = ErrorBody),
        (status = 404, description = "no such job or launch", body = ErrorBody),
    ))]
pub async fn kv_put(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path((job, key)): Path<(u64, String)>,
    value: String,
) -> Result<StatusCode, ApiError> {
    job_or_admin(&s, &headers, job).await?;
    if key.is_empty() || key.len() > 1024 || value.len() > 1 << 20 {
        return Err(ApiError::bad(
            "rendezvous keys are 1 to 1024 bytes, values at most 1 MiB",
        ));
    }
    s.ask(|reply| Request::KvPut {
        job,
        key,
        value,
        reply,
    })
    .await??;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct KvQuery {
    /// Wait up to this long for the value (at most the barrier hold).
    wait_ms: Option<u64>,
}

/// Get a value of the job's rendezvous store; `?wait_ms=N` waits for it.
#[utoipa::path(get, path = "/v1/jobs/{id}/kv/{key}", tag = "runtime", params(("id" = u64, Path, description = "the job's number"), ("key" = String, Path, description = "1 to 1024 bytes"), KvQuery),
    security(("secret" = []), ("token" = [])),
    responses(
        (status = 200, description = "the value", body = String, content_type = "text/plain",
            example = json!("10.0.0.5:4040")),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "another job's secret or launch", body = ErrorBody),
        (status = 404, description = "no such job or launch", body = ErrorBody),
    ))]
pub async fn kv_get(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path((job, key)): Path<(u64, String)>,
    Query(q): Query<KvQuery>,
) -> Result<Response, ApiError> {
    job_or_admin(&s, &headers, job).await?;
    let wait = Duration::from_millis(q.wait_ms.unwrap_or(0)).min(s.hold);
    let k = key.clone();
    let ask = s.ask(|reply| Request::KvGet {
        job,
        key: k,
        wait: !wait.is_zero(),
        reply,
    });
    match tokio::time::timeout(wait.max(Duration::from_millis(1)), ask).await {
        Ok(answer) => match answer?? {
            Some(v) => Ok(v.into_response()),
            None => Err(ApiError::not_found(format!("no value for `{key}` yet"))),
        },
        Err(_) => Err(ApiError::not_found(format!("no value for `{key}` yet"))),
    }
}
