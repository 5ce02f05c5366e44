//! A job's output over the API (issue 33 item 4): `GET /v1/jobs/{id}/output` lists the
//! launches whose standard output and error the server holds (the state directory's
//! `output/JOB/C.LN.out|err`: local and Slurm sites write there, agent sites' files are
//! copied back when a launch ends); with `component` it answers one launch's bytes (a byte
//! range, and, with `follow`, what the launch writes next until it ends). The job's owner
//! and the admin only: another user is refused with 403, as everywhere in the API.

use super::auth::{may_touch, owner_of};
use super::AppState;
use crate::msg::{ApiError, Request};
use crate::users::Caller;
use crate::views::{ErrorBody, OutputLaunch, OutputList};
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path as FsPath, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

/// How often a followed launch's file is looked at again when nothing new was in it.
const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// The most one read of a followed file sends at once.
const CHUNK: u64 = 64 * 1024;

/// The header that carries the size of the file when the answer was made.
pub const SIZE_HEADER: &str = "x-coalloc-size";

#[derive(Deserialize, utoipa::IntoParams, Default)]
#[into_params(parameter_in = Query)]
pub struct OutputQuery {
    /// The component (its index); without it, the list of launches with output (JSON).
    component: Option<usize>,
    /// The launch (default: the component's latest launch with output).
    launch: Option<u64>,
    /// `stdout` (the default) or `stderr`.
    stream: Option<String>,
    /// The first byte to send (default 0).
    offset: Option<u64>,
    /// Send at most this many bytes (default: to the end).
    length: Option<u64>,
    /// Keep the answer open and send what the launch writes until it ends.
    follow: Option<bool>,
}

/// Which of a launch's two files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    /// `stdout` or `stderr` (a bad name is a 400 naming both).
    pub fn parse(name: Option<&str>) -> Result<Stream, ApiError> {
        match name.unwrap_or("stdout") {
            "stdout" | "out" => Ok(Stream::Stdout),
            "stderr" | "err" => Ok(Stream::Stderr),
            other => Err(ApiError::bad(format!(
                "unknown stream `{other}` (stdout, stderr)"
            ))),
        }
    }

    fn ext(self) -> &'static str {
        match self {
            Stream::Stdout => "out",
            Stream::Stderr => "err",
        }
    }
}

/// The launches of a job's output directory, by (component, launch), with their sizes.
pub fn launches(dir: &FsPath) -> BTreeMap<(usize, u64), OutputLaunch> {
    let mut found = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((stem, ext)) = name.rsplit_once('.') else {
            continue;
        };
        let Some((c, l)) = stem.split_once(".L") else {
            continue;
        };
        let (Ok(c), Ok(l)) = (c.parse::<usize>(), l.parse::<u64>()) else {
            continue;
        };
        let size = e.metadata().map(|m| m.len()).unwrap_or(0);
        let entry = found.entry((c, l)).or_insert(OutputLaunch {
            component: c,
            launch: l,
            stdout: 0,
            stderr: 0,
        });
        match ext {
            "out" => entry.stdout = size,
            "err" => entry.stderr = size,
            _ => {}
        }
    }
    found
}

/// A job's output: the list of its launches, or one launch's bytes.
#[utoipa::path(get, path = "/v1/jobs/{id}/output", tag = "jobs",
    params(("id" = u64, Path, description = "the job's number"), OutputQuery),
    security(("token" = [])),
    responses(
        (status = 200, description = "without `component`: the launches with output; with it: the launch's bytes (`x-coalloc-size` is the file's size then)",
            content((OutputList = "application/json"), (String = "text/plain", example = json!("rank 0 of 4 on node1: ok\n")))),
        (status = 400, description = "bad input", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "another user's job", body = ErrorBody),
        (status = 404, description = "no such job, or no output of that component or launch", body = ErrorBody),
    ))]
pub async fn output(
    State(s): State<AppState>,
    caller: Caller,
    Path(job): Path<u64>,
    Query(q): Query<OutputQuery>,
) -> Result<Response, ApiError> {
    let owner = owner_of(&s, job).await?;
    may_touch(&caller, job, owner.as_deref())?;
    let stream = Stream::parse(q.stream.as_deref())?;
    let dir = s.output.join(job.to_string());
    let list = {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || launches(&dir))
            .await
            .map_err(|e| ApiError::new(500, format!("listing the output: {e}")))?
    };
    let Some(component) = q.component else {
        return Ok(Json(OutputList {
            job,
            launches: list.into_values().collect(),
        })
        .into_response());
    };
    let launch = match q.launch {
        Some(l) => l,
        None => list
            .keys()
            .filter(|(c, _)| *c == component)
            .map(|(_, l)| *l)
            .max()
            .ok_or_else(|| {
                ApiError::not_found(format!("no output of job {job} component {component} yet"))
            })?,
    };
    let path = dir.join(format!("{component}.L{launch}.{}", stream.ext()));
    let size = tokio::fs::metadata(&path)
        .await
        .map_err(|_| {
            ApiError::not_found(format!(
                "no output of job {job} component {component} launch {launch}"
            ))
        })?
        .len();
    let offset = q.offset.unwrap_or(0);
    let end = q.length.map(|n| offset.saturating_add(n));
    let headers = [
        (
            CONTENT_TYPE.as_str(),
            "text/plain; charset=utf-8".to_string(),
        ),
        (SIZE_HEADER, size.to_string()),
    ];
    if q.follow != Some(true) {
        let stop = end.unwrap_or(size).min(size);
        let bytes = read_range(&path, offset, stop.saturating_sub(offset))
            .await
            .map_err(|e| ApiError::new(500, format!("reading {}: {e}", path.display())))?;
        return Ok((headers, bytes).into_response());
    }
    let follow = Follow {
        state: s,
        path,
        job,
        component,
        launch,
        at: offset,
        end,
        ended: false,
    };
    let body = futures_util::stream::unfold(follow, |mut f| async move {
        f.next().await.map(|chunk| (chunk, f))
    });
    Ok((headers, Body::from_stream(body)).into_response())
}

/// Up to `len` bytes of a file from `offset`.
async fn read_range(path: &FsPath, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    let mut f = tokio::fs::File::open(path).await?;
    f.seek(std::io::SeekFrom::Start(offset)).await?;
    let mut buf = Vec::new();
    f.take(len).read_to_end(&mut buf).await?;
    Ok(buf)
}

/// A followed launch: where the next read starts, and whether the launch has ended (then
/// what is left in the file is sent and the answer ends).
struct Follow {
    state: AppState,
    path: PathBuf,
    job: u64,
    component: usize,
    launch: u64,
    at: u64,
    end: Option<u64>,
    ended: bool,
}

impl Follow {
    /// The next bytes, or `None` at the end (the range's end, the launch's end, the
    /// server's stop).
    async fn next(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        loop {
            let want = match self.end {
                Some(e) if self.at >= e => return None,
                Some(e) => (e - self.at).min(CHUNK),
                None => CHUNK,
            };
            match read_range(&self.path, self.at, want).await {
                Ok(b) if !b.is_empty() => {
                    self.at += b.len() as u64;
                    return Some(Ok(Bytes::from(b)));
                }
                Ok(_) => {}
                Err(e) => return Some(Err(e)),
            }
            if self.ended || *self.state.stopping.borrow() {
                return None;
            }
            self.ended = !self.running().await;
            if !self.ended {
                tokio::time::sleep(FOLLOW_POLL).await;
            }
        }
    }

    /// Whether the followed launch may still write.
    async fn running(&self) -> bool {
        let job = self.job;
        let Ok(Some(view)) = self.state.ask(|reply| Request::Job { job, reply }).await else {
            return false;
        };
        if matches!(view.state.as_str(), "finished" | "failed") {
            return false;
        }
        view.components
            .iter()
            .find(|c| c.index == self.component)
            .is_some_and(|c| {
                c.launch == Some(self.launch)
                    && !matches!(c.state.as_str(), "finished" | "failed" | "deleted")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::{launches, Stream};

    #[test]
    fn launches_are_read_from_the_file_names_with_their_sizes() {
        let dir = crate::scratch::dir("output");
        std::fs::write(dir.join("0.L1.out"), "hello\n").unwrap();
        std::fs::write(dir.join("0.L1.err"), "").unwrap();
        std::fs::write(dir.join("1.L3.err"), "oops").unwrap();
        std::fs::write(dir.join("junk.txt"), "x").unwrap();
        std::fs::write(dir.join("x.Ly.out"), "x").unwrap();
        let found: Vec<_> = launches(&dir).into_values().collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].component, found[0].launch), (0, 1));
        assert_eq!((found[0].stdout, found[0].stderr), (6, 0));
        assert_eq!((found[1].component, found[1].launch), (1, 3));
        assert_eq!((found[1].stdout, found[1].stderr), (0, 4));
    }

    #[test]
    fn streams_are_named_stdout_or_stderr() {
        assert_eq!(Stream::parse(None).unwrap(), Stream::Stdout);
        assert_eq!(Stream::parse(Some("stderr")).unwrap(), Stream::Stderr);
        let e = Stream::parse(Some("both")).unwrap_err();
        assert_eq!(e.status, 400);
        assert!(e.message.contains("stdout, stderr"), "{}", e.message);
    }
}
