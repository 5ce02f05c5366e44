//! Both ends of a link stepped on a virtual clock, linked by in-memory queues that carry
//! every message through its JSON form (an unserializable message fails the test), in the
//! shape of quinn-proto's `Pair`.

use super::agent::{AgentEvent, AgentSession, AgentSessionConfig};
use super::server::{ServerEvent, ServerSession};
use super::Transmit;
use crate::proto::{Answer, Call, CallError, FromAgent, Role, ToAgent, VERSION};
use std::time::{Duration, Instant};

const BEAT: Duration = Duration::from_secs(1);

fn welcome() -> ToAgent {
    ToAgent::Welcome {
        version: VERSION,
        role: Role::Server,
        heartbeat_ms: BEAT.as_millis() as u64,
    }
}

fn json<T: serde::Serialize + serde::de::DeserializeOwned>(m: T) -> T {
    serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap()
}

/// A server end and an agent end on one virtual clock; `up` says whether frames cross.
struct Pair {
    t0: Instant,
    now: Instant,
    server: ServerSession,
    agent: AgentSession,
    up: bool,
    server_events: Vec<ServerEvent>,
    agent_events: Vec<AgentEvent>,
}

impl Pair {
    fn new(config: AgentSessionConfig) -> Pair {
        let t0 = Instant::now();
        let mut agent = AgentSession::new(t0, config);
        let server = ServerSession::new(t0, BEAT, welcome());
        agent.heard(t0);
        Pair {
            t0,
            now: t0,
            server,
            agent,
            up: true,
            server_events: Vec::new(),
            agent_events: Vec::new(),
        }
    }

    fn at(&self, ms: u64) -> Instant {
        self.t0 + Duration::from_millis(ms)
    }

    /// Move every frame across (a ping is answered by a pong, heard at once), then take
    /// the events.
    fn drive(&mut self) {
        loop {
            let mut moved = false;
            while let Some(t) = self.server.poll_transmit() {
                moved = true;
                if !self.up {
                    continue;
                }
                match t {
                    Transmit::Message(m) => self.agent.handle(self.now, json(m)),
                    Transmit::Ping => {
                        self.agent.heard(self.now);
                        self.server.heard(self.now); // the pong
                    }
                }
            }
            while let Some(m) = self.agent.poll_transmit() {
                moved = true;
                if self.up {
                    self.server.handle(self.now, json(m));
                }
            }
            if !moved {
                break;
            }
        }
        self.server_events
            .extend(std::iter::from_fn(|| self.server.poll_event()));
        self.agent_events
            .extend(std::iter::from_fn(|| self.agent.poll_event()));
    }

    /// Step the clock to `until`, waking each end at its timeouts on the way.
    fn run_until(&mut self, until: Instant) {
        loop {
            let next = [self.server.poll_timeout(), self.agent.poll_timeout()]
                .into_iter()
                .flatten()
                .filter(|t| *t <= until)
                .min();
            let Some(t) = next else { break };
            self.now = t.max(self.now);
            self.server.handle_timeout(self.now);
            self.agent.handle_timeout(self.now);
            self.drive();
        }
        self.now = until;
    }
}

#[test]
fn calls_and_answers_cross_by_number_and_pings_keep_a_quiet_link_alive() {
    let mut p = Pair::new(AgentSessionConfig::default());
    p.drive();
    assert_eq!(p.agent_events, [AgentEvent::Welcomed { heartbeat: BEAT }]);
    p.server.send(ToAgent::Call {
        id: 7,
        call: Call::Load,
    });
    p.drive();
    assert_eq!(
        p.agent_events[1],
        AgentEvent::Call {
            id: 7,
            call: Call::Load
        }
    );
    p.agent.answer(7, Ok(Answer::Done));
    p.drive();
    assert_eq!(
        p.server_events,
        [ServerEvent::Answered {
            id: 7,
            result: Ok(Answer::Done)
        }]
    );
    // A minute with nothing to say: the pings keep both ends up.
    let t = p.at(60_000);
    p.run_until(t);
    assert!(!p.server.is_down() && p.agent.is_linked());
    assert_eq!(p.server_events.len(), 1);
}

#[test]
fn a_silent_link_ends_at_both_ends_after_three_beats() {
    let mut p = Pair::new(AgentSessionConfig::default());
    p.drive();
    let cut = p.at(2_500);
    p.run_until(cut);
    p.up = false;
    let t = p.at(10_000);
    p.run_until(t);
    let down: Vec<_> = p
        .server_events
        .iter()
        .filter(|e| matches!(e, ServerEvent::Down(_)))
        .collect();
    assert_eq!(down.len(), 1, "{:?}", p.server_events);
    assert!(p.server.is_down());
    assert!(!p.agent.is_linked());
    assert!(p
        .agent_events
        .iter()
        .any(|e| matches!(e, AgentEvent::LinkDown(why) if why.contains("nothing heard"))));
    // After its end, a connection sends nothing; an agent without a link drops answers.
    p.server.send(ToAgent::Call {
        id: 1,
        call: Call::Load,
    });
    assert_eq!(p.server.poll_transmit(), None);
    p.agent.answer(1, Ok(Answer::Done));
    assert_eq!(p.agent.poll_transmit(), None);
    // Heartbeat stop is off by default: no timer left, no stop ever.
    assert_eq!(p.agent.poll_timeout(), None);
    assert!(!p
        .agent_events
        .iter()
        .any(|e| matches!(e, AgentEvent::StopLaunches { .. })));
}

#[test]
fn heartbeat_stop_stops_the_launches_once_per_outage_after_the_configured_time() {
    let stop = Duration::from_secs(30);
    let mut p = Pair::new(AgentSessionConfig {
        stop_after: Some(stop),
    });
    p.drive();
    let cut = p.at(5_000);
    p.run_until(cut);
    p.up = false;
    // Last heard at 5 s (the ping of that instant): stop at 35 s, not before.
    let t = p.at(34_999);
    p.run_until(t);
    let stops = |p: &Pair| {
        p.agent_events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::StopLaunches { silent_for } => Some(*silent_for),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    assert!(stops(&p).is_empty());
    let t = p.at(35_000);
    p.run_until(t);
    assert_eq!(stops(&p), [stop]);
    let t = p.at(120_000);
    p.run_until(t);
    assert_eq!(stops(&p), [stop], "once per outage");
    // Reconnected: a new connection's welcome, and a later outage stops them again.
    p.up = true;
    p.server = ServerSession::new(p.now, BEAT, welcome());
    p.drive();
    assert!(p.agent.is_linked());
    let cut = p.at(200_000);
    p.run_until(cut);
    p.up = false;
    let t = p.at(230_000);
    p.run_until(t);
    assert_eq!(stops(&p), [stop, stop]);
}

#[test]
fn a_refusal_and_a_second_hello_are_told_as_such() {
    let t0 = Instant::now();
    let mut a = AgentSession::new(t0, AgentSessionConfig::default());
    a.handle(
        t0,
        ToAgent::Refused {
            reason: "bad credential".into(),
        },
    );
    assert_eq!(
        a.poll_event(),
        Some(AgentEvent::Refused("bad credential".into()))
    );
    assert!(!a.is_linked());
    let mut s = ServerSession::new(t0, BEAT, welcome());
    let hello = crate::proto::Hello {
        version: VERSION,
        role: Role::Agent,
        site: "s1".into(),
        secret: String::new(),
        relay_url: String::new(),
        launches: Vec::new(),
        reserve: crate::proto::Reserving::May,
    };
    s.handle(t0, FromAgent::Hello(hello));
    assert!(matches!(s.poll_event(), Some(ServerEvent::Unexpected(m)) if m.contains("s1")));
}

#[test]
fn reservation_calls_and_their_answers_and_refusals_cross_by_number() {
    let mut p = Pair::new(AgentSessionConfig::default());
    p.drive();
    let calls = [
        Call::ReserveEarliest {
            count: 2,
            duration_ms: 60_000,
            not_before_ms: 1_000,
        },
        Call::Reserve {
            name: "coalloc-J1-c0-1".into(),
            count: 2,
            start_ms: 5_000,
            duration_ms: 60_000,
        },
        Call::Reservations,
        Call::Unreserve("coalloc-J1-c0-1".into()),
        Call::Reserve {
            name: "coalloc-J2-c0-1".into(),
            count: 99,
            start_ms: 5_000,
            duration_ms: 60_000,
        },
    ];
    for (id, call) in (1..).zip(&calls) {
        p.server.send(ToAgent::Call {
            id,
            call: call.clone(),
        });
    }
    p.drive();
    let got: Vec<(u64, Call)> = p
        .agent_events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Call { id, call } => Some((*id, call.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(got, (1..).zip(calls).collect::<Vec<_>>());
    // Answered out of order: each answer finds its call by number.
    let answers = [
        (5, Err(CallError::Rejected("2 of 99 processors".into()))),
        (3, Ok(Answer::Reservations(vec!["coalloc-J1-c0-1".into()]))),
        (1, Ok(Answer::Earliest(5_000))),
        (2, Ok(Answer::Done)),
        (4, Ok(Answer::Done)),
    ];
    for (id, result) in answers.clone() {
        p.agent.answer(id, result);
    }
    p.drive();
    let want: Vec<ServerEvent> = answers
        .into_iter()
        .map(|(id, result)| ServerEvent::Answered { id, result })
        .collect();
    assert_eq!(p.server_events, want);
}
