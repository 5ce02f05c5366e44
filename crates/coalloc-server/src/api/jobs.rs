//! Job and site routes: submit (RSL, `.uno`, TOML or JSON body), list, show, cancel, edit
//! (add / delete / substitute a component before commit), sites, usable marks, events.

use super::auth::admin;
use super::AppState;
use crate::driver::msg::{ApiError, EditRequest, Request};
use crate::entry::one_component;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use axum::Json;
use coalloc_core::spec::{parse_job, Format};
use serde::Deserialize;
use serde_json::{json, Value};
use std::convert::Infallible;
use tokio_stream::wrappers::{BroadcastStream, WatchStream};
use tokio_stream::{Stream, StreamExt};

#[derive(Deserialize)]
pub struct SubmitQuery {
    /// rsl, uno, toml or json; otherwise from the Content-Type, else JSON.
    format: Option<String>,
}

fn format_of(q: &SubmitQuery, headers: &HeaderMap) -> Result<Format, ApiError> {
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let name = match &q.format {
        Some(f) => f.to_ascii_lowercase(),
        None if ct.contains("toml") => "toml".into(),
        None if ct.contains("rsl") => "rsl".into(),
        None => "json".into(),
    };
    Ok(match name.as_str() {
        "rsl" => Format::Rsl,
        "uno" => Format::Uno,
        "toml" => Format::Toml,
        "json" => Format::Json,
        other => {
            return Err(ApiError::bad(format!(
                "unknown format `{other}` (rsl, uno, toml, json)"
            )))
        }
    })
}

pub async fn submit(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<SubmitQuery>,
    body: String,
) -> Result<impl IntoResponse, ApiError> {
    admin(&s, &headers)?;
    let format = format_of(&q, &headers)?;
    let job = parse_job(&body, format).map_err(|e| ApiError::bad(format!("job: {e}")))?;
    let answers = s
        .ask(|reply| Request::Submit {
            jobs: vec![job],
            reply,
        })
        .await?;
    match answers.into_iter().next() {
        Some(Ok(id)) => Ok((StatusCode::CREATED, Json(json!({ "job": id })))),
        Some(Err(e)) => Err(ApiError::bad(format!("job refused: {e}"))),
        None => Err(ApiError::new(500, "no answer")),
    }
}

pub async fn list(State(s): State<AppState>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    admin(&s, &headers)?;
    let jobs = s.ask(|reply| Request::Jobs { reply }).await?;
    Ok(Json(json!({ "jobs": jobs })))
}

pub async fn show(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> Result<Json<Value>, ApiError> {
    admin(&s, &headers)?;
    s.ask(|reply| Request::Job { job: id, reply })
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no job {id}")))
}

pub async fn cancel(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> Result<Json<Value>, ApiError> {
    admin(&s, &headers)?;
    s.ask(|reply| Request::Cancel { job: id, reply }).await??;
    Ok(Json(json!({ "job": id, "cancelled": true })))
}

/// `{"op": "add" | "delete" | "substitute", "index": N, "component": {native component}}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditBody {
    op: String,
    index: Option<usize>,
    component: Option<Value>,
}

pub async fn edit(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<u64>,
    body: String,
) -> Result<Json<Value>, ApiError> {
    admin(&s, &headers)?;
    let b: EditBody =
        serde_json::from_str(&body).map_err(|e| ApiError::bad(format!("edit: {e}")))?;
    let comp = || -> Result<_, ApiError> {
        let c = b
            .component
            .clone()
            .ok_or_else(|| ApiError::bad("edit: `component` is required"))?;
        let text = json!({ "kind": "unordered", "component": [c] }).to_string();
        one_component(&text).map_err(|e| ApiError::bad(format!("edit: component: {e}")))
    };
    let index = || {
        b.index
            .ok_or_else(|| ApiError::bad("edit: `index` is required"))
    };
    let edit = match b.op.as_str() {
        "add" => EditRequest::Add(comp()?),
        "delete" => EditRequest::Delete(index()?),
        "substitute" => EditRequest::Substitute(index()?, comp()?),
        other => {
            return Err(ApiError::bad(format!(
                "edit: unknown op `{other}` (add, delete, substitute)"
            )))
        }
    };
    s.ask(|reply| Request::Edit {
        job: id,
        edit,
        reply,
    })
    .await??;
    Ok(Json(json!({ "job": id, "edited": b.op })))
}

pub async fn sites(State(s): State<AppState>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    admin(&s, &headers)?;
    let mut v = s.ask(|reply| Request::Sites { reply }).await?;
    // Agent sites: the state of their link.
    if let (Some(hub), Some(sites)) = (&s.hub, v["sites"].as_array_mut()) {
        for site in sites {
            let name = site["name"].as_str().unwrap_or_default().to_string();
            if let Some((_, link)) = hub.sites.get(&name) {
                let status = link.status();
                if status.unreachable {
                    site["state"] = json!("unreachable");
                }
                site["link"] = json!(status);
            }
        }
    }
    Ok(Json(v))
}

/// A new enrolment token for an agent site (`coalloc site add NAME`); it replaces the
/// site's previous credential.
pub async fn agent_token(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    admin(&s, &headers)?;
    let Some(hub) = &s.hub else {
        return Err(ApiError::not_found(
            "this server has no agent sites (no `[[site]]` with manager = { type = \"agent\" })",
        ));
    };
    let token = hub.enrol(&name).map_err(ApiError::not_found)?;
    tracing::info!(site = %name, "an agent credential was issued");
    Ok(Json(
        json!({ "site": name, "server": token.server, "fingerprint": token.fingerprint, "token": token.encode() }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsableBody {
    usable: bool,
}

pub async fn set_usable(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: String,
) -> Result<Json<Value>, ApiError> {
    admin(&s, &headers)?;
    let b: UsableBody =
        serde_json::from_str(&body).map_err(|e| ApiError::bad(format!("usable: {e}")))?;
    s.ask(|reply| Request::SetUsable {
        site: name.clone(),
        usable: b.usable,
        reply,
    })
    .await??;
    Ok(Json(json!({ "site": name, "usable": b.usable })))
}

pub async fn events(
    State(s): State<AppState>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    admin(&s, &headers)?;
    let events = BroadcastStream::new(s.shared.events.subscribe()).map(|m| match m {
        Ok(text) => Some(Ok(Event::default().data(text))),
        // A slow reader missed some: say so in the stream.
        Err(e) => Some(Ok(Event::default().event("lagged").data(e.to_string()))),
    });
    // The stream ends (`None`) when the server begins to stop.
    let stop = WatchStream::new(s.stopping.clone())
        .filter(|stopping| *stopping)
        .map(|_| None);
    let stream = events
        .merge(stop)
        .take_while(Option::is_some)
        .filter_map(|e| e);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
