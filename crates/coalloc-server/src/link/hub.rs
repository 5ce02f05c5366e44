//! The server's end of the agent links: it listens for agents (TLS, then a WebSocket), checks
//! each hello ([`super::proto::check_hello`]), makes the accepted connection its site's link
//! ([`AgentSite::connect`]), and runs one pump per connection around its sans-IO
//! [`super::session::server::ServerSession`], held in the site's shared state
//! ([`super::remote::Pumped`], [`super::pump::run_notified`]; DESIGN.md "Sites apart"
//! habits 1 and 7), then one cleanup: the driver hears the agent back
//! ([`Report::AgentBack`]) and gone ([`Report::AgentGone`]), which the core takes as "site
//! reconnected" and "site disconnected".
//!
//! The pump is both hand-offs of the driver's calls to the site (docs/design-link.md, "The
//! submit path"): woken by the driver's [`crate::msg::SiteLink::send`], it moves the calls
//! into its session and writes them; after every input it sends what the agent's answers
//! became ([`Report`]s) on the driver's inbox. Calls an agent relays for its components are
//! served by the server's own router, in process, exactly as if they had come over HTTP, so
//! a job's secret works for that job only, through any agent.
//!
//! Enrolment: [`Hub::enrol`] makes a site's credential (a random secret; the server keeps its
//! SHA-256 in `agents/credentials.json`, mode 0600) and the token that carries it with the
//! server's agent address and certificate fingerprint. Enrolling a site again replaces its
//! credential: the old agent is refused from its next connection on.

use super::proto::{
    check_hello, relayable, secret_hash, EnrolToken, FromAgent, HeldLaunch, ToAgent, VERSION,
};
use super::pump::{self, text};
use super::remote::{AgentSite, Answerer};
use super::session::server::ServerEvent;
use crate::msg::{Msg, Report};
use futures_util::{SinkExt, StreamExt};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;

/// What the server keeps for its agents.
pub struct Hub {
    /// Agent sites by name, with their index in the configuration.
    pub sites: BTreeMap<String, (usize, Arc<AgentSite>)>,
    /// The address agents are told to reach (`wss://HOST:PORT`).
    pub url: String,
    /// The certificate's fingerprint, `sha256:…`.
    pub fingerprint: String,
    pub heartbeat: Duration,
    credentials: PathBuf,
    /// The other servers' agent addresses (standbys on the same journal), which tokens
    /// list after [`Hub::url`] so that agents follow whichever leads.
    pub others: Vec<String>,
    /// Where a new credential is written first (the servers' shared database).
    mirror: Option<crate::state::Mirror>,
}

/// How long a new connection may take to finish TLS, the upgrade and its hello.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// The largest answer of a relayed call (a rendezvous value is at most 1 MiB).
const RELAY_LIMIT: usize = 2 << 20;

impl Hub {
    pub fn new(
        sites: BTreeMap<String, (usize, Arc<AgentSite>)>,
        url: String,
        fingerprint: String,
        heartbeat: Duration,
        credentials: PathBuf,
    ) -> Hub {
        Hub {
            sites,
            url,
            fingerprint,
            heartbeat,
            credentials,
            others: Vec::new(),
            mirror: None,
        }
    }

    /// This hub with every server's agent address (`all`, `server.agent_urls`: tokens list
    /// them in this order, instead of this server's alone) and the shared database its
    /// credentials are also written to (`mirror`).
    pub fn with_peers(self, all: &[String], mirror: Option<crate::state::Mirror>) -> Hub {
        let (url, others) = match all.split_first() {
            Some((first, rest)) => (first.clone(), rest.to_vec()),
            None => (self.url.clone(), Vec::new()),
        };
        Hub {
            url,
            others,
            mirror,
            ..self
        }
    }

    fn read_credentials(&self) -> BTreeMap<String, String> {
        std::fs::read_to_string(&self.credentials)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    /// A new credential for site `site` and its enrolment token.
    pub fn enrol(&self, site: &str) -> Result<EnrolToken, String> {
        let secret = crate::state::random_hex(32).map_err(|e| e.to_string())?;
        let mut all = self.read_credentials();
        all.insert(site.to_string(), secret_hash(&secret));
        let text = serde_json::to_string_pretty(&all).map_err(|e| e.to_string())?;
        let (name, mirror) = ("agents/credentials.json", self.mirror.as_ref());
        crate::state::save_shared(&self.credentials, name, text.as_bytes(), mirror)
            .map_err(|e| format!("saving the credential: {e}"))?;
        Ok(EnrolToken {
            server: self.url.clone(),
            others: self.others.clone(),
            fingerprint: self.fingerprint.clone(),
            site: site.to_string(),
            secret,
        })
    }

    /// Accept agents on `listener` for as long as the server runs.
    pub async fn listen(
        self: Arc<Hub>,
        listener: TcpListener,
        tls: Arc<rustls::ServerConfig>,
        router: axum::Router,
        driver: std::sync::mpsc::Sender<Msg>,
    ) {
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let (hub, acceptor, router, driver) = (
                self.clone(),
                acceptor.clone(),
                router.clone(),
                driver.clone(),
            );
            tokio::spawn(async move {
                if let Err(e) = hub.connection(stream, acceptor, router, driver).await {
                    tracing::warn!(%peer, "agent connection: {e}");
                }
            });
        }
    }

    async fn connection(
        &self,
        stream: TcpStream,
        acceptor: tokio_rustls::TlsAcceptor,
        router: axum::Router,
        driver: std::sync::mpsc::Sender<Msg>,
    ) -> Result<(), String> {
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let handshake = async {
            let tls = acceptor
                .accept(stream)
                .await
                .map_err(|e| format!("TLS: {e}"))?;
            let mut ws = tokio_tungstenite::accept_async(tls)
                .await
                .map_err(|e| format!("WebSocket upgrade: {e}"))?;
            let hello = loop {
                match ws.next().await {
                    Some(Ok(Message::Text(t))) => break t,
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    other => return Err(format!("no hello: {other:?}")),
                }
            };
            Ok::<_, String>((ws, hello))
        };
        let (mut ws, hello) = tokio::time::timeout(HANDSHAKE, handshake)
            .await
            .map_err(|_| "the handshake took too long".to_string())??;
        let hello = match serde_json::from_str::<FromAgent>(&hello) {
            Ok(FromAgent::Hello(h)) => h,
            Ok(_) => return Err("the first message is not a hello".into()),
            Err(e) => return Err(format!("an unreadable hello: {e}")),
        };
        let credentials = self.read_credentials();
        let checked = check_hello(&hello, |s| {
            self.sites
                .contains_key(s)
                .then(|| credentials.get(s).cloned())
        });
        let name = match checked {
            Ok(name) => name,
            Err(refusal) => {
                tracing::warn!(%peer, site = %hello.site, "agent refused: {refusal}");
                let m = ToAgent::Refused {
                    reason: refusal.to_string(),
                };
                let _ = ws.send(text(&m)).await;
                let _ = ws.close(None).await;
                return Ok(());
            }
        };
        let (index, site) = self.sites[&name].clone();
        let welcome = ToAgent::Welcome {
            version: VERSION,
            role: super::proto::Role::Server,
            heartbeat_ms: self.heartbeat.as_millis() as u64,
        };
        site.announced(hello.reserve.clone());
        let mut pumped = site.connect(Instant::now(), self.heartbeat, welcome);
        tracing::info!(%peer, site = %name, relay = %hello.relay_url, held = hello.launches.len(), reserve = ?hello.reserve, "agent connected");
        let _ = driver.send(Msg::Site(Report::AgentBack {
            site: index,
            held: hello.launches,
        }));
        let wake = pumped.wake.clone();
        let why = pump::run_notified(ws, &mut pumped, &wake, |pumped| {
            let (reports, relays) = pumped.take();
            // The hand-off back: the agent's answers, as the driver's reports, on its inbox.
            for r in reports {
                let _ = driver.send(Msg::Site(r));
            }
            for e in relays {
                self.relay_event(&pumped.answerer(), e, &router);
            }
        })
        .await;
        let (reports, still_up) = pumped.end();
        for r in reports {
            let _ = driver.send(Msg::Site(r));
        }
        // The core hears the silence (a disconnect, then a reconnect or a loss past the
        // site's grace) unless a newer connection of the site is already up.
        if !still_up {
            let _ = driver.send(Msg::Site(Report::AgentGone { site: index }));
        }
        tracing::warn!(%peer, site = %name, "agent disconnected: {why}");
        Ok(())
    }

    /// A call a component relayed through its agent: served by the server's own router on
    /// a task of its own, answered on the connection it came from.
    fn relay_event(&self, answerer: &Answerer, e: ServerEvent, router: &axum::Router) {
        if let ServerEvent::Relay {
            id,
            method,
            path,
            authorization,
            body,
        } = e
        {
            let (router, answerer) = (router.clone(), answerer.clone());
            tokio::spawn(async move {
                let (status, body) = relay(router, &method, &path, authorization, body).await;
                answerer.send(ToAgent::RelayAnswer { id, status, body });
            });
        }
    }
}

/// Serve a relayed call with the server's own router.
async fn relay(
    router: axum::Router,
    method: &str,
    path: &str,
    authorization: Option<String>,
    body: String,
) -> (u16, String) {
    use tower::ServiceExt;
    let refuse = |status: u16, m: &str| (status, serde_json::json!({ "error": m }).to_string());
    if !relayable(method, path) {
        return refuse(
            404,
            "an agent relays only the barrier and the rendezvous store",
        );
    }
    let mut req = axum::http::Request::builder().method(method).uri(path);
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    let Ok(req) = req.body(axum::body::Body::from(body)) else {
        return refuse(400, "a relayed call that is not a valid request");
    };
    let Ok(resp) = router.oneshot(req).await;
    let status = resp.status().as_u16();
    match axum::body::to_bytes(resp.into_body(), RELAY_LIMIT).await {
        Ok(b) => (status, String::from_utf8_lossy(&b).into_owned()),
        Err(e) => refuse(502, &format!("reading the answer: {e}")),
    }
}

/// The launches an agent holds that the server no longer wants: not known, ended, or not the
/// current launch of their component.
pub fn unwanted(held: &[HeldLaunch], wanted: impl Fn(u64) -> bool) -> Vec<&HeldLaunch> {
    held.iter().filter(|h| !wanted(h.launch)).collect()
}
