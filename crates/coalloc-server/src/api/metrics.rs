//! `GET /metrics`: the Prometheus exposition ([`crate::metrics`]), with the server's token.

use super::auth::admin;
use super::AppState;
use crate::driver::msg::{ApiError, Request};
use crate::metrics::CONTENT_TYPE;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::IntoResponse;

pub async fn scrape(
    State(s): State<AppState>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    admin(&s, &headers)?;
    s.ask(|reply| Request::RefreshMetrics { reply }).await?;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], s.shared.metrics.encode()))
}
