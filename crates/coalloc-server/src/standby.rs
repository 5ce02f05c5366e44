//! A standby server (issue 32, item 2): a `coalloc serve` on a PostgreSQL journal whose lease
//! another server holds ([`crate::journal::postgres::lease`]). While it waits it builds
//! nothing (no backend, no agent listener, no local socket, no driver: it schedules
//! nothing), and its API answers every call, `/v1/health` included, with 503 and the
//! leader's address: `{"error": "...", "leader": URL}` and the header `Coalloc-Leader: URL`,
//! so that a client or a load balancer turns to the leader; its `server.json` says so
//! (`"standby": true`, `"leader"`), so that the CLI on its host hears the same. Once the lease is its own, the
//! answering stops and the server starts as a restart does: the snapshot read, the journal's
//! tail replayed, running components adopted (`crate::driver`).
//!
//! A leader that loses the lease stops at once: [`deposed`] ends the process.
//!
//! The files the servers share (tokens, credentials, generated certificates,
//! `crate::journal::postgres::shared`) are adopted from the database before a server answers
//! and again when it leads ([`adopt_shared`]); the leader writes its changes there first
//! ([`mirror`]).

use crate::config::ServerConfig;
use crate::journal::{JournalError, Leader, LeaseTerms, PgJournal, SharedFiles};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// What a leader that lost its lease does: say why and exit (status 1), before anything
/// more is done in its name.
pub fn deposed(why: String) {
    tracing::error!("{why}");
    eprintln!("coalloc serve: {why}");
    std::process::exit(1);
}

/// Take the journal's lease if `config`'s journal has one (PostgreSQL), waiting as a standby
/// while another server holds it, with `listener` (the API's, served at `url`, over `tls`
/// if given) answering 503s meanwhile. `None` for SQLite, at once.
pub async fn lead(
    config: &ServerConfig,
    state: &crate::state::StateDir,
    url: &str,
    listener: &TcpListener,
    tls: Option<&crate::api_tls::Identity>,
) -> Result<Option<PgJournal>, JournalError> {
    if config.journal == crate::journal::Backing::Sqlite {
        return Ok(None);
    }
    let terms = LeaseTerms::of(Duration::from_millis(config.lease as u64), &state.root, url);
    let (tell, mut told) = watch::channel::<Option<Leader>>(None);
    let backing = config.journal.clone();
    let mut leading = tokio::task::spawn_blocking(move || {
        crate::journal::lead(
            &backing,
            &terms,
            &mut |l| {
                let _ = tell.send(Some(l.clone()));
            },
            Box::new(deposed),
        )
    });
    let led = tokio::select! {
        r = &mut leading => r,
        Ok(()) = told.changed() => {
            let leader = told.borrow().clone();
            if let Some(l) = &leader {
                eprintln!(
                    "coalloc serve: standby on {url}: the journal's lease is held by {} ({}, epoch {}); this server takes over when it runs out",
                    l.holder, l.url, l.epoch
                );
            }
            let info = serde_json::json!({ "url": url, "pid": std::process::id(),
                "fingerprint": tls.map(|t| &t.fingerprint), "standby": true,
                "leader": leader.map(|l| l.url) });
            let _ = std::fs::write(state.server_file(), format!("{info}\n"));
            let answering = match dup(listener) {
                Ok(l) => Some(answer(l, tls.map(|t| t.config.clone()), told.clone())),
                Err(e) => {
                    tracing::warn!("standby: cannot answer on the API's listener: {e}");
                    None
                }
            };
            let r = (&mut leading).await;
            if let Some(a) = answering {
                a.stop().await;
            }
            let _ = std::fs::remove_file(state.server_file());
            if matches!(r, Ok(Ok(_))) {
                eprintln!("coalloc serve: the journal's lease is this server's now: taking over");
            }
            r
        }
    };
    led.expect("the lease's task panicked")
}

/// Another handle on the same listening socket (the one the API is served on later).
fn dup(l: &TcpListener) -> std::io::Result<TcpListener> {
    use std::os::fd::AsFd;
    let fd = l.as_fd().try_clone_to_owned()?;
    let l = std::net::TcpListener::from(fd);
    l.set_nonblocking(true)?;
    TcpListener::from_std(l)
}

/// The standby's API while it answers.
struct Answering {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Answering {
    /// Stop answering (calls under way get their answer; a second at most).
    async fn stop(self) {
        let _ = self.stop.send(true);
        let mut task = self.task;
        if tokio::time::timeout(Duration::from_secs(1), &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}

/// Answer every call on `listener` with [`refusal`] of the leader `leader` holds.
fn answer(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    leader: watch::Receiver<Option<Leader>>,
) -> Answering {
    let app = axum::Router::new().fallback(move || {
        let now = leader.borrow().clone();
        async move { refusal(now.as_ref()) }
    });
    let (stop, stopping) = watch::channel(false);
    let task = tokio::spawn(async move {
        let mut stopping = stopping;
        let until = async move {
            let _ = stopping.wait_for(|s| *s).await;
        };
        let served = match tls {
            Some(config) => match crate::api_tls::TlsListener::new(listener, config) {
                Ok(l) => axum::serve(l, app).with_graceful_shutdown(until).await,
                Err(e) => Err(e),
            },
            None => {
                axum::serve(listener, app)
                    .with_graceful_shutdown(until)
                    .await
            }
        };
        if let Err(e) = served {
            tracing::warn!("standby: answering: {e}");
        }
    });
    Answering { stop, task }
}

/// A standby's answer to any call: 503, naming the leader.
pub fn refusal(leader: Option<&Leader>) -> Response {
    let (message, url) = match leader {
        Some(l) => (
            format!(
                "this server is a standby; the leader is {} ({}, epoch {})",
                l.url, l.holder, l.epoch
            ),
            l.url.clone(),
        ),
        None => ("this server is a standby".to_string(), String::new()),
    };
    let body = serde_json::json!({ "error": message, "leader": url });
    (
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        [("retry-after", "1".to_string()), ("coalloc-leader", url)],
        axum::Json(body),
    )
        .into_response()
}

/// Write the shared files of a PostgreSQL journal ([`SharedFiles`]) into the state
/// directory: as any server reads them (`leading`: `None`; the database may not be up yet,
/// which only warns), or as the leader (an error stops it). Whether any was written.
pub fn adopt_shared(
    config: &ServerConfig,
    state: &crate::state::StateDir,
    leading: Option<&SharedFiles>,
) -> Result<bool, crate::server::ServeError> {
    let crate::journal::Backing::Postgres(url) = &config.journal else {
        return Ok(false);
    };
    match leading {
        Some(shared) => shared
            .adopt(&state.root)
            .map(|n| n > 0)
            .map_err(|e| crate::server::ServeError::Refused(format!("the shared files: {e}"))),
        None => match SharedFiles::reader(url).adopt(&state.root) {
            Ok(n) => Ok(n > 0),
            Err(e) => {
                tracing::warn!("the shared files: {e}");
                Ok(false)
            }
        },
    }
}

/// What a leader writes its shared files' changes to first (`None` without a database).
pub fn mirror(shared: Option<&SharedFiles>) -> Option<crate::state::Mirror> {
    let shared = shared?.clone();
    Some(Arc::new(move |name: &str, bytes: &[u8]| {
        shared.put(name, bytes, false)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_standby_answers_503_naming_the_leader() {
        let leader = Leader {
            epoch: 4,
            holder: "db1:77".into(),
            url: "http://10.0.0.1:8080".into(),
        };
        let r = refusal(Some(&leader));
        assert_eq!(r.status().as_u16(), 503);
        assert_eq!(r.headers()["coalloc-leader"], "http://10.0.0.1:8080");
        assert_eq!(r.headers()["retry-after"], "1");
        let body = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["leader"], "http://10.0.0.1:8080");
        assert_eq!(
            v["error"],
            "this server is a standby; the leader is http://10.0.0.1:8080 (db1:77, epoch 4)"
        );
    }
}
