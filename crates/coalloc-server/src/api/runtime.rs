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
    let ask = |wait: bool| {
        let key = key.clone();
        s.ask(move |reply| Request::KvGet {
            job,
            key,
            wait,
            reply,
        })
    };
    // Only the wait for a value not yet put is bounded, never the driver's answer: a value
    // that is there is always returned. (A read without a wait used to be cut after 1 ms,
    // so a driver busy for longer answered "not there" for a value it held: MPICH's
    // `PMI_KVS_Get returned -1` under load, three MPI tests' retries in a CI run.)
    let found = if wait.is_zero() {
        ask(false).await??
    } else {
        match tokio::time::timeout(wait, ask(true)).await {
            Ok(answer) => answer??,
            // The wait ran out: one look more, for a put that came as it ran out.
            Err(_) => ask(false).await??,
        }
    };
    match found {
        Some(v) => Ok(v.into_response()),
        None => Err(ApiError::not_found(format!("no value for `{key}` yet"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Shared;
    use crate::msg::Msg;
    use std::sync::Arc;
    use tower::ServiceExt;

    /// A driver slower than any fixed bound, holding `k = v` in job 1's store: a read finds
    /// `k` whether it waits or not, and a missing key is 404 after the wait.
    #[tokio::test]
    async fn a_value_that_is_there_is_returned_however_slowly_the_driver_answers() {
        let (tx, rx) = std::sync::mpsc::channel::<Msg>();
        std::thread::spawn(move || {
            while let Ok(m) = rx.recv() {
                if let Msg::Api(Request::KvGet { key, reply, .. }) = m {
                    std::thread::sleep(Duration::from_millis(30));
                    let _ = reply.send(Ok((key == "k").then(|| "v".to_owned())));
                }
            }
        });
        let dir = crate::scratch::dir("kv-get");
        // The history reader opens an existing file read-only (the driver makes it).
        rusqlite::Connection::open(dir.join("history.sqlite")).unwrap();
        let state = AppState {
            shared: Shared {
                tx,
                events: tokio::sync::broadcast::channel(1).0,
                metrics: Arc::new(crate::metrics::Metrics::new()),
            },
            token: "T".into(),
            hold: Duration::from_secs(5),
            stopping: tokio::sync::watch::channel(false).1,
            hub: None,
            history: Arc::new(crate::history::History::open(&dir.join("history.sqlite")).unwrap()),
            users: Arc::new(crate::users::Users::open(dir.join("users.json")).unwrap()),
            output: dir.join("output"),
        };
        let app = super::super::router(state);
        for (uri, want) in [
            ("/v1/jobs/1/kv/k", 200),
            ("/v1/jobs/1/kv/k?wait_ms=10", 200),
            ("/v1/jobs/1/kv/other", 404),
            ("/v1/jobs/1/kv/other?wait_ms=10", 404),
        ] {
            let req = axum::http::Request::get(uri)
                .header("authorization", "Bearer T")
                .body(axum::body::Body::empty())
                .unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            assert_eq!(resp.status().as_u16(), want, "{uri}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
