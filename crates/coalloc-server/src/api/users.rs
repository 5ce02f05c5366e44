//! User routes (the admin only; issue 20 item 6, see [`crate::users`]): issue a token to a
//! new user, list the users, take a user's token back.

use super::auth::Admin;
use super::AppState;
use crate::msg::ApiError;
use crate::users::{now_ms, UserError};
use crate::views::{ErrorBody, UserBody, UserIssued, UserList, UserRemoved, UserView};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use coalloc_core::spec::units::{parse_duration, Scalar};

fn refusal(e: UserError) -> ApiError {
    match e {
        UserError::BadName(_) => ApiError::bad(e.to_string()),
        UserError::Exists(_) => ApiError::new(409, e.to_string()),
        UserError::Unknown(_) => ApiError::not_found(e.to_string()),
        UserError::Io(_) => ApiError::new(500, e.to_string()),
    }
}

/// Issue a token to a new user (shown this once; only its hash is kept).
#[utoipa::path(post, path = "/v1/users", tag = "users", security(("token" = [])),
    request_body = UserBody,
    responses(
        (status = 201, description = "issued", body = UserIssued),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "not the admin", body = ErrorBody),
        (status = 409, description = "the user exists", body = ErrorBody),
    ))]
pub async fn add(
    State(s): State<AppState>,
    Admin(by): Admin,
    body: String,
) -> Result<(StatusCode, Json<UserIssued>), ApiError> {
    let b: UserBody =
        serde_json::from_str(&body).map_err(|e| ApiError::bad(format!("user: {e}")))?;
    let expires = match &b.expires_in {
        None => None,
        Some(d) => {
            let ms = parse_duration(&Scalar::Str(d.clone()))
                .map_err(|e| ApiError::bad(format!("expires_in: {e}")))?;
            if ms == 0 {
                return Err(ApiError::bad("expires_in: must be longer than 0 s"));
            }
            Some(now_ms().saturating_add(ms))
        }
    };
    let token = s.users.add(&b.name, b.admin, expires).map_err(refusal)?;
    tracing::info!(user = %b.name, admin = b.admin, expires = ?expires, by = %by.name, "a user token was issued");
    Ok((
        StatusCode::CREATED,
        Json(UserIssued {
            name: b.name,
            admin: b.admin,
            token,
            expires,
        }),
    ))
}

/// The users the admin issued tokens to.
#[utoipa::path(get, path = "/v1/users", tag = "users", security(("token" = [])),
    responses(
        (status = 200, description = "the users", body = UserList),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "not the admin", body = ErrorBody),
    ))]
pub async fn list(State(s): State<AppState>, _admin: Admin) -> Json<UserList> {
    let users = s
        .users
        .list()
        .into_iter()
        .map(|(name, admin, expires)| UserView {
            name,
            admin,
            expires,
        })
        .collect();
    Json(UserList { users })
}

/// Take a user's token back (their jobs stay theirs).
#[utoipa::path(delete, path = "/v1/users/{name}", tag = "users",
    params(("name" = String, Path, description = "the user's name")), security(("token" = [])),
    responses(
        (status = 200, description = "removed", body = UserRemoved),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "not the admin", body = ErrorBody),
        (status = 404, description = "no such user", body = ErrorBody),
    ))]
pub async fn remove(
    State(s): State<AppState>,
    _admin: Admin,
    Path(name): Path<String>,
) -> Result<Json<UserRemoved>, ApiError> {
    s.users.remove(&name).map_err(refusal)?;
    Ok(Json(UserRemoved {
        name,
        removed: true,
    }))
}
