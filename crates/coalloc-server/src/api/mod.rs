//! The HTTP API (axum): jobs (submit, list, show, cancel, edit), the history of ended jobs,
//! sites, the components' output ([`output`]), the replica catalog (files), the event stream
//! (server-sent events: seed 002 §3.4's monitoring callbacks), the barrier check-in and the
//! rendezvous store (seed 002 §3.3), health, the OpenAPI document at `/openapi.json`, the
//! Prometheus metrics at `/metrics` and the web dashboard at `/ui`.
//!
//! Every route but `/v1/health`, `/openapi.json` and the dashboard's files needs a caller
//! ([`auth`]): on the server's Unix socket, the peer's uid; over TCP,
//! `Authorization: Bearer TOKEN` with the server's token (state directory, mode 0600, the
//! admin), a token the admin issued to a user (`/v1/users`), or, for a job's barrier and
//! rendezvous routes, that job's own secret. A user sees and changes only their own jobs
//! (403 otherwise); the admin, every job. Every refusal is a 4xx with `{"error": "..."}`.

pub mod auth;
mod bulk;
mod files;
mod jobs;
mod listing;
mod metrics;
pub mod openapi;
pub mod output;
mod runtime;
mod ui;
mod users;

use crate::driver::Shared;
use crate::msg::{ApiError, Msg, Reply, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde_json::json;
use std::time::Duration;
use tokio::sync::oneshot;

/// What every handler gets.
#[derive(Clone)]
pub struct AppState {
    pub shared: Shared,
    pub token: String,
    /// How long a barrier check-in or rendezvous wait is held at most.
    pub hold: Duration,
    /// Becomes `true` when the server begins to stop: endless responses (the event stream)
    /// end then, or graceful shutdown would wait for them for ever.
    pub stopping: tokio::sync::watch::Receiver<bool>,
    /// The site agents' links, when some site is reached through an agent.
    pub hub: Option<std::sync::Arc<crate::link::hub::Hub>>,
    /// The history of ended jobs that left memory.
    pub history: std::sync::Arc<dyn crate::history::HistoryRead>,
    /// The users the admin issued tokens to.
    pub users: std::sync::Arc<crate::users::Users>,
    /// Where the components' output is (the state directory's `output`: `JOB/C.LN.out|err`).
    pub output: std::path::PathBuf,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        (status, Json(json!({ "error": self.message }))).into_response()
    }
}

impl AppState {
    /// Send a request to the driver and wait for its answer.
    pub async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> Result<T, ApiError> {
        let (tx, rx) = oneshot::channel();
        self.shared
            .tx
            .send(Msg::Api(make(tx)))
            .map_err(|_| ApiError::new(503, "the server is stopping"))?;
        rx.await
            .map_err(|_| ApiError::new(503, "the server is stopping"))
    }
}

/// The whole API.
pub fn router(state: AppState) -> Router {
    let authed = Router::new()
        .route("/v1/jobs", post(jobs::submit).get(listing::list))
        .route("/v1/jobs/batch", post(bulk::batch))
        .route("/v1/jobs/{id}", get(jobs::show).delete(jobs::cancel))
        .route("/v1/jobs/{id}/edit", post(jobs::edit))
        .route("/v1/jobs/{id}/output", get(output::output))
        .route("/v1/history", get(listing::history))
        .route("/v1/arrays/{id}", delete(bulk::cancel_array))
        .route("/v1/jobs/{id}/commit", post(jobs::commit))
        .route("/v1/sites", get(jobs::sites))
        .route("/v1/sites/{name}/usable", put(jobs::set_usable))
        .route("/v1/sites/{name}/control", put(jobs::site_control))
        .route("/v1/sites/{name}/agent-token", post(jobs::agent_token))
        .route("/v1/files", post(files::register).get(files::list))
        .route("/v1/files/{name}", axum::routing::delete(files::remove))
        .route("/v1/events", get(jobs::events))
        .route("/metrics", get(metrics::scrape))
        .route("/v1/users", post(users::add).get(users::list))
        .route("/v1/users/{name}", delete(users::remove))
        .route("/v1/jobs/{id}/barrier", post(runtime::barrier))
        .route(
            "/v1/jobs/{id}/kv/{key}",
            put(runtime::kv_put).get(runtime::kv_get),
        );
    Router::new()
        .route("/v1/health", get(health))
        .route("/openapi.json", get(openapi::document))
        .merge(authed)
        .merge(ui::routes())
        .fallback(|| async { ApiError::not_found("no such route; see /openapi.json") })
        .layer(axum::middleware::from_fn(read_body_first))
        .with_state(state)
}

/// The most a request's body may hold: axum's own limit for its `Json` extractor.
const BODY_LIMIT: usize = 2 << 20;

/// Read every request's body before its route runs. A route that refuses a request before
/// reading its body (a 401 or 403 from the caller's extractor, a 404) would otherwise
/// leave it unread, and hyper then closes the connection if the body's bytes had not all
/// arrived when the answer went out: a client that sends its next request on that
/// kept-alive connection sees "peer disconnected", and one that does not retry a `POST`
/// fails (the users test, a CI run of 2026-11-29). Every body here is a JSON document or
/// empty, so holding it whole costs nothing the route would not pay.
async fn read_body_first(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > BODY_LIMIT as u64) {
        return ApiError::new(
            413,
            format!("the request's body is over {BODY_LIMIT} bytes"),
        )
        .into_response();
    }
    let (parts, body) = req.into_parts();
    match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(bytes) => {
            let req = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
            next.run(req).await
        }
        Err(e) => {
            ApiError::new(400, format!("cannot read the request's body: {e}")).into_response()
        }
    }
}

/// Liveness: answers without a token.
#[utoipa::path(get, path = "/v1/health", tag = "server", responses((status = 200, description = "alive", body = crate::views::Health)))]
pub async fn health() -> Json<crate::views::Health> {
    Json(crate::views::Health {
        ok: true,
        version: env!("CARGO_PKG_VERSION").into(),
    })
}
