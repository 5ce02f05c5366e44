//! The server's end of one agent connection as a sans-IO machine (DESIGN.md "Sites apart"
//! habit 1, quinn-proto's `Connection` shape): the hub's pump ([`crate::pump`]) feeds in
//! what arrives and the time, and after every input takes [`ServerSession::poll_transmit`]
//! until `None` (frames and pings to the agent), then [`ServerSession::poll_event`] until
//! `None` (answers for the site's calls, relayed calls to serve, "the link is over").
//!
//! The server sets the heartbeat: it pings every period, any frame from the agent counts as
//! heard (its automatic pongs included), and [`SILENT_BEATS`] silent periods end the link
//! ([`ServerEvent::Down`]). What a silent link means for scheduling is not decided here:
//! the hub tells the driver, and the core hears "site disconnected", then "reconnected" or
//! "lost" past the site's grace (`coalloc_core::scheduler::link`).

use super::agent::SILENT_BEATS;
use super::Transmit;
use crate::proto::{Answer, CallError, FromAgent, ToAgent};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// What the session tells the hub.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// The agent answered call `id`.
    Answered {
        id: u64,
        result: Result<Answer, CallError>,
    },
    /// The agent relays a component's call: serve it and answer with
    /// [`ServerSession::send`] of a [`ToAgent::RelayAnswer`].
    Relay {
        id: u64,
        method: String,
        path: String,
        authorization: Option<String>,
        body: String,
    },
    /// A message that has no place once the connection runs (a second hello).
    Unexpected(String),
    /// The connection is over: silent, or closed.
    Down(String),
}

/// One welcomed agent connection, as the server holds it.
#[derive(Debug)]
pub struct ServerSession {
    heartbeat: Duration,
    heard: Instant,
    next_ping: Instant,
    down: Option<String>,
    transmit: VecDeque<Transmit<ToAgent>>,
    events: VecDeque<ServerEvent>,
}

impl ServerSession {
    /// A connection welcomed at `now` (the welcome is its first message out).
    pub fn new(now: Instant, heartbeat: Duration, welcome: ToAgent) -> ServerSession {
        ServerSession {
            heartbeat,
            heard: now,
            next_ping: now + heartbeat,
            down: None,
            transmit: VecDeque::from([Transmit::Message(welcome)]),
            events: VecDeque::new(),
        }
    }

    pub fn is_down(&self) -> bool {
        self.down.is_some()
    }

    /// A message from the agent arrived at `now`.
    pub fn handle(&mut self, now: Instant, msg: FromAgent) {
        self.heard(now);
        let event = match msg {
            FromAgent::Answer { id, result } => ServerEvent::Answered { id, result },
            FromAgent::Relay {
                id,
                method,
                path,
                authorization,
                body,
            } => ServerEvent::Relay {
                id,
                method,
                path,
                authorization,
                body,
            },
            FromAgent::Hello(h) => {
                ServerEvent::Unexpected(format!("a second hello (site `{}`)", h.site))
            }
        };
        if self.down.is_none() {
            self.events.push_back(event);
        }
    }

    /// Some frame arrived at `now` (a pong included).
    pub fn heard(&mut self, now: Instant) {
        self.heard = self.heard.max(now);
    }

    /// Send a message to the agent (nothing once the connection is over).
    pub fn send(&mut self, msg: ToAgent) {
        if self.down.is_none() {
            self.transmit.push_back(Transmit::Message(msg));
        }
    }

    /// The connection ended (closed by the agent, or an I/O error).
    pub fn closed(&mut self, why: String) {
        if self.down.is_none() {
            self.down = Some(why.clone());
            self.transmit.clear();
            self.events.push_back(ServerEvent::Down(why));
        }
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit<ToAgent>> {
        self.transmit.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// When [`ServerSession::handle_timeout`] is due: the next ping, or the silence limit.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.down.is_none().then(|| {
            self.next_ping
                .min(self.heard + self.heartbeat * SILENT_BEATS)
        })
    }

    /// Time passed up to `now`: ping when due; end a link silent for too long.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.down.is_some() {
            return;
        }
        let silent = now.saturating_duration_since(self.heard);
        if silent >= self.heartbeat * SILENT_BEATS {
            self.closed(format!("nothing heard for {} ms", silent.as_millis()));
            return;
        }
        if now >= self.next_ping {
            self.transmit.push_back(Transmit::Ping);
            // The next period from now: a pump that woke late sends one ping, not a burst.
            self.next_ping = now + self.heartbeat;
        }
    }
}

impl crate::pump::Session for ServerSession {
    type In = FromAgent;
    type Out = ToAgent;
    fn handle(&mut self, now: Instant, msg: FromAgent) {
        ServerSession::handle(self, now, msg)
    }
    fn heard(&mut self, now: Instant) {
        ServerSession::heard(self, now)
    }
    fn send(&mut self, msg: ToAgent) {
        ServerSession::send(self, msg)
    }
    fn closed(&mut self, _now: Instant, why: String) {
        ServerSession::closed(self, why)
    }
    fn poll_transmit(&mut self) -> Option<Transmit<ToAgent>> {
        ServerSession::poll_transmit(self)
    }
    fn has_transmit(&self) -> bool {
        !self.transmit.is_empty()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        ServerSession::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        ServerSession::handle_timeout(self, now)
    }
    fn over(&self) -> Option<String> {
        // Over once its events are taken: the hub hears `Down` first.
        self.down.clone().filter(|_| self.events.is_empty())
    }
}
