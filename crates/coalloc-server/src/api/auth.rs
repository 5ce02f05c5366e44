//! Who is asking (issue 20 item 6, see [`crate::users`]): on the Unix socket, the user of
//! the peer's uid (`SO_PEERCRED`); over TCP, `Authorization: Bearer TOKEN` with the server's
//! token (the admin) or a token the admin issued to a user. A job's own secret opens that
//! job's barrier and rendezvous routes only (another job's secret is refused with 403).

use super::AppState;
use crate::link::proto::constant_time_eq;
use crate::listing::JobFilter;
use crate::msg::{ApiError, Request};
use crate::users::{caller_of_uid, user_name, Caller, TokenCheck};
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::serve::IncomingStream;
use coalloc_core::model::Job;

/// The credentials of a Unix-socket connection's peer, read once when it connects.
#[derive(Debug, Clone, Copy)]
pub struct PeerUid(pub Option<u32>);

impl Connected<IncomingStream<'_, tokio::net::UnixListener>> for PeerUid {
    fn connect_info(stream: IncomingStream<'_, tokio::net::UnixListener>) -> Self {
        PeerUid(stream.io().peer_cred().ok().map(|c| c.uid()))
    }
}

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

/// The admin's name when the server's token is used: the server's own user.
fn admin_caller() -> Caller {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    caller_of_uid(uid, uid, user_name)
}

/// The caller of a request: the peer's uid on the socket, else the bearer token.
pub fn caller(state: &AppState, parts: &Parts) -> Result<Caller, ApiError> {
    if let Some(ConnectInfo(PeerUid(uid))) = parts.extensions.get::<ConnectInfo<PeerUid>>() {
        let uid = uid.ok_or_else(|| ApiError::new(401, "cannot read the peer's credentials"))?;
        // SAFETY: as in `admin_caller`.
        let server = unsafe { libc::geteuid() };
        return Ok(caller_of_uid(uid, server, user_name));
    }
    let t = bearer(&parts.headers)?;
    if constant_time_eq(t, &state.token) {
        return Ok(admin_caller());
    }
    match state.users.by_token(t, crate::users::now_ms()) {
        TokenCheck::Valid(c) => Ok(c),
        TokenCheck::Expired { name, at } => Err(ApiError::new(
            401,
            format!(
                "the token of user `{name}` expired at {} (the admin can issue a new one: `coalloc user rm {name}`, then `coalloc user add {name}`)",
                crate::users::utc(at)
            ),
        )),
        TokenCheck::Unknown => Err(ApiError::new(401, "bad token")),
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        caller(state, parts)
    }
}

/// Someone with the admin's rights (the server's token, an admin user, the server's own
/// uid or root on the socket).
#[derive(Debug, Clone)]
pub struct Admin(pub Caller);

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let c = caller(state, parts)?;
        if c.admin {
            Ok(Admin(c))
        } else {
            Err(ApiError::new(
                403,
                format!("user `{}` is not an admin; this needs the admin", c.name),
            ))
        }
    }
}

/// Refuse a user who is not the owner of a job (`owner`; the admin may do anything).
pub fn may_touch(caller: &Caller, job: u64, owner: Option<&str>) -> Result<(), ApiError> {
    if caller.admin || owner == Some(caller.name.as_str()) {
        return Ok(());
    }
    Err(ApiError::new(
        403,
        format!(
            "job {job} belongs to {}, not to `{}`",
            owner.map_or("no user".into(), |o| format!("`{o}`")),
            caller.name
        ),
    ))
}

/// The server's token or job `job`'s secret (the barrier and rendezvous routes: a job's
/// components present its secret).
pub async fn job_or_admin(state: &AppState, headers: &HeaderMap, job: u64) -> Result<(), ApiError> {
    match job_secret(state, headers)? {
        None => Ok(()),
        Some(secret) => {
            state
                .ask(|reply| Request::Secret { job, secret, reply })
                .await?
        }
    }
}

/// The secret a call presents for the driver to check, or `None` for the server's token
/// (the barrier's check-in: the driver checks it in the check-in's own turn, one turn per
/// check-in instead of two).
pub fn job_secret(state: &AppState, headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let t = bearer(headers)?;
    Ok((!constant_time_eq(t, &state.token)).then(|| t.to_string()))
}

/// The owner of a job in memory or in the history (404 when there is no such job).
pub async fn owner_of(state: &AppState, job: u64) -> Result<Option<String>, ApiError> {
    if let Some(v) = state.ask(|reply| Request::Job { job, reply }).await? {
        return Ok(v.user);
    }
    super::listing::read_history(state, move |h| h.get(job))
        .await?
        .map(|v| v.user)
        .ok_or_else(|| ApiError::not_found(format!("no job {job}")))
}

/// A submitted job with its owner: a user's own name (a spec naming another user is
/// refused); the admin may submit for anyone, and owns a job that names no user.
pub fn owned(caller: &Caller, job: Job) -> Result<Job, ApiError> {
    match job.user() {
        Some(u) if u == caller.name || caller.admin => Ok(job),
        Some(u) => Err(ApiError::new(
            403,
            format!("`{}` may not submit a job for user `{u}`", caller.name),
        )),
        None => Ok(job.with(|e| e.user = Some(caller.name.as_str().into()))),
    }
}

/// A user's listing shows their own jobs only (asking for another's is refused).
pub fn own_listing(caller: &Caller, filter: &mut JobFilter) -> Result<(), ApiError> {
    if caller.admin {
        return Ok(());
    }
    match &filter.user {
        Some(u) if *u != caller.name => Err(ApiError::new(
            403,
            format!(
                "`{}` may list only their own jobs, not `{u}`'s",
                caller.name
            ),
        )),
        _ => {
            filter.user = Some(caller.name.clone());
            Ok(())
        }
    }
}
