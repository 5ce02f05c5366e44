//! `coalloc agent`: the process on a site's login node (or any host with the site's
//! resource-manager client) that hosts the site's backend, as the server hosts a direct
//! site's, and connects out to the server, so that the site opens no inbound port to the
//! world. Seed 003 §3.1.2's gatekeeper and job manager, on one outbound link.
//!
//! It keeps its identity and its launches across restarts (its state directory), reconnects
//! with a jittered back-off that stops at once when the server refuses its credential or
//! presents another certificate than the pinned one (DESIGN.md "Sites apart" §5), answers
//! the server's calls on its backend, and relays its components' barrier and rendezvous
//! calls ([`crate::relay`]), which carry the PMI traffic of `mpi` components too.
//!
//! Advance reservations (issue 31 item 3): the agent makes them with the rights its site
//! grants it (a Slurm operator account, an `arusers` member). Its hello says whether its
//! site may ([`Agent::reserving`]: the backend's `may_reserve` and the configuration's
//! `reserve`); a site that may not refuses `ReserveEarliest` and `Reserve` with the reason,
//! and still lists and deletes its reservations (those made before it was forbidden).

use crate::config::AgentConfig;
use crate::held::Held;
use crate::relay::Relay;
use coalloc_backends::kind::{backend_for, name_tag, BackendParts};
use coalloc_backends::{Backend, BackendError, SubmitRequest, NOT_RESERVING};
use coalloc_link::proto::{
    random_hex, Answer, Call, CallError, EnrolToken, FromAgent, HeldLaunch, Hello, Reserving, Role,
    ToAgent, VERSION,
};
use coalloc_link::pump::{self, text};
use coalloc_link::session::agent::{AgentEvent, AgentSession, AgentSessionConfig};
use coalloc_link::tls;
use futures_util::{SinkExt, StreamExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

/// Why an agent stopped for good.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{0}")]
    Setup(String),
    #[error("the server refused this agent: {0}")]
    Refused(String),
    #[error("{0}")]
    Pin(String),
}

/// How a connection ended.
enum Ended {
    /// Lost; try again (after this long connected).
    Lost(String, Duration),
    Shutdown,
}

/// What a running agent holds.
pub struct Agent {
    token: EnrolToken,
    /// `HOST:PORT` of the server's agent listener.
    /// Every server's `HOST:PORT` (the token's, or the override's): the leader among them
    /// is the one that welcomes this agent.
    servers: Vec<String>,
    config: AgentConfig,
    backend: Arc<dyn Backend>,
    held: Arc<Held>,
    /// The launches being submitted, from before their manager is called until they are
    /// recorded in `held` (or failed): a submission of one of them waits for that one's end
    /// (`Agent::submit`).
    submitting: (
        std::sync::Mutex<std::collections::BTreeSet<u64>>,
        std::sync::Condvar,
    ),
    state_dir: PathBuf,
    /// This program (`coalloc`) on the agent's host: an `mpi` component's PMI proxy runs
    /// from here, wherever the server's copy is.
    program: Option<PathBuf>,
}

impl Agent {
    /// Set up: the backend (in `state_dir/sites/NAME` for a local site) and the record of
    /// launches. `server` overrides the token's addresses (`HOST:PORT`, or a URL; several
    /// comma-separated).
    pub fn new(
        token: EnrolToken,
        server: Option<&str>,
        config: AgentConfig,
        state_dir: &Path,
        launcher: Option<coalloc_backends::local::LauncherCommand>,
    ) -> Result<Agent, AgentError> {
        same_site(&token, &config)?;
        let program = launcher.as_ref().map(|l| l.program.clone());
        let parts = BackendParts {
            index: 0,
            work_dir: state_dir.join("sites").join(&config.site.name),
            launcher,
            cloud_on_demand: false,
            name_tag: name_tag(state_dir),
        };
        let backend = backend_for(&config.site, &config.backend, parts)
            .map_err(|e| AgentError::Setup(format!("site `{}`: {e}", config.site.name)))?;
        Agent::with_backend(token, server, config, state_dir, backend, program)
    }

    /// Set up with a backend made by the caller (an embedding, a test's fake site);
    /// `program` is this host's `coalloc`, for `mpi` components' PMI proxies.
    pub fn with_backend(
        token: EnrolToken,
        server: Option<&str>,
        config: AgentConfig,
        state_dir: &Path,
        backend: Arc<dyn Backend>,
        program: Option<PathBuf>,
    ) -> Result<Agent, AgentError> {
        same_site(&token, &config)?;
        let servers = match server {
            Some(list) => list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(host_port)
                .collect(),
            None => token.servers().map(host_port).collect(),
        };
        let setup = |e: std::io::Error| AgentError::Setup(format!("{}: {e}", state_dir.display()));
        std::fs::create_dir_all(state_dir).map_err(setup)?;
        let held = Held::open(state_dir.join("launches.jsonl")).map_err(setup)?;
        Ok(Agent {
            token,
            servers,
            config,
            backend,
            held: Arc::new(held),
            submitting: Default::default(),
            state_dir: state_dir.to_path_buf(),
            program,
        })
    }

    /// Serve until `shutdown` resolves, or the server refuses this agent for good.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), AgentError> {
        let this = Arc::new(self);
        let listener = tokio::net::TcpListener::bind(&this.config.relay_bind)
            .await
            .map_err(|e| {
                AgentError::Setup(format!("relay_bind {}: {e}", this.config.relay_bind))
            })?;
        let relay = Relay::new();
        tokio::spawn(relay.clone().serve(listener));
        tracing::info!(site = %this.config.site.name, servers = %this.servers.join(","), relay = %this.config.relay_url, "agent started");
        tokio::pin!(shutdown);
        let mut session = AgentSession::new(
            Instant::now(),
            AgentSessionConfig {
                stop_after: this.config.stop_after,
            },
        );
        let mut backoff = Duration::from_millis(100);
        // Which server to try next: after a loss, the next in the list, at once while a
        // round lasts (the one that leads may be any), with the back-off between rounds.
        let mut turn = 0usize;
        loop {
            let server = this.servers[turn % this.servers.len()].clone();
            let ended = tokio::select! {
                r = this.clone().connect_once(&server, &relay, &mut session) => r?,
                _ = &mut shutdown => Ended::Shutdown,
            };
            match ended {
                Ended::Shutdown => return Ok(()),
                Ended::Lost(why, lasted) => {
                    if lasted > Duration::from_secs(10) {
                        backoff = Duration::from_millis(100);
                    }
                    turn += 1;
                    let round = turn.is_multiple_of(this.servers.len());
                    let wait = if round {
                        backoff + jitter(backoff / 2)
                    } else {
                        Duration::from_millis(20)
                    };
                    let next = &this.servers[turn % this.servers.len()];
                    tracing::warn!(site = %this.config.site.name, %server, "link to the server lost ({why}); {next} in {} ms", wait.as_millis());
                    let until = tokio::time::Instant::now() + wait;
                    // While waiting, the session's timer runs on (heartbeat stop).
                    loop {
                        let timer = session.poll_timeout().map(tokio::time::Instant::from_std);
                        tokio::select! {
                            _ = tokio::time::sleep_until(until) => break,
                            _ = sleep_until_some(timer) => {
                                session.handle_timeout(Instant::now());
                                this.clone().take_events(&mut session, &relay, None);
                            }
                            _ = &mut shutdown => return Ok(()),
                        }
                    }
                    if round {
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
        }
    }

    async fn connect_once(
        self: Arc<Self>,
        server: &str,
        relay: &Relay,
        session: &mut AgentSession,
    ) -> Result<Ended, AgentError> {
        let lost = |why: String| Ok(Ended::Lost(why, Duration::ZERO));
        let tcp = match tokio::time::timeout(
            Duration::from_secs(5),
            tokio::net::TcpStream::connect(server),
        )
        .await
        {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return lost(format!("connect {server}: {e}")),
            Err(_) => return lost(format!("connect {server}: timed out")),
        };
        let _ = tcp.set_nodelay(true);
        let config = tls::agent_config(&self.token.fingerprint)
            .map_err(|e| AgentError::Setup(format!("TLS: {e}")))?;
        let name = rustls::pki_types::ServerName::try_from(tls::SERVER_NAME)
            .expect("a valid name")
            .to_owned();
        // A frozen server's kernel still accepts the connection: every step is bounded.
        let handshake = Duration::from_secs(5);
        let tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp);
        let stream = match tokio::time::timeout(handshake, tls).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) if tls::is_pin_mismatch(&e) => {
                return Err(AgentError::Pin(format!(
                    "refusing the server at {server}: {e}"
                )))
            }
            Ok(Err(e)) => return lost(format!("TLS: {e}")),
            Err(_) => return lost(format!("TLS with {server}: timed out")),
        };
        let url = format!("wss://{server}/agent");
        let upgrade = tokio_tungstenite::client_async(url, stream);
        let mut ws = match tokio::time::timeout(handshake, upgrade).await {
            Ok(Ok((ws, _))) => ws,
            Ok(Err(e)) => return lost(format!("WebSocket: {e}")),
            Err(_) => return lost(format!("WebSocket with {server}: timed out")),
        };
        let hello = FromAgent::Hello(Hello {
            version: VERSION,
            role: Role::Agent,
            site: self.config.site.name.clone(),
            secret: self.token.secret.clone(),
            relay_url: self.config.relay_url.clone(),
            launches: self.held.all(),
            reserve: self.reserving(),
        });
        if let Err(e) = ws.send(text(&hello)).await {
            return lost(format!("hello: {e}"));
        }
        loop {
            match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
                Ok(Some(Ok(Message::Text(t)))) => match serde_json::from_str::<ToAgent>(&t) {
                    Ok(m @ (ToAgent::Welcome { .. } | ToAgent::Refused { .. })) => {
                        session.handle(Instant::now(), m);
                        break;
                    }
                    _ => return lost("no welcome".into()),
                },
                Ok(Some(Ok(_))) => continue,
                Ok(other) => return lost(format!("no welcome: {other:?}")),
                Err(_) => return lost("no welcome within 10 s".into()),
            }
        }
        while let Some(e) = session.poll_event() {
            if let AgentEvent::Refused(reason) = e {
                return Err(AgentError::Refused(reason));
            }
        }
        let since = Instant::now();
        tracing::info!(site = %self.config.site.name, held = self.held.all().len(), "connected to the server");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<FromAgent>();
        relay.linked(Some(tx.clone()));
        let why = pump::run(ws, session, &mut rx, |session| {
            self.clone().take_events(session, relay, Some(&tx))
        })
        .await;
        relay.linked(None);
        Ok(Ended::Lost(why, since.elapsed()))
    }

    /// Carry out what the session asks: calls on the backend (answered through `tx`, the
    /// pump's queue, when a connection is up), relayed answers, and the heartbeat stop.
    fn take_events(
        self: Arc<Self>,
        session: &mut AgentSession,
        relay: &Relay,
        tx: Option<&tokio::sync::mpsc::UnboundedSender<FromAgent>>,
    ) {
        while let Some(e) = session.poll_event() {
            match e {
                AgentEvent::Call { id, call } => {
                    let Some(tx) = tx.cloned() else { continue };
                    let this = self.clone();
                    tokio::task::spawn_blocking(move || {
                        let result = this.execute(call);
                        let _ = tx.send(FromAgent::Answer { id, result });
                    });
                }
                AgentEvent::RelayAnswer { id, status, body } => relay.answered(id, status, body),
                AgentEvent::StopLaunches { silent_for } => {
                    tracing::warn!(site = %self.config.site.name, "no word from the server for {} s: stopping this site's launches (stop_after)", silent_for.as_secs());
                    let this = self.clone();
                    tokio::task::spawn_blocking(move || this.stop_launches());
                }
                AgentEvent::Welcomed { .. } | AgentEvent::LinkDown(_) => {}
                AgentEvent::Refused(reason) => {
                    tracing::warn!(site = %self.config.site.name, "refused: {reason}")
                }
            }
        }
    }

    /// Heartbeat stop: cancel every launch held (the server re-places their jobs past its
    /// grace, and cancels what is left when the agent is back). A stopped launch stays in
    /// the record until the server hears of it (a query finds it ended, or it asks its
    /// cancel), as any other ended launch does: the next hello lists it, so that a server
    /// that lost its id in a crash adopts it, learns it ended and has it discarded from the
    /// manager's log with its job, and a repeated submission of its number gets its id
    /// again rather than starting a new launch the server never hears of (the simulation
    /// harness, `--policies` seeds 3711 and 4629, `--failover` seed 5561: the launch it
    /// stopped stayed in the log for ever).
    fn stop_launches(&self) {
        let all = self.held.all();
        let mut stopped = 0;
        for h in &all {
            match self.backend.cancel(&h.remote) {
                Ok(()) => stopped += 1,
                Err(e) => tracing::warn!(launch = h.launch, "stopping a launch: {e}"),
            }
        }
        tracing::warn!(site = %self.config.site.name, stopped, of = all.len(), "launches stopped");
    }

    /// Whether this agent's site may make advance reservations, and if not why: the
    /// configuration's `reserve` first, then the backend's `may_reserve`.
    pub fn reserving(&self) -> Reserving {
        if !self.config.reserve {
            Reserving::MayNot(format!(
                "the agent of site `{}` is configured not to reserve (agent.reserve = false)",
                self.config.site.name
            ))
        } else if !self.backend.may_reserve() {
            Reserving::MayNot(format!("site `{}`: {NOT_RESERVING}", self.config.site.name))
        } else {
            Reserving::May
        }
    }

    /// Carry out one of the server's calls on the site's backend (blocking).
    fn execute(&self, call: Call) -> Result<Answer, CallError> {
        let err = call_error;
        match call {
            Call::Submit(req) => self
                .submit(vec![*req])
                .pop()
                .unwrap_or_else(|| Err(CallError::Unavailable("no submission made".into())))
                .map(Answer::Submitted),
            Call::SubmitMany(reqs) => Ok(Answer::SubmittedMany(self.submit(reqs))),
            Call::Query(ids) => {
                let states = self.backend.query(&ids).map_err(err)?;
                let ended: Vec<u64> = ids
                    .iter()
                    .zip(&states)
                    .filter(|(_, s)| s.is_final())
                    .filter_map(|(id, _)| self.held.by_remote(id))
                    .collect();
                self.held.ended(&ended);
                Ok(Answer::States(states))
            }
            Call::Cancel(remote) => {
                self.backend.cancel(&remote).map_err(err)?;
                if let Some(l) = self.held.by_remote(&remote) {
                    self.held.ended(&[l]);
                }
                Ok(Answer::Done)
            }
            Call::CancelUnrecorded {
                job,
                component,
                launch,
            } => {
                if let Some(h) = self.held.get(launch) {
                    self.backend.cancel(&h.remote).map_err(err)?;
                    self.held.ended(&[launch]);
                }
                self.backend
                    .cancel_unrecorded(job, component, launch)
                    .map_err(err)?;
                Ok(Answer::Done)
            }
            Call::Load => self.backend.load().map(Answer::Load).map_err(err),
            Call::Discard(ids) => {
                self.backend.discard(&ids);
                Ok(Answer::Done)
            }
            Call::File(op) => coalloc_backends::files::local(&self.state_dir, op)
                .map(Answer::File)
                .map_err(CallError::Rejected),
            Call::ReserveEarliest {
                count,
                duration_ms,
                not_before_ms,
            } => {
                self.may_reserve()?;
                self.backend
                    .reserve_earliest(count, duration_ms, not_before_ms)
                    .map(Answer::Earliest)
                    .map_err(err)
            }
            Call::Reserve {
                name,
                count,
                start_ms,
                duration_ms,
            } => {
                self.may_reserve()?;
                self.backend
                    .reserve(&name, count, start_ms, duration_ms)
                    .map_err(err)?;
                tracing::info!(site = %self.config.site.name, %name, count, start_ms, duration_ms, "reserved");
                Ok(Answer::Done)
            }
            Call::Unreserve(name) => {
                self.backend.unreserve(&name).map_err(err)?;
                Ok(Answer::Done)
            }
            Call::Reservations => self
                .backend
                .reservations()
                .map(Answer::Reservations)
                .map_err(err),
        }
    }

    /// A reservation call's refusal when this site may not reserve.
    fn may_reserve(&self) -> Result<(), CallError> {
        match self.reserving() {
            Reserving::May => Ok(()),
            Reserving::MayNot(why) => Err(CallError::Rejected(why)),
        }
    }

    /// Submit components, once each: a launch already made answers with its id (a repeated
    /// submission after a lost answer starts nothing). The new launches are recorded
    /// together, with one sync, before any id is answered; one result per request, in order.
    fn submit(&self, reqs: Vec<SubmitRequest>) -> Vec<Result<String, CallError>> {
        // One submission of a launch at a time: a server that took over from a leader whose
        // submission this agent was still making (in a thread of the connection that
        // ended) sends it again, since the agent's hello could not list it yet; the second
        // waits for the first and answers its id, and nothing starts twice (issue 32).
        let launches: Vec<u64> = reqs.iter().map(|r| r.launch).collect();
        let _claim = Submitting::claim(&self.submitting, launches);
        let made: Vec<Result<Launched, CallError>> = if self.backend.submits_in_parallel() {
            std::thread::scope(|sc| {
                let hs: Vec<_> = reqs
                    .into_iter()
                    .map(|r| sc.spawn(move || self.launch(r)))
                    .collect();
                hs.into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(CallError::Unavailable("a submission panicked".into()))
                        })
                    })
                    .collect()
            })
        } else {
            reqs.into_iter().map(|r| self.launch(r)).collect()
        };
        let new: Vec<HeldLaunch> = made
            .iter()
            .filter_map(|m| match m {
                Ok(Launched::New(h)) => Some(h.clone()),
                _ => None,
            })
            .collect();
        let unrecorded = self.held.made(&new).err().map(|e| {
            // Not recorded: they must not run unknown to a restarted agent.
            for h in &new {
                let _ = self.backend.cancel(&h.remote);
            }
            format!("recording the launch: {e}")
        });
        made.into_iter()
            .map(|m| match (m?, &unrecorded) {
                (Launched::Known(remote), _) => Ok(remote),
                (Launched::New(_), Some(e)) => Err(CallError::Unavailable(e.clone())),
                (Launched::New(h), None) => Ok(h.remote),
            })
            .collect()
    }

    /// Submit one component unless its launch was made before (not recorded yet).
    fn launch(&self, req: SubmitRequest) -> Result<Launched, CallError> {
        if let Some(h) = self.held.get(req.launch) {
            return Ok(Launched::Known(h.remote));
        }
        let req = self.localize(req);
        let remote = self.backend.submit(&req).map_err(call_error)?;
        Ok(Launched::New(HeldLaunch {
            launch: req.launch,
            job: req.job,
            component: req.component,
            remote,
        }))
    }

    /// A request as this site runs it: the server's URL replaced by the relay's in the
    /// component's configuration, the site's own environment added, and the output files
    /// in the agent's state directory.
    fn localize(&self, mut req: SubmitRequest) -> SubmitRequest {
        let server = req
            .environment
            .iter()
            .find(|(k, _)| k == "COALLOC_URL")
            .map(|(_, v)| v.clone());
        // `COALLOC_URL` may list the server's standbys after it: all are the relay here.
        let first = server.as_deref().and_then(|s| s.split(',').next());
        if let Some(first) = first.filter(|s| !s.is_empty()) {
            for (k, v) in req.environment.iter_mut() {
                if k == "COALLOC_URL" {
                    *v = self.config.relay_url.clone();
                } else if let Some(rest) = v.strip_prefix(first) {
                    *v = format!("{}{rest}", self.config.relay_url);
                }
            }
        }
        req.environment
            .extend(self.config.environment.iter().cloned());
        // GRAM's site variables, expanded here where the component lands.
        coalloc_backends::site_vars::expand(&mut req, &self.state_dir.join("scratch"));
        // The input file the server's transfers put under this agent's state directory.
        for (k, v) in req.environment.iter_mut() {
            if k == "COALLOC_INPUT_FILE" && std::path::Path::new(v.as_str()).is_relative() {
                *v = self.state_dir.join(&*v).to_string_lossy().into_owned();
            }
        }
        // An `mpi` component runs under the PMI proxy of this host's coalloc.
        if req.arguments.first().map(String::as_str) == Some("pmi-proxy") {
            if let Some(p) = &self.program {
                req.executable = p.display().to_string();
            }
        }
        let out = self.state_dir.join("output").join(req.job.to_string());
        let _ = std::fs::create_dir_all(&out);
        for p in [&mut req.stdout, &mut req.stderr] {
            if let Some(name) = p.file_name() {
                *p = out.join(name);
            }
        }
        req
    }
}

/// The token and the configuration name the same site.
fn same_site(token: &EnrolToken, config: &AgentConfig) -> Result<(), AgentError> {
    if token.site != config.site.name {
        return Err(AgentError::Setup(format!(
            "the token is for site `{}`, the configuration for site `{}`",
            token.site, config.site.name
        )));
    }
    Ok(())
}

/// A submission's launch: made before (its id answered again) or made now.
enum Launched {
    Known(String),
    New(HeldLaunch),
}

fn call_error(e: BackendError) -> CallError {
    match e {
        BackendError::Rejected(m) => CallError::Rejected(m),
        other => CallError::Unavailable(other.to_string()),
    }
}

/// Sleep until `t`, or for ever without one.
async fn sleep_until_some(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// `HOST:PORT` of `wss://HOST:PORT/...`, `https://HOST:PORT` or `HOST:PORT`.
fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// Up to `max` of jitter, from the operating system's randomness.
fn jitter(max: Duration) -> Duration {
    let r = random_hex(4)
        .ok()
        .and_then(|h| u32::from_str_radix(&h[..8], 16).ok())
        .unwrap_or(0);
    max.mul_f64(f64::from(r) / f64::from(u32::MAX))
}

/// Launches claimed in `Agent::submitting` until dropped.
struct Submitting<'a> {
    set: &'a (
        std::sync::Mutex<std::collections::BTreeSet<u64>>,
        std::sync::Condvar,
    ),
    launches: Vec<u64>,
}

impl<'a> Submitting<'a> {
    /// Wait until none of `launches` is being submitted, then claim them all at once (no
    /// claim waits while it holds another: no deadlock between bursts).
    fn claim(
        set: &'a (
            std::sync::Mutex<std::collections::BTreeSet<u64>>,
            std::sync::Condvar,
        ),
        launches: Vec<u64>,
    ) -> Submitting<'a> {
        let (lock, cv) = set;
        let mut busy = lock.lock().unwrap_or_else(|p| p.into_inner());
        while launches.iter().any(|l| busy.contains(l)) {
            busy = cv.wait(busy).unwrap_or_else(|p| p.into_inner());
        }
        busy.extend(launches.iter().copied());
        Submitting { set, launches }
    }
}

impl Drop for Submitting<'_> {
    fn drop(&mut self) {
        let (lock, cv) = self.set;
        let mut busy = lock.lock().unwrap_or_else(|p| p.into_inner());
        for l in &self.launches {
            busy.remove(l);
        }
        cv.notify_all();
    }
}

#[cfg(test)]
mod tests;
