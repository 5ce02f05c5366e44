//! Job and site routes: submit (RSL, `.uno`, TOML or JSON body), list, show, cancel, edit
//! (add / delete / substitute a component before commit), sites, usable marks, events.

use super::auth::admin;
use super::AppState;
use crate::driver::arrays::parse_indexes;
use crate::driver::msg::{ApiError, EditRequest, Request};
use crate::entry::one_component;
use crate::listing::{JobFilter, JobsQuery};
use crate::views::{
    AgentTokenView, ArrayCancelled, BatchBody, BatchError, BatchSubmitted, Cancelled, EditBody,
    Edited, ErrorBody, JobList, JobSpec, JobView, SitesView, StreamEvent, Submitted, UsableAnswer,
    UsableBody,
};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use axum::Json;
use coalloc_core::spec::{parse_job, Format};
use serde::Deserialize;
use serde_json::json;
use std::convert::Infallible;
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
    Query(q): Query<SubmitQuery>,
    body: String,
) -> Result<impl IntoResponse, ApiError> {
    admin(&s, &headers)?;
    let format = format_of(&q, &headers)?;
    let job = parse_job(&body, format).map_err(|e| ApiError::bad(format!("job: {e}")))?;
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
        return Ok((StatusCode::CREATED, Json(Submitted { job: first, array })));
    }
    let answers = s
        .ask(|reply| Request::Submit {
            jobs: vec![job],
            reply,
        })
        .await?;
    match answers.into_iter().next() {
        Some(Ok(id)) => Ok((
            StatusCode::CREATED,
            Json(Submitted {
                job: id,
                array: None,
            }),
        )),
        Some(Err(e)) => Err(ApiError::bad(format!("job refused: {e}"))),
        None => Err(ApiError::new(500, "no answer")),
    }
}

/// The most jobs one batch may hold.
const MAX_BATCH: usize = 100_000;

/// Submit many jobs in one request (the native spec in JSON, each): they are journaled in
/// one transaction and numbered in the batch's order. A batch with a job that does not
/// parse is refused whole (400, naming the job); a job the scheduler refuses is `null` in
/// the answer, with its reason in `errors`.
#[utoipa::path(post, path = "/v1/jobs/batch", tag = "jobs", security(("token" = [])),
    request_body = BatchBody,
    responses(
        (status = 201, description = "submitted", body = BatchSubmitted),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
    ))]
pub async fn batch(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: String,
) -> Result<(StatusCode, Json<BatchSubmitted>), ApiError> {
    admin(&s, &headers)?;
    let b: BatchBody =
        serde_json::from_str(&body).map_err(|e| ApiError::bad(format!("batch: {e}")))?;
    if b.jobs.len() > MAX_BATCH {
        return Err(ApiError::bad(format!(
            "batch: {} jobs; at most {MAX_BATCH} in one request",
            b.jobs.len()
        )));
    }
    let jobs = b
        .jobs
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            coalloc_core::spec::native::from_json_value(v)
                .map_err(|e| ApiError::bad(format!("batch: job {i}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let answers = s.ask(|reply| Request::Submit { jobs, reply }).await?;
    let mut errors = Vec::new();
    let jobs = answers
        .into_iter()
        .enumerate()
        .map(|(index, a)| {
            a.map_err(|error| errors.push(BatchError { index, error }))
                .ok()
        })
        .collect();
    Ok((StatusCode::CREATED, Json(BatchSubmitted { jobs, errors })))
}

/// A page of the jobs in memory (queued, running, and ended ones until they age out into
/// the history), by number, with their components' sites and states; filters on state,
/// user, name and submit time; `next` is the cursor of the following page.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs", params(JobsQuery), security(("token" = [])),
    responses(
        (status = 200, description = "a page of jobs", body = JobList),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
    ))]
pub async fn list(
    State(s): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<JobsQuery>, QueryRejection>,
) -> Result<Json<JobList>, ApiError> {
    admin(&s, &headers)?;
    let filter = query_filter(query)?;
    Ok(Json(s.ask(|reply| Request::Jobs { filter, reply }).await?))
}

/// A listing's query, checked.
pub(super) fn query_filter(
    query: Result<Query<JobsQuery>, QueryRejection>,
) -> Result<JobFilter, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad(e.body_text()))?;
    q.filter()
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
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> Result<Json<JobView>, ApiError> {
    admin(&s, &headers)?;
    if let Some(v) = s.ask(|reply| Request::Job { job: id, reply }).await? {
        return Ok(Json(v));
    }
    let history = s.history.clone();
    tokio::task::spawn_blocking(move || history.get(id))
        .await
        .map_err(|e| ApiError::new(500, e.to_string()))?
        .map_err(|e| ApiError::new(500, e.to_string()))?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no job {id}")))
}

/// A page of the ended jobs that have left memory (older than the server's `min_job_age`),
/// by number: their last view, with the same filters and cursor as `GET /v1/jobs`.
#[utoipa::path(get, path = "/v1/history", tag = "jobs", params(JobsQuery), security(("token" = [])),
    responses(
        (status = 200, description = "a page of ended jobs", body = JobList),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
    ))]
pub async fn history(
    State(s): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<JobsQuery>, QueryRejection>,
) -> Result<Json<JobList>, ApiError> {
    admin(&s, &headers)?;
    let filter = query_filter(query)?;
    let history = s.history.clone();
    tokio::task::spawn_blocking(move || history.page(&filter))
        .await
        .map_err(|e| ApiError::new(500, e.to_string()))?
        .map(Json)
        .map_err(|e| ApiError::new(500, e.to_string()))
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
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> Result<Json<Cancelled>, ApiError> {
    admin(&s, &headers)?;
    s.ask(|reply| Request::Cancel { job: id, reply }).await??;
    Ok(Json(Cancelled {
        job: id,
        cancelled: true,
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ArrayQuery {
    /// Only the elements of these indexes, `A-B` (inclusive) or `A`; default: every one.
    indexes: Option<String>,
}

/// Cancel an array's elements (every one, or those of `indexes`) that have not ended, in one
/// request; the array is known by its first job's number.
#[utoipa::path(delete, path = "/v1/arrays/{id}", tag = "jobs", params(("id" = u64, Path, description = "the array's first job"), ArrayQuery), security(("token" = [])),
    responses(
        (status = 200, description = "cancelled", body = ArrayCancelled),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such array", body = ErrorBody),
    ))]
pub async fn cancel_array(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<u64>,
    query: Result<Query<ArrayQuery>, QueryRejection>,
) -> Result<Json<ArrayCancelled>, ApiError> {
    admin(&s, &headers)?;
    let Query(q) = query.map_err(|e| ApiError::bad(e.body_text()))?;
    let indexes = q
        .indexes
        .as_deref()
        .map(parse_indexes)
        .transpose()
        .map_err(ApiError::bad)?;
    let cancelled = s
        .ask(|reply| Request::CancelArray {
            first: id,
            indexes,
            reply,
        })
        .await??;
    Ok(Json(ArrayCancelled {
        array: id,
        cancelled,
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
    headers: HeaderMap,
    Path(id): Path<u64>,
    body: String,
) -> Result<Json<Edited>, ApiError> {
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
    Ok(Json(Edited {
        job: id,
        edited: b.op,
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
    headers: HeaderMap,
) -> Result<Json<SitesView>, ApiError> {
    admin(&s, &headers)?;
    let mut v = s.ask(|reply| Request::Sites { reply }).await?;
    // Agent sites: the state of their link.
    if let Some(hub) = &s.hub {
        for site in &mut v.sites {
            if let Some((_, link)) = hub.sites.get(&site.name) {
                let status = link.status();
                if status.unreachable {
                    site.state = Some("unreachable".into());
                }
                site.link = Some(status);
            }
        }
    }
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
    ))]
pub async fn agent_token(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<AgentTokenView>, ApiError> {
    admin(&s, &headers)?;
    let Some(hub) = &s.hub else {
        return Err(ApiError::not_found(
            "this server has no agent sites (no `[[site]]` with manager = { type = \"agent\" })",
        ));
    };
    let token = hub.enrol(&name).map_err(ApiError::not_found)?;
    tracing::info!(site = %name, "an agent credential was issued");
    Ok(Json(AgentTokenView {
        token: token.encode(),
        site: name,
        server: token.server,
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
    headers: HeaderMap,
    Path(name): Path<String>,
    body: String,
) -> Result<Json<UsableAnswer>, ApiError> {
    admin(&s, &headers)?;
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
