//! `GET /metrics`: the Prometheus exposition ([`crate::metrics`]), with the server's token.

use super::AppState;
use crate::metrics::CONTENT_TYPE;
use crate::msg::{ApiError, Request};
use crate::users::Caller;
use crate::views::ErrorBody;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

/// The Prometheus metrics, in the text exposition format (0.0.4).
#[utoipa::path(get, path = "/metrics", tag = "server", security(("token" = [])),
    responses(
        (status = 200, description = "the metrics", body = String,
            content_type = "text/plain; version=0.0.4",
            example = json!("# HELP coalloc_site_idle_processors Idle processors of each site.\n# TYPE coalloc_site_idle_processors gauge\ncoalloc_site_idle_processors{site=\"alpha\"} 12\n")),
        (status = 401, description = "no or bad token", body = ErrorBody),
    ))]
pub async fn scrape(
    State(s): State<AppState>,
    _caller: Caller,
) -> Result<impl IntoResponse, ApiError> {
    s.ask(|reply| Request::RefreshMetrics { reply }).await?;
    Ok((
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        s.shared.metrics.encode(),
    ))
}
