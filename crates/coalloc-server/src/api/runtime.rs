//! The component runtime's routes (seed 002 §3.3): barrier check-in, held until the job
//! commits or aborts or the hold runs out, and the job-scoped rendezvous store. The wire
//! format is fixed in coalloc-runtime's documentation.

use super::auth::job_or_admin;
use super::AppState;
use crate::msg::{ApiError, BarrierAnswer, Request};
use crate::views::{CheckIn, ErrorBody};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use std::time::Duration;
use tokio::time::Instant;

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
    job_or_admin(&s, &headers, job).await?;
    let c: CheckIn =
        serde_json::from_str(&body).map_err(|e| ApiError::bad(format!("check-in: {e}")))?;
    let deadline = Instant::now() + s.hold;
    let mut generation = s.shared.generation.clone();
    let mut check_in = true;
    loop {
        generation.borrow_and_update();
        let reason = c.reason.clone();
        let answer = s
            .ask(|reply| Request::Barrier {
                job,
                launch: c.launch,
                local_rank: c.local_rank,
                ok: c.ok,
                reason,
                check_in,
                reply,
            })
            .await??;
        check_in = false;
        if answer != BarrierAnswer::Waiting || !wait_change(&mut generation, deadline).await {
            return Ok(Json(answer));
        }
    }
}

/// Wait for the driver's next turn; false when the deadline passed first.
async fn wait_change(g: &mut tokio::sync::watch::Receiver<u64>, deadline: Instant) -> bool {
    matches!(
        tokio::time::timeout_at(deadline, g.changed()).await,
        Ok(Ok(()))
    )
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
    let deadline = Instant::now() + wait;
    let mut generation = s.shared.generation.clone();
    loop {
        generation.borrow_and_update();
        let k = key.clone();
        if let Some(v) = s
            .ask(|reply| Request::KvGet { job, key: k, reply })
            .await??
        {
            return Ok(v.into_response());
        }
        if wait.is_zero() || !wait_change(&mut generation, deadline).await {
            return Err(ApiError::not_found(format!("no value for `{key}` yet")));
        }
    }
}
