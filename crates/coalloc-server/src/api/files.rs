//! The replica catalog's routes (seed 000 §2.3's replica manager): register a replica,
//! list replicas, remove them. Behind `coalloc file register | ls | rm`.

use super::auth::Admin;
use super::AppState;
use crate::msg::{ApiError, Request};
use crate::users::Caller;
use crate::views::{ErrorBody, FileList, RegisterBody, ReplicaView};
use axum::extract::{Path, Query, State};
use axum::Json;
use serde::Deserialize;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FileQuery {
    /// Only this logical file (list) / only this site (remove).
    name: Option<String>,
    site: Option<String>,
}

/// Register a replica of a logical file on a site. Without its size and BLAKE3 checksum,
/// the file is read for them where it is (by the server, or by the site's agent).
#[utoipa::path(post, path = "/v1/files", tag = "files", security(("token" = [])),
    request_body = RegisterBody,
    responses(
        (status = 200, description = "registered", body = ReplicaView),
        (status = 400, description = "bad input, or a file the server cannot read", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such site", body = ErrorBody),
    ))]
pub async fn register(
    State(s): State<AppState>,
    _admin: Admin,
    body: String,
) -> Result<Json<ReplicaView>, ApiError> {
    let b: RegisterBody =
        serde_json::from_str(&body).map_err(|e| ApiError::bad(format!("register: {e}")))?;
    let given = match (b.size, b.blake3.clone()) {
        (Some(size), Some(blake3)) => Some(crate::transfer::FileStat { size, blake3 }),
        (None, None) => None,
        _ => return Err(ApiError::bad("give both size and blake3, or neither")),
    };
    let read_here = given.is_none();
    let stat = match given {
        Some(g) => Some(g),
        None => {
            let path = std::path::PathBuf::from(&b.path);
            tokio::task::spawn_blocking(move || crate::transfer::stat(&path).ok())
                .await
                .ok()
                .flatten()
        }
    };
    let r = s
        .ask(|reply| Request::FileRegister {
            site: b.site,
            name: b.name,
            path: b.path,
            stat,
            read_here,
            reply,
        })
        .await??;
    Ok(Json(r))
}

/// The replicas (of one logical file with `?name=`).
#[utoipa::path(get, path = "/v1/files", tag = "files", params(FileQuery), security(("token" = [])),
    responses(
        (status = 200, description = "the catalog", body = FileList),
        (status = 401, description = "no or bad token", body = ErrorBody),
    ))]
pub async fn list(
    State(s): State<AppState>,
    _caller: Caller,
    Query(q): Query<FileQuery>,
) -> Result<Json<FileList>, ApiError> {
    let files = s
        .ask(|reply| Request::Files {
            name: q.name,
            reply,
        })
        .await?;
    Ok(Json(FileList { files }))
}

/// Remove a logical file's replicas from the catalog (on one site with `?site=`); the files
/// themselves stay where they are.
#[utoipa::path(delete, path = "/v1/files/{name}", tag = "files", security(("token" = [])),
    params(("name" = String, Path, description = "the logical file name"), FileQuery),
    responses(
        (status = 200, description = "the replicas removed", body = FileList),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such replica or site", body = ErrorBody),
    ))]
pub async fn remove(
    State(s): State<AppState>,
    _admin: Admin,
    Path(name): Path<String>,
    Query(q): Query<FileQuery>,
) -> Result<Json<FileList>, ApiError> {
    let files = s
        .ask(|reply| Request::FileRemove {
            name,
            site: q.site,
            reply,
        })
        .await??;
    Ok(Json(FileList { files }))
}
