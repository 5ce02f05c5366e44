//! The seeded network between the server and its agents, and the two ends of each agent
//! link on it (issue 30 item 4; DESIGN.md "Sites apart" habits 1 and 6).
//!
//! The model:
//! - A connection is a numbered stream between one agent and one incarnation of the
//!   server. Its frames (the link's messages, pings and pongs, and a close) each take a
//!   seeded delay ([`super::plan::NetPlan::delay`]) and arrive in the order they were sent.
//! - Loss: a frame lost on a stream resets its connection (TCP loses no frame silently):
//!   the frame is dropped and both ends hear the connection close.
//! - Every message is written as JSON and read back on its way.
//! - A partition of one site ([`Fault::Partition`]) drops every frame sent or arriving
//!   while it lasts, without a close: both ends hear silence, and the sessions' heartbeat
//!   ends the link. A stream never skips a frame: once one of a connection's frames is
//!   dropped, the connection stays silent after the partition too (a stalled stream),
//!   so that no call is lost on a link that lives on. A connection attempt during a
//!   partition times out after 5 s.
//! - Each end runs the real sans-IO session of `coalloc-link`: the server's
//!   [`ServerSession`] (one per connection, as the hub keeps one per accepted socket) and
//!   the agent's [`AgentSession`] (one per agent process, across its connections), pumped
//!   as the hub's and the agent's pumps do: after every input, the frames to send, then the
//!   events. The server's side then does what `link/hub.rs` does: a welcomed hello makes
//!   the connection the site's link and tells the driver [`Report::AgentBack`] with the
//!   launches the agent holds; a connection that ends leaves the site's calls (its
//!   submissions in flight fail, its cancels and discards are kept for the next one), the
//!   driver hears what came of them and, when no newer connection of the site is up,
//!   [`Report::AgentGone`]. The
//!   driver and the core decide the rest (disconnected, reconnected, lost past the grace).
//! - The agent reconnects after a link ends with the agent's back-off (100 ms doubling to
//!   5 s, jittered by the seed, reset after a connection that lasted 10 s). It dies
//!   ([`Fault::AgentCrash`]) with its session and connection (the server hears a close,
//!   unless a partition eats it) and restarts with its record of launches
//!   (`launches.jsonl` is synced before any answer leaves, so it loses nothing); its
//!   launches run on at the manager.
//! - A server crash closes every connection (the agents hear it, partitions permitting).
//!
//! What the agent and the server's end (the real `AgentCalls`) do with the calls:
//! [`super::agent`].

use super::agent::{Agent, End};
use super::plan::{Fault, Plan};
use super::{Ev, World, MONITOR};
use coalloc_core::model::Time;
use coalloc_server::link::proto::{FromAgent, Hello, Reserving, Role, ToAgent, VERSION};
use coalloc_server::link::session::agent::{AgentEvent, AgentSession, AgentSessionConfig};
use coalloc_server::link::session::server::ServerSession;
use coalloc_server::link::session::Transmit;
use coalloc_server::msg::Report;
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// What crosses a connection.
#[derive(Debug)]
pub enum Frame {
    ToAgent(ToAgent),
    FromAgent(FromAgent),
    Ping,
    Pong,
    /// The other end closed the connection (or its process died, or it was reset).
    Close(String),
}

/// A message written and read back as its frame carries it.
fn wire<T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(
    m: &T,
) -> T {
    let text = serde_json::to_string(m).expect("a link message serializes");
    let back: T = serde_json::from_str(&text).expect("and reads back");
    assert_eq!(&back, m, "a link message crosses the wire unchanged");
    back
}

/// The network's events.
#[derive(Debug)]
pub enum NetEv {
    /// A frame of connection `conn` arrives at the server (`to_server`) or the agent.
    Deliver {
        site: usize,
        conn: u64,
        to_server: bool,
        frame: Frame,
    },
    /// The end at the server (`at_server`) or the agent learns its connection was reset.
    Reset {
        site: usize,
        conn: u64,
        at_server: bool,
    },
    /// The agent (its incarnation `gen`) connects.
    Connect { site: usize, gen: u64 },
    /// The agent gives up connection attempt `conn`.
    GiveUp {
        site: usize,
        gen: u64,
        conn: u64,
        why: String,
    },
    /// The agent of a site is restarted.
    AgentUp(usize),
}

/// The network and both ends of every agent link.
pub struct Net {
    base: Instant,
    /// Per site: its agent (`None`: a site reached directly).
    pub(super) agents: Vec<Option<Agent>>,
    /// Per site: the server's end of its link (`None`: direct, or the server is down).
    pub(super) ends: Vec<Option<End>>,
    /// Per site: partitioned until then.
    cut_until: Vec<Time>,
    /// When the last frame of each (connection, towards the server) arrives.
    fifo: BTreeMap<(u64, bool), Time>,
    /// Connections a partition dropped a frame of: silent from then on.
    stalled: BTreeSet<u64>,
    next_conn: u64,
    pub(super) heartbeat: Duration,
}

impl Net {
    pub fn new(plan: &Plan) -> Net {
        let base = Instant::now();
        let agents = plan
            .sites
            .iter()
            .map(|s| s.agent.map(|a| Agent::new(a, base)))
            .collect();
        Net {
            base,
            agents,
            ends: plan.sites.iter().map(|_| None).collect(),
            cut_until: vec![0; plan.sites.len()],
            fifo: BTreeMap::new(),
            stalled: BTreeSet::new(),
            next_conn: 0,
            heartbeat: Duration::from_millis(plan.net.heartbeat.max(50) as u64),
        }
    }

    pub fn is_agent(&self, site: usize) -> bool {
        self.agents[site].is_some()
    }

    /// The virtual time `t` as an instant of the sessions.
    pub(super) fn inst(&self, t: Time) -> Instant {
        self.base + Duration::from_millis((t - super::plan::T0).max(0) as u64)
    }

    fn ms(&self, i: Instant) -> Time {
        super::plan::T0 + i.saturating_duration_since(self.base).as_millis() as Time
    }

    /// A component of `site` can reach the server: directly, or through its agent's relay
    /// (the agent up, linked, and not cut off).
    pub fn relay_up(&self, site: usize, now: Time) -> bool {
        match &self.agents[site] {
            None => true,
            Some(a) => {
                a.up && a.session.is_linked()
                    && now >= self.cut_until[site]
                    && self.ends[site].as_ref().is_some_and(|e| e.conn.is_some())
            }
        }
    }

    /// Until when the server could not reach `site` to cancel there: 0 for a direct site;
    /// the current link's start for an agent's; for ever while it has none.
    pub fn cut_off_until(&self, site: usize) -> Time {
        if self.agents[site].is_none() {
            return 0;
        }
        match &self.ends[site] {
            Some(e) if e.conn.is_some() => e.up_since,
            _ => Time::MAX,
        }
    }

    /// The number of the last connection opened.
    pub(super) fn last_conn(&self) -> u64 {
        self.next_conn
    }

    /// Whether `site`'s link is whole at `now`: always for a direct site; for an agent
    /// site, its agent up and linked on the connection the server's end holds as the
    /// site's link, one newer than `broken`, neither partitioned nor stalled.
    pub(super) fn link_whole(&self, site: usize, now: Time, broken: Option<u64>) -> bool {
        let Some(a) = &self.agents[site] else {
            return true;
        };
        let link = self.ends[site].as_ref().and_then(|e| e.conn);
        a.up && a.session.is_linked()
            && now >= self.cut_until[site]
            && a.conn == link
            && link.is_some_and(|c| !self.stalled.contains(&c) && broken.is_none_or(|b| c > b))
    }

    /// When a session's or the calls' timer is due next.
    pub fn next_timeout(&self) -> Option<Time> {
        let ends = self.ends.iter().flatten().flat_map(|e| {
            e.sessions
                .keys()
                .filter_map(|c| e.poll_timeout(*c))
                .map(|i| self.ms(i))
        });
        let agents = self
            .agents
            .iter()
            .flatten()
            .filter(|a| a.up)
            .filter_map(|a| a.session.poll_timeout())
            .map(|i| self.ms(i));
        ends.chain(agents).min()
    }
}

impl World {
    /// The server (re)started: an end for each agent site, with no link yet.
    pub(super) fn net_server_up(&mut self) {
        for site in 0..self.net.ends.len() {
            if self.net.is_agent(site) {
                let name = self.plan.sites[site].name.clone();
                let interval = Duration::from_millis(MONITOR as u64);
                self.net.ends[site] = Some(End::new(site, name, interval, self.now));
            }
        }
    }

    /// The server died: its connections close (the agents hear it, if nothing is cut).
    pub(super) fn net_server_gone(&mut self) {
        for site in 0..self.net.ends.len() {
            if let Some(end) = self.net.ends[site].take() {
                for conn in end.sessions.into_keys() {
                    self.send_frame(site, conn, false, Frame::Close("the server died".into()));
                }
            }
        }
    }

    /// The server froze or was cut off: its connections go silent (no close reaches
    /// anyone; the sessions' heartbeats end them).
    pub(super) fn net_server_silent(&mut self) {
        self.net.ends.iter_mut().for_each(|e| *e = None);
    }

    pub(super) fn net_fault(&mut self, f: Fault) {
        match f {
            Fault::Partition { site, length } => {
                self.out.partitions += 1;
                let cut = &mut self.net.cut_until[site];
                *cut = (*cut).max(self.now + length);
            }
            Fault::AgentCrash { site, down } => {
                let Some(a) = self.net.agents[site].as_mut().filter(|a| a.up) else {
                    return;
                };
                a.up = false;
                a.gen += 1;
                if let Some(conn) = a.conn.take() {
                    self.send_frame(site, conn, true, Frame::Close("the agent died".into()));
                }
                self.at(self.now + down, Ev::Net(NetEv::AgentUp(site)));
            }
            _ => {}
        }
    }

    /// Put a frame on the wire: delayed, in order, dropped by a partition, or lost (which
    /// resets the connection).
    fn send_frame(&mut self, site: usize, conn: u64, to_server: bool, frame: Frame) {
        if self.now < self.net.cut_until[site] {
            self.net.stalled.insert(conn);
            return;
        }
        if self.net.stalled.contains(&conn) {
            return;
        }
        let p = self.plan.net;
        if p.loss > 0 && self.rng.random_range(0..1000) < p.loss {
            self.log(|| format!("s{site} connection {conn}: a frame is lost, reset"));
            let why = || format!("a frame lost on s{site}'s connection {conn}");
            self.trouble(site, self.now, Some(conn), why);
            self.at(
                self.now,
                Ev::Net(NetEv::Reset {
                    site,
                    conn,
                    at_server: !to_server,
                }),
            );
            let t = self.now + self.rng.random_range(p.delay.0..=p.delay.1);
            self.at(
                t,
                Ev::Net(NetEv::Reset {
                    site,
                    conn,
                    at_server: to_server,
                }),
            );
            return;
        }
        // Every message crosses as the wire carries it (DESIGN.md habit 3).
        let frame = match frame {
            Frame::ToAgent(m) => Frame::ToAgent(wire(&m)),
            Frame::FromAgent(m) => Frame::FromAgent(wire(&m)),
            other => other,
        };
        let d = self.rng.random_range(p.delay.0..=p.delay.1);
        let last = self.net.fifo.entry((conn, to_server)).or_insert(0);
        let t = (self.now + d).max(*last);
        *last = t;
        self.at(
            t,
            Ev::Net(NetEv::Deliver {
                site,
                conn,
                to_server,
                frame,
            }),
        );
    }

    pub(super) fn net_event(&mut self, e: NetEv) {
        match e {
            NetEv::Deliver {
                site,
                conn,
                to_server,
                frame,
            } => {
                if self.now < self.net.cut_until[site] {
                    self.net.stalled.insert(conn);
                    return;
                }
                if self.net.stalled.contains(&conn) {
                    return;
                }
                if to_server {
                    self.at_server(site, conn, frame);
                } else {
                    self.at_agent(site, conn, frame);
                }
            }
            NetEv::Reset {
                site,
                conn,
                at_server,
            } => {
                let why = "connection reset".to_string();
                if at_server {
                    self.at_server(site, conn, Frame::Close(why));
                } else {
                    self.at_agent(site, conn, Frame::Close(why));
                }
            }
            NetEv::Connect { site, gen } => self.agent_connect(site, gen),
            NetEv::GiveUp {
                site,
                gen,
                conn,
                why,
            } => {
                let Some(a) = &self.net.agents[site] else {
                    return;
                };
                if a.gen == gen && a.conn == Some(conn) && !a.session.is_linked() {
                    self.agent_lost(site, why);
                }
            }
            NetEv::AgentUp(site) => {
                let inst = self.net.inst(self.now);
                let Some(a) = self.net.agents[site].as_mut() else {
                    return;
                };
                a.up = true;
                a.backoff = 100;
                a.linked_since = None;
                a.session = AgentSession::new(
                    inst,
                    AgentSessionConfig {
                        stop_after: a.plan.stop_after.map(|t| Duration::from_millis(t as u64)),
                    },
                );
                let gen = a.gen;
                self.log(|| format!("s{site}'s agent restarts"));
                self.agent_connect(site, gen);
            }
        }
    }

    /// A frame reaches the server's end.
    fn at_server(&mut self, site: usize, conn: u64, frame: Frame) {
        let inst = self.net.inst(self.now);
        if self.net.ends[site].is_none() {
            // The server is down: a connection attempt is refused; the rest is gone.
            if matches!(frame, Frame::FromAgent(FromAgent::Hello(_))) {
                self.send_frame(site, conn, false, Frame::Close("connection refused".into()));
            }
            return;
        }
        if let Frame::FromAgent(FromAgent::Hello(h)) = frame {
            self.accept(site, conn, h);
            return;
        }
        let end = self.net.ends[site].as_mut().expect("checked");
        let Some(s) = end.sessions.get_mut(&conn) else {
            return;
        };
        match frame {
            Frame::FromAgent(m) => s.handle(inst, m),
            Frame::Pong => s.heard(inst),
            Frame::Close(why) => s.closed(why),
            Frame::ToAgent(_) | Frame::Ping => {}
        }
        self.pump_server(site, conn);
    }

    /// A hello: the hub's welcome. The connection becomes the site's link, what waited in
    /// its outbox goes out, and the driver hears the agent back with what it holds.
    fn accept(&mut self, site: usize, conn: u64, hello: Hello) {
        let welcome = ToAgent::Welcome {
            version: VERSION,
            role: Role::Server,
            heartbeat_ms: self.net.heartbeat.as_millis() as u64,
        };
        let session = ServerSession::new(self.net.inst(self.now), self.net.heartbeat, welcome);
        let (now, inst) = (self.now, self.net.inst(self.now));
        let end = self.net.ends[site].as_mut().expect("an agent site");
        end.connect(conn, session, inst, now);
        self.out.reconnects += 1;
        self.log(|| {
            format!(
                "s{site}'s agent connects (connection {conn}, holding {:?})",
                hello.launches.iter().map(|h| h.launch).collect::<Vec<_>>()
            )
        });
        let back = Report::AgentBack {
            site,
            held: hello.launches,
        };
        self.at(self.now, Ev::Report(self.epoch, back));
        self.pump_server(site, conn);
    }

    /// As the hub's pump after an input: the frames to send, then the session's events
    /// (the answers into the site's calls), then what they became for the driver, on its
    /// inbox; a session that ended is cleaned up.
    pub(super) fn pump_server(&mut self, site: usize, conn: u64) {
        let inst = self.net.inst(self.now);
        let Some(end) = self.net.ends[site].as_mut() else {
            return;
        };
        let Some(s) = end.sessions.get_mut(&conn) else {
            return;
        };
        let mut frames = Vec::new();
        while let Some(t) = s.poll_transmit() {
            frames.push(match t {
                Transmit::Message(m) => Frame::ToAgent(m),
                Transmit::Ping => Frame::Ping,
            });
        }
        let down = end.settle(conn, inst);
        let reports = end.reports();
        for f in frames {
            self.send_frame(site, conn, false, f);
        }
        for r in reports {
            self.at(self.now, Ev::Report(self.epoch, r));
        }
        self.reserve_answers(site);
        if let Some(why) = down {
            self.server_conn_down(site, conn, why);
        }
    }

    /// The hub's cleanup of an ended connection: the calls made on it fail or are kept,
    /// the driver hears what came of them, then that the agent is gone unless a newer
    /// connection of the site is up.
    fn server_conn_down(&mut self, site: usize, conn: u64, why: String) {
        let inst = self.net.inst(self.now);
        let Some(end) = self.net.ends[site].as_mut() else {
            return;
        };
        let still_up = end.end(conn, inst);
        let reports = end.reports();
        self.log(|| format!("s{site} connection {conn} over at the server: {why}"));
        // The server closes its side: the agent hears it, if the frame gets through.
        self.send_frame(site, conn, false, Frame::Close(why));
        for r in reports {
            self.at(self.now, Ev::Report(self.epoch, r));
        }
        self.reserve_answers(site);
        if !still_up {
            self.at(self.now, Ev::Report(self.epoch, Report::AgentGone { site }));
        }
    }

    /// A frame reaches the agent.
    fn at_agent(&mut self, site: usize, conn: u64, frame: Frame) {
        let inst = self.net.inst(self.now);
        let Some(a) = self.net.agents[site].as_mut() else {
            return;
        };
        if !a.up || a.conn != Some(conn) {
            return;
        }
        match frame {
            Frame::ToAgent(m) => {
                if matches!(m, ToAgent::Welcome { .. }) {
                    a.linked_since = Some(self.now);
                }
                a.session.handle(inst, m);
            }
            Frame::Ping => {
                a.session.heard(inst);
                // The WebSocket answers a ping by itself.
                self.send_frame(site, conn, true, Frame::Pong);
            }
            Frame::Close(why) => {
                self.agent_lost(site, why);
                return;
            }
            Frame::FromAgent(_) | Frame::Pong => {}
        }
        self.pump_agent(site);
    }

    /// The agent opens a connection and says hello with the launches it holds.
    fn agent_connect(&mut self, site: usize, gen: u64) {
        let now = self.now;
        let cut = now < self.net.cut_until[site];
        self.net.next_conn += 1;
        let conn = self.net.next_conn;
        let Some(a) = self.net.agents[site].as_mut() else {
            return;
        };
        if !a.up || a.gen != gen || a.conn.is_some() {
            return;
        }
        a.conn = Some(conn);
        a.linked_since = None;
        let give_up = |why: &str| {
            Ev::Net(NetEv::GiveUp {
                site,
                gen,
                conn,
                why: why.into(),
            })
        };
        if cut {
            self.at(now + 5_000, give_up("connect: timed out"));
            return;
        }
        let hello = Hello {
            version: VERSION,
            role: Role::Agent,
            site: self.plan.sites[site].name.clone(),
            secret: "sim".into(),
            relay_url: "http://agent.sim.invalid".into(),
            launches: a.held.values().cloned().collect(),
            reserve: match self.plan.sites[site].reserve {
                Some(_) => Reserving::May,
                None => Reserving::MayNot("the site's plan does not reserve".into()),
            },
        };
        self.send_frame(site, conn, true, Frame::FromAgent(FromAgent::Hello(hello)));
        self.at(now + 10_000, give_up("no welcome within 10 s"));
    }

    /// The agent's connection ended: its session hears it, and it tries again after its
    /// back-off.
    fn agent_lost(&mut self, site: usize, why: String) {
        let (now, inst) = (self.now, self.net.inst(self.now));
        let Some(a) = self.net.agents[site].as_mut() else {
            return;
        };
        let Some(conn) = a.conn.take() else {
            return;
        };
        a.session.closed(inst, why.clone());
        if a.linked_since.take().is_some_and(|t| now - t > 10_000) {
            a.backoff = 100;
        }
        let wait = a.backoff;
        a.backoff = (a.backoff * 2).min(5_000);
        let gen = a.gen;
        self.log(|| format!("s{site}'s agent lost connection {conn}: {why}"));
        // Its side closes too (the server hears it, if the frame gets through).
        self.send_frame(site, conn, true, Frame::Close(why));
        self.pump_agent(site);
        let t = now + wait + self.rng.random_range(0..=wait / 2);
        self.at(t, Ev::Net(NetEv::Connect { site, gen }));
    }

    /// As the agent's pump: the frames to send, then the events, until neither is left.
    pub(super) fn pump_agent(&mut self, site: usize) {
        loop {
            let Some(a) = self.net.agents[site].as_mut() else {
                return;
            };
            let conn = a.conn;
            let mut frames = Vec::new();
            while let Some(m) = a.session.poll_transmit() {
                frames.push(m);
            }
            let event = a.session.poll_event();
            if let Some(conn) = conn {
                for m in frames {
                    self.send_frame(site, conn, true, Frame::FromAgent(m));
                }
            }
            let Some(event) = event else {
                return;
            };
            match event {
                AgentEvent::Call { id, call } => {
                    let result = self.agent_execute(site, call);
                    if let Some(a) = self.net.agents[site].as_mut() {
                        a.session.answer(id, result);
                    }
                }
                AgentEvent::StopLaunches { .. } => self.agent_stop_launches(site),
                AgentEvent::LinkDown(why) => {
                    // Silence ended it (a close came through `agent_lost` already).
                    if self.net.agents[site]
                        .as_ref()
                        .is_some_and(|a| a.conn.is_some())
                    {
                        self.agent_lost(site, why);
                    }
                }
                AgentEvent::Welcomed { .. }
                | AgentEvent::Refused(_)
                | AgentEvent::RelayAnswer { .. } => {}
            }
        }
    }

    /// Every session's and call's time that has come.
    pub(super) fn net_timeouts(&mut self) {
        let inst = self.net.inst(self.now);
        for site in 0..self.net.ends.len() {
            let due: Vec<u64> = match &self.net.ends[site] {
                Some(end) => end
                    .sessions
                    .keys()
                    .filter(|c| end.poll_timeout(**c).is_some_and(|t| t <= inst))
                    .copied()
                    .collect(),
                None => Vec::new(),
            };
            for conn in due {
                if let Some(end) = self.net.ends[site].as_mut() {
                    end.handle_timeout(conn, inst);
                }
                self.pump_server(site, conn);
            }
            let agent_due = self.net.agents[site]
                .as_ref()
                .is_some_and(|a| a.up && a.session.poll_timeout().is_some_and(|t| t <= inst));
            if agent_due {
                if let Some(a) = self.net.agents[site].as_mut() {
                    a.session.handle_timeout(inst);
                }
                self.pump_agent(site);
            }
        }
    }
}
