//! Job and site routes: submit (RSL, `.uno`, TOML or JSON body), list, show, cancel, edit
//! (add / delete / substitute a component before commit), sites, usable marks, events.

use super::auth::{may_touch, owned, owner_of, Admin};
use super::listing::read_history;
use super::AppState;
use crate::driver::arrays::parse_indexes;
use crate::msg::{ApiError, EditRequest, Request};
use crate::users::Caller;
use crate::views::{
    AgentTokenView, Cancelled, Committed, ControlAnswer, ControlBody, EditBody, Edited, ErrorBody,
    JobSpec, JobView, SitesView, StreamEvent, Submitted, UsableAnswer, UsableBody,
};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use axum::Json;
use coalloc_core::scheduler::Edit;
use coalloc_core::spec::edit::edit_from_json;
use coalloc_core::spec::{parse_job, Format};
use serde::Deserialize;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use tokio_stream::wrappers::{BroadcastStream, WatchStream};
use tokio_stream::{Stream, StreamExt};

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SubmitQuery {
    /// rsl, uno, toml or json; otherwise from the Content-Type, else JSON.
    format: Option<String>,
    /// Submit the job as an array of one element per index, `A-B` (inclusive) or `A`: jobs
    /// with consecutive numbers, each component seeing `COALLOC_ARRAY_INDEX`.
    array: Option<String>,
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

/// Submit a job: the native spec in JSON or TOML, or Globus RSL (`.rsl` ordered, `.uno`
/// unordered).
#[utoipa::path(post, path = "/v1/jobs", tag = "jobs", params(SubmitQuery), security(("token" = [])),
    request_body(content(
        (JobSpec = "application/json"),
        (String = "application/toml", example = json!("name = \"hello\"\nkind = \"unordered\"\n[[component]]\ncount = 2\nexecutable = \"/bin/hostname\"\n")),
        (String = "text/x-rsl", example = json!("+(&(resourceManagerContact=alpha)(count=2)(executable=/bin/hostname))(&(resourceManagerContact=beta)(count=2)(executable=/bin/hostname))")),
    )),
    responses(
        (status = 201, description = "accepted", body = Submitted),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
    ))]
pub async fn submit(
    State(s): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    Query(q): Query<SubmitQuery>,
    body: String,
) -> Result<impl IntoResponse, ApiError> {
    let format = format_of(&q, &headers)?;
    let job = parse_job(&body, format).map_err(|e| ApiError::bad(format!("job: {e}")))?;
    let job = owned(&caller, job)?;
    if let Some(text) = &q.array {
        let indexes = parse_indexes(text).map_err(ApiError::bad)?;
        let first = s
            .ask(|reply| Request::SubmitArray {
                job: Box::new(job),
                indexes,
                reply,
            })
            .await?
            .map_err(|e| ApiError::bad(format!("job refused: {e}")))?;
        let array = Some(format!("{first}_[{}-{}]", indexes.0, indexes.1));
        let sub = Submitted {
            job: first,
            array,
            awaiting_admission: false,
        };
        return Ok((StatusCode::CREATED, Json(sub)));
    }
    let answers = s
        .ask(|reply| Request::Submit {
            jobs: vec![job],
            reply,
        })
        .await?;
    match answers.into_iter().next() {
        Some(Ok((id, waits))) => Ok((
            StatusCode::CREATED,
            Json(Submitted {
                job: id,
                array: None,
                awaiting_admission: waits,
            }),
        )),
        Some(Err(e)) => Err(ApiError::bad(format!("job refused: {e}"))),
        None => Err(ApiError::new(500, "no answer")),
    }
}

/// One job: its components with their sites, launches and check-ins, and its times (an
/// ended job that has left memory: its last view, from the history).
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs", params(("id" = u64, Path, description = "the job's number")), security(("token" = [])),
    responses(
        (status = 200, description = "the job", body = JobView),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such job", body = ErrorBody),
    ))]
pub async fn show(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<u64>,
) -> Result<Json<JobView>, ApiError> {
    let view = match s.ask(|reply| Request::Job { job: id, reply }).await? {
        Some(v) => v,
        None => read_history(&s, move |h| h.get(id))
            .await?
            .ok_or_else(|| ApiError::not_found(format!("no job {id}")))?,
    };
    may_touch(&caller, id, view.user.as_deref())?;
    Ok(Json(view))
}

/// Cancel a job: every started component is killed.
#[utoipa::path(delete, path = "/v1/jobs/{id}", tag = "jobs", params(("id" = u64, Path, description = "the job's number")), security(("token" = [])),
    responses(
        (status = 200, description = "cancelled", body = Cancelled),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such job", body = ErrorBody),
        (status = 409, description = "the job has ended", body = ErrorBody),
    ))]
pub async fn cancel(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<u64>,
) -> Result<Json<Cancelled>, ApiError> {
    may_touch(&caller, id, owner_of(&s, id).await?.as_deref())?;
    s.ask(|reply| Request::Cancel { job: id, reply }).await??;
    Ok(Json(Cancelled {
        job: id,
        cancelled: true,
    }))
}

/// Commit a job held at the barrier (`hold_at_barrier = true`, seed 002 §3.2's interactive
/// transaction): it is released once every required component is at the barrier.
#[utoipa::path(post, path = "/v1/jobs/{id}/commit", tag = "jobs", params(("id" = u64, Path, description = "the job's number")), security(("token" = [])),
    responses(
        (status = 200, description = "committed", body = Committed),
        (status = 400, description = "not held at the barrier, or not started", body = ErrorBody),
        (status = 409, description = "already committed, or ended", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such job", body = ErrorBody),
    ))]
pub async fn commit(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<u64>,
) -> Result<Json<Committed>, ApiError> {
    may_touch(&caller, id, owner_of(&s, id).await?.as_deref())?;
    s.ask(|reply| Request::Commit { job: id, reply }).await??;
    Ok(Json(Committed {
        job: id,
        committed: true,
    }))
}

/// Edit a job before it commits (seed 002 §3.2): add a component, delete or substitute one.
#[utoipa::path(post, path = "/v1/jobs/{id}/edit", tag = "jobs", params(("id" = u64, Path, description = "the job's number")), security(("token" = [])),
    request_body = EditBody,
    responses(
        (status = 200, description = "edited", body = Edited),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such job", body = ErrorBody),
        (status = 409, description = "the job has committed or ended", body = ErrorBody),
    ))]
pub async fn edit(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<u64>,
    body: String,
) -> Result<Json<Edited>, ApiError> {
    may_touch(&caller, id, owner_of(&s, id).await?.as_deref())?;
    let (edit, op) = match edit_from_json(&body).map_err(|e| ApiError::bad(format!("edit: {e}")))? {
        Edit::Add(c) => (EditRequest::Add(c), "add"),
        Edit::Delete(i) => (EditRequest::Delete(i), "delete"),
        Edit::Substitute(i, c) => (EditRequest::Substitute(i, c), "substitute"),
    };
    s.ask(|reply| Request::Edit {
        job: id,
        edit,
        reply,
    })
    .await??;
    Ok(Json(Edited {
        job: id,
        edited: op.into(),
    }))
}

/// The sites with their state and load, and the scheduler's policies.
#[utoipa::path(get, path = "/v1/sites", tag = "sites", security(("token" = [])),
    responses(
        (status = 200, description = "the sites", body = SitesView),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
    ))]
pub async fn sites(
    State(s): State<AppState>,
    _caller: Caller,
) -> Result<Json<SitesView>, ApiError> {
    // Agent sites come with their link, as the core heard it.
    let v = s.ask(|reply| Request::Sites { reply }).await?;
    Ok(Json(v))
}

/// A new enrolment token for an agent site (`coalloc site add NAME`); it replaces the
/// site's previous credential.
#[utoipa::path(post, path = "/v1/sites/{name}/agent-token", tag = "sites",
    params(("name" = String, Path, description = "an agent site's name")), security(("token" = [])),
    responses(
        (status = 200, description = "the enrolment token", body = AgentTokenView),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "not an agent site of this server", body = ErrorBody),
        (status = 503, description = "the credential could not be kept", body = ErrorBody),
    ))]
pub async fn agent_token(
    State(s): State<AppState>,
    _admin: Admin,
    Path(name): Path<String>,
) -> Result<Json<AgentTokenView>, ApiError> {
    let Some(hub) = &s.hub else {
        return Err(ApiError::not_found(
            "this server has no agent sites (no `[[site]]` with manager = { type = \"agent\" })",
        ));
    };
    if !hub.sites.contains_key(&name) {
        return Err(ApiError::not_found(format!(
            "site `{name}` is not an agent site of this server (its manager must be {{ type = \"agent\" }})"
        )));
    }
    // The credential could not be kept (the disk, or the shared database refusing a
    // deposed server): the server's fault, not the request's.
    let token = hub.enrol(&name).map_err(|e| ApiError::new(503, e))?;
    tracing::info!(site = %name, "an agent credential was issued");
    Ok(Json(AgentTokenView {
        token: token.encode(),
        site: name,
        server: token.server,
        others: token.others,
        fingerprint: token.fingerprint,
    }))
}

/// Mark a site usable or unusable (an operator's word; seed 003 §4.3.4).
#[utoipa::path(put, path = "/v1/sites/{name}/usable", tag = "sites",
    params(("name" = String, Path, description = "the site's name")), security(("token" = [])),
    request_body = UsableBody,
    responses(
        (status = 200, description = "marked", body = UsableAnswer),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such site", body = ErrorBody),
    ))]
pub async fn set_usable(
    State(s): State<AppState>,
    _admin: Admin,
    Path(name): Path<String>,
    body: String,
) -> Result<Json<UsableAnswer>, ApiError> {
    let b: UsableBody =
        serde_json::from_str(&body).map_err(|e| ApiError::bad(format!("usable: {e}")))?;
    s.ask(|reply| Request::SetUsable {
        site: name.clone(),
        usable: b.usable,
        reply,
    })
    .await??;
    Ok(Json(UsableAnswer {
        site: name,
        usable: b.usable,
    }))
}

/// Drain, down or resume a site, with a reason (Slurm's `scontrol update state=`): drain
/// takes no new components and lets running ones finish; down takes the site out until it
/// is resumed (it is never probed back by itself); resume puts it back and clears its error
/// marks.
#[utoipa::path(put, path = "/v1/sites/{name}/control", tag = "sites",
    params(("name" = String, Path, description = "the site's name")), security(("token" = [])),
    request_body = ControlBody,
    responses(
        (status = 200, description = "done", body = ControlAnswer),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such site", body = ErrorBody),
    ))]
pub async fn site_control(
    State(s): State<AppState>,
    _admin: Admin,
    Path(name): Path<String>,
    body: String,
) -> Result<Json<ControlAnswer>, ApiError> {
    let b: ControlBody =
        serde_json::from_str(&body).map_err(|e| ApiError::bad(format!("control: {e}")))?;
    s.ask(|reply| Request::SiteControl {
        site: name.clone(),
        control: b.action,
        reason: b.reason,
        reply,
    })
    .await??;
    Ok(Json(ControlAnswer {
        site: name,
        action: b.action.name().to_owned(),
    }))
}

/// Server-sent events: one `data:` line of JSON per job, component, site and VM change
/// (seed 002 §3.4's monitoring callbacks); an `event: lagged` line when a slow reader
/// missed some.
#[utoipa::path(get, path = "/v1/events", tag = "events", security(("token" = [])),
    responses(
        (status = 200, description = "the stream; each `data:` line is a StreamEvent",
            content_type = "text/event-stream", body = StreamEvent),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
    ))]
pub async fn events(
    State(s): State<AppState>,
    caller: Caller,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    // A user sees the events of their own jobs and the sites' (`Some(None)`: left out).
    let owners = Arc::new(Mutex::new(HashMap::new()));
    let state = s.clone();
    let events = BroadcastStream::new(s.shared.events.subscribe()).then(move |m| {
        let (state, caller, owners) = (state.clone(), caller.clone(), owners.clone());
        async move {
            match m {
                Ok(text) if visible(&state, &caller, &owners, &text).await => {
                    Some(Some(Ok(Event::default().data(text))))
                }
                Ok(_) => Some(None),
                // A slow reader missed some: say so in the stream.
                Err(e) => Some(Some(Ok(Event::default()
                    .event("lagged")
                    .data(e.to_string())))),
            }
        }
    });
    // The stream ends (`None`) when the server begins to stop.
    let stop = WatchStream::new(s.stopping.clone())
        .filter(|stopping| *stopping)
        .map(|_| None);
    let stream = events
        .merge(stop)
        .take_while(Option::is_some)
        .filter_map(Option::flatten);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// Whether an event (JSON text) is for `caller`: the admin sees all; a user, the events of
/// no job and of their own jobs (owners looked up once per job, kept in `owners`).
async fn visible(
    s: &AppState,
    caller: &Caller,
    owners: &Mutex<HashMap<u64, bool>>,
    text: &str,
) -> bool {
    if caller.admin {
        return true;
    }
    // Any event that names a job is checked, whatever else it holds.
    let v: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
    let Some(job) = v.get("job").and_then(serde_json::Value::as_u64) else {
        return true;
    };
    let known = owners.lock().ok().and_then(|o| o.get(&job).copied());
    if let Some(mine) = known {
        return mine;
    }
    let mine = owner_of(s, job).await.ok().flatten().as_deref() == Some(caller.name.as_str());
    if let Ok(mut o) = owners.lock() {
        o.insert(job, mine);
    }
    mine
}
