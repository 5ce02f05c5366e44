//! Bearer-token checks: the server's token for everything, a job's own secret for that
//! job's barrier and rendezvous routes (another job's secret is refused with 403).

use super::AppState;
use crate::driver::msg::{ApiError, Request};
use crate::link::proto::constant_time_eq;
use axum::http::HeaderMap;

fn bearer(headers: &HeaderMap) -> Result<&str, ApiError> {
    let h = headers
        .get("authorization")
        .ok_or_else(|| ApiError::new(401, "missing `Authorization: Bearer TOKEN`"))?;
    h.to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(|| ApiError::new(401, "the Authorization header is not `Bearer TOKEN`"))
}

/// The server's token, nothing else.
pub fn admin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if constant_time_eq(bearer(headers)?, &state.token) {
        Ok(())
    } else {
        Err(ApiError::new(401, "bad token"))
    }
}

/// The server's token or job `job`'s secret.
pub async fn job_or_admin(state: &AppState, headers: &HeaderMap, job: u64) -> Result<(), ApiError> {
    let t = bearer(headers)?;
    if constant_time_eq(t, &state.token) {
        return Ok(());
    }
    let secret = t.to_string();
    state
        .ask(|reply| Request::Secret { job, secret, reply })
        .await?
}
