//! The agent's end of a link as a sans-IO machine (DESIGN.md "Sites apart" habit 1): the
//! shape of quinn-proto's `Connection`. The pump around it ([`crate::pump`]) owns the socket,
//! TLS and tokio; it feeds in what arrives ([`AgentSession::handle`], [`AgentSession::heard`],
//! [`AgentSession::closed`]) and the time ([`AgentSession::handle_timeout`] at
//! [`AgentSession::poll_timeout`]), and carries out what comes out, in this order after every
//! input: [`AgentSession::poll_transmit`] until `None` (frames to the server), then
//! [`AgentSession::poll_event`] until `None` (for the agent: calls to carry out, relayed
//! answers, "the link is silent", "stop your launches").
//!
//! Liveness: the server sets the heartbeat in its welcome; a link silent for
//! [`SILENT_BEATS`] periods is over (the pump closes it and reconnects). Heartbeat stop (as
//! Nomad's client/heartbeatstop.go): with [`AgentSessionConfig::stop_after`] set, an agent
//! that has not heard the server for that long stops its own launches, once per outage
//! ([`AgentEvent::StopLaunches`]), so that a site cut off from its server does not keep
//! processors busy for jobs the server has meanwhile placed elsewhere (the server's grace,
//! `coalloc_core::scheduler::link`, should be no longer than this). Off by default.

use crate::proto::{Answer, CallError, FromAgent, ToAgent};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Heartbeat periods of silence after which a link is over.
pub const SILENT_BEATS: u32 = 3;

/// What an agent's session is configured with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentSessionConfig {
    /// Stop the site's launches after this long without the server (`None`: never).
    pub stop_after: Option<Duration>,
}

/// What the session tells the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// The server welcomed this agent; beat every `heartbeat`.
    Welcomed { heartbeat: Duration },
    /// The server refused this agent: stop for good.
    Refused(String),
    /// Carry out call `id` and answer it with [`AgentSession::answer`].
    Call { id: u64, call: crate::proto::Call },
    /// The server's answer to relayed call `id`.
    RelayAnswer { id: u64, status: u16, body: String },
    /// The link is over (silent, or closed): reconnect.
    LinkDown(String),
    /// No word from the server for [`AgentSessionConfig::stop_after`]: stop the launches.
    StopLaunches { silent_for: Duration },
}

/// The link as the agent holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Linked {
    heartbeat: Duration,
    heard: Instant,
}

/// One agent's end of its link to the server, across its connections.
#[derive(Debug)]
pub struct AgentSession {
    config: AgentSessionConfig,
    /// The connection of the moment, once welcomed.
    link: Option<Linked>,
    /// Why the last connection ended (until the next welcome).
    down: Option<String>,
    /// When the server was last heard (the agent's start before the first connection).
    last_heard: Instant,
    /// The launches were stopped in this outage.
    stopped: bool,
    transmit: VecDeque<FromAgent>,
    events: VecDeque<AgentEvent>,
}

impl AgentSession {
    /// A session with no link yet, started at `now`.
    pub fn new(now: Instant, config: AgentSessionConfig) -> AgentSession {
        AgentSession {
            config,
            link: None,
            down: None,
            last_heard: now,
            stopped: false,
            transmit: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// Whether a welcomed link is up.
    pub fn is_linked(&self) -> bool {
        self.link.is_some()
    }

    /// A message from the server arrived at `now`.
    pub fn handle(&mut self, now: Instant, msg: ToAgent) {
        self.heard(now);
        match msg {
            ToAgent::Welcome { heartbeat_ms, .. } => {
                let heartbeat = Duration::from_millis(heartbeat_ms.max(50));
                self.link = Some(Linked {
                    heartbeat,
                    heard: now,
                });
                self.stopped = false;
                self.down = None;
                self.events.push_back(AgentEvent::Welcomed { heartbeat });
            }
            ToAgent::Refused { reason } => {
                self.link = None;
                self.down = Some(format!("refused: {reason}"));
                self.events.push_back(AgentEvent::Refused(reason));
            }
            ToAgent::Call { id, call } => self.events.push_back(AgentEvent::Call { id, call }),
            ToAgent::RelayAnswer { id, status, body } => self
                .events
                .push_back(AgentEvent::RelayAnswer { id, status, body }),
        }
    }

    /// Something arrived from the server at `now` (any frame, a ping included).
    pub fn heard(&mut self, now: Instant) {
        self.last_heard = self.last_heard.max(now);
        if let Some(l) = &mut self.link {
            l.heard = l.heard.max(now);
        }
    }

    /// The connection ended at `now` (closed by either end, or an error).
    pub fn closed(&mut self, _now: Instant, why: String) {
        if self.link.take().is_some() {
            self.down = Some(why.clone());
            self.transmit.clear();
            self.events.push_back(AgentEvent::LinkDown(why));
        }
    }

    /// Answer call `id`.
    pub fn answer(&mut self, id: u64, result: Result<Answer, CallError>) {
        self.send(FromAgent::Answer { id, result });
    }

    /// Send a message (a relayed call, an answer); dropped when no link is up (the server
    /// forgets calls made on a connection that ended, and a relayed call fails at once).
    pub fn send(&mut self, msg: FromAgent) {
        if self.link.is_some() {
            self.transmit.push_back(msg);
        }
    }

    /// The next message to send to the server.
    pub fn poll_transmit(&mut self) -> Option<FromAgent> {
        self.transmit.pop_front()
    }

    /// The next thing for the agent to do.
    pub fn poll_event(&mut self) -> Option<AgentEvent> {
        self.events.pop_front()
    }

    /// When [`AgentSession::handle_timeout`] is due next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let silent = self.link.map(|l| l.heard + l.heartbeat * SILENT_BEATS);
        let stop = self
            .config
            .stop_after
            .filter(|_| !self.stopped)
            .map(|d| self.last_heard + d);
        silent.into_iter().chain(stop).min()
    }

    /// Time passed up to `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(l) = self.link {
            let silent = now.saturating_duration_since(l.heard);
            if silent >= l.heartbeat * SILENT_BEATS {
                self.closed(
                    now,
                    format!(
                        "nothing heard from the server for {} ms",
                        silent.as_millis()
                    ),
                );
            }
        }
        if let Some(d) = self.config.stop_after {
            let silent_for = now.saturating_duration_since(self.last_heard);
            if !self.stopped && silent_for >= d {
                self.stopped = true;
                self.events
                    .push_back(AgentEvent::StopLaunches { silent_for });
            }
        }
    }
}

impl crate::pump::Session for AgentSession {
    type In = ToAgent;
    type Out = FromAgent;
    fn handle(&mut self, now: Instant, msg: ToAgent) {
        AgentSession::handle(self, now, msg)
    }
    fn heard(&mut self, now: Instant) {
        AgentSession::heard(self, now)
    }
    fn send(&mut self, msg: FromAgent) {
        AgentSession::send(self, msg)
    }
    fn closed(&mut self, now: Instant, why: String) {
        AgentSession::closed(self, now, why)
    }
    fn poll_transmit(&mut self) -> Option<crate::session::Transmit<FromAgent>> {
        AgentSession::poll_transmit(self).map(crate::session::Transmit::Message)
    }
    fn has_transmit(&self) -> bool {
        !self.transmit.is_empty()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        AgentSession::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        AgentSession::handle_timeout(self, now)
    }
    fn over(&self) -> Option<String> {
        match (&self.link, &self.down) {
            (None, Some(why)) if self.events.is_empty() => Some(why.clone()),
            _ => None,
        }
    }
}
