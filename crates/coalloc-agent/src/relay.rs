//! The agent's relay: a small HTTP server on an address the site's compute nodes reach,
//! which takes the component runtime's barrier and rendezvous calls (seed 002 §3.3; the wire
//! format of coalloc-runtime) and carries each over the agent's link to the server, whose
//! answer it hands back. While the link is down it answers 503, which the runtime retries
//! (with its back-off) until the link is back, so a component waiting at the barrier rides
//! out an agent restart or a cut link.

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use coalloc_link::proto::{relayable, FromAgent};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc::UnboundedSender, oneshot};

/// Longer than the server's barrier hold (25 s by default).
const RELAY_TIMEOUT: Duration = Duration::from_secs(80);

/// The relay's state, shared with the agent's connection loop.
#[derive(Clone, Default)]
pub struct Relay {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    link: Mutex<Option<UnboundedSender<FromAgent>>>,
    waiting: Mutex<BTreeMap<u64, oneshot::Sender<(u16, String)>>>,
    next: AtomicU64,
}

impl Relay {
    pub fn new() -> Relay {
        Relay::default()
    }

    /// The link came up (`Some`) or went down (`None`): calls in flight then fail with 503.
    pub fn linked(&self, link: Option<UnboundedSender<FromAgent>>) {
        let down = link.is_none();
        *self.inner.link.lock().unwrap_or_else(|p| p.into_inner()) = link;
        if down {
            self.inner
                .waiting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clear();
        }
    }

    pub fn answered(&self, id: u64, status: u16, body: String) {
        let w = self
            .inner
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        if let Some(w) = w {
            let _ = w.send((status, body));
        }
    }

    /// Serve components on `listener` for as long as the agent runs.
    pub async fn serve(self, listener: tokio::net::TcpListener) {
        let app = axum::Router::new()
            .route(
                "/v1/health",
                axum::routing::get(|| async { "{\"ok\":true,\"relay\":true}" }),
            )
            .fallback(handle)
            .with_state(self);
        use axum::serve::ListenerExt;
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("the relay stopped: {e}");
        }
    }

    async fn forward(
        &self,
        method: &str,
        path: &str,
        auth: Option<String>,
        body: String,
    ) -> Response {
        let unavailable = || {
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the site agent has no link to the server at the moment; try again",
            )
        };
        let Some(link) = self
            .inner
            .link
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        else {
            return unavailable();
        };
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = oneshot::channel();
        self.inner
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        let m = FromAgent::Relay {
            id,
            method: method.to_string(),
            path: path.to_string(),
            authorization: auth,
            body,
        };
        if link.send(m).is_err() {
            return unavailable();
        }
        match tokio::time::timeout(RELAY_TIMEOUT, rx).await {
            Ok(Ok((status, body))) => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
                (status, body).into_response()
            }
            _ => {
                self.inner
                    .waiting
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id);
                unavailable()
            }
        }
    }
}

fn error(status: StatusCode, m: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "error": m }))).into_response()
}

async fn handle(
    axum::extract::State(relay): axum::extract::State<Relay>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    if !relayable(method.as_str(), path) {
        return error(
            StatusCode::NOT_FOUND,
            "a site agent relays only a job's barrier and rendezvous calls",
        );
    }
    let Ok(body) = String::from_utf8(body.to_vec()) else {
        return error(StatusCode::BAD_REQUEST, "the body is not UTF-8");
    };
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    relay.forward(method.as_str(), path, auth, body).await
}
