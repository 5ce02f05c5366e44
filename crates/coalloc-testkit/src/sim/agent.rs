//! An agent site's two ends in the harness, on the network of [`super::net`]:
//!
//! - [`Agent`]: the `coalloc agent` process in front of its site's fake manager. It carries
//!   out the server's calls as `link/agent.rs`'s `Agent::execute` does: a submission is
//!   made once per launch number (a repeated one answers the recorded id and starts
//!   nothing), recorded in its launches ([`Agent::held`], which survive its crash: the
//!   real record is synced before the answer leaves), a launch leaves the record when a
//!   query finds it ended or it is cancelled, its hello reports the record, and discards
//!   go to its manager's launch log. With
//!   `stop_after` (heartbeat stop) it cancels what it holds when its session says so, and
//!   keeps it in the record until the server hears of it.
//! - [`End`]: the server's side of the site, the real sans-IO machine of `coalloc serve`:
//!   the site's `AgentCalls` (`link/calls.rs`: the calls numbered, kept while the link is
//!   down and sent in order on the next connection, a run of submissions as one
//!   `SubmitMany`, a poll of the load and the watched launches every monitor interval
//!   while linked, its load reading timed out, failed cancels tried again, the answers
//!   made the driver's reports) beside each open connection's `ServerSession`, as
//!   `link/remote.rs`'s `AgentSite` holds them; its methods are `Pumped`'s steps. The
//!   harness pumps it on the virtual clock as `link/hub.rs`'s pump does
//!   ([`super::net`]): the driver's calls of a turn go into the calls and wake the pump of
//!   the link of the moment, whose wake-up moves them into its session; the agent's
//!   answers go back into the calls, and their reports to the driver.
//!
//! Only the agent is the harness's own (it stands in for a process that blocks on threads
//! and the wall clock); what the link's silence means is left to the real sessions, the
//! driver and the core (`AgentGone` and the site's grace).

use super::plan::AgentPlan;
use super::World;
use coalloc_backends::{BackendError, RemoteState, SubmitRequest};
use coalloc_core::model::Time;
use coalloc_server::link::calls::AgentCalls;
use coalloc_server::link::proto::{Answer, Call, CallError, HeldLaunch};
use coalloc_server::link::session::agent::{AgentSession, AgentSessionConfig};
use coalloc_server::link::session::server::{ServerEvent, ServerSession};
use coalloc_server::msg::{Report, ReserveCall, SiteCall};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One site's agent.
pub struct Agent {
    pub(super) plan: AgentPlan,
    pub(super) up: bool,
    /// Its incarnation (a restart makes a new one).
    pub(super) gen: u64,
    pub(super) session: AgentSession,
    /// The connection it is on, connecting or linked.
    pub(super) conn: Option<u64>,
    pub(super) linked_since: Option<Time>,
    /// The reconnection back-off (ms).
    pub(super) backoff: Time,
    /// Its record of launches (`launches.jsonl`), by launch number.
    pub(super) held: BTreeMap<u64, HeldLaunch>,
}

impl Agent {
    pub(super) fn new(plan: AgentPlan, now: Instant) -> Agent {
        Agent {
            plan,
            up: true,
            gen: 0,
            session: AgentSession::new(
                now,
                AgentSessionConfig {
                    stop_after: plan.stop_after.map(|t| Duration::from_millis(t as u64)),
                },
            ),
            conn: None,
            linked_since: None,
            backoff: 100,
            held: BTreeMap::new(),
        }
    }
}

/// The server's end of one agent site, for one incarnation of the server: what
/// `link/remote.rs`'s `AgentSite` holds under its lock, the session of each open
/// connection beside the site's real [`AgentCalls`], and what its `Pumped` does with them.
pub struct End {
    /// The open connections' sessions, by number (an old one may linger until it ends).
    pub(super) sessions: BTreeMap<u64, ServerSession>,
    /// The site's link: the connection of the moment.
    pub(super) conn: Option<u64>,
    /// Since when the link of the moment is up.
    pub(super) up_since: Time,
    pub(super) calls: AgentCalls,
    /// Reservation calls waited for (`AgentBackend`'s), by call number, with their try.
    pub(super) reserving: BTreeMap<u64, (ReserveCall, u32)>,
    /// Their answers, for [`World::reserve_answered`].
    pub(super) answered: Vec<(ReserveCall, u32, Result<Answer, CallError>)>,
}

impl End {
    /// Site `site` (named `name`), polled every `interval` while linked.
    pub(super) fn new(site: usize, name: String, interval: Duration, now: Time) -> End {
        End {
            sessions: BTreeMap::new(),
            conn: None,
            up_since: now,
            calls: AgentCalls::new(site, name, interval),
            reserving: BTreeMap::new(),
            answered: Vec::new(),
        }
    }

    /// `AgentSite::connect`: connection `conn`, welcomed with `session`, is the link from
    /// `now`; what the calls kept goes out on it first.
    pub(super) fn connect(
        &mut self,
        conn: u64,
        mut session: ServerSession,
        inst: Instant,
        now: Time,
    ) {
        self.calls.connected(inst, conn, &mut session);
        self.sessions.insert(conn, session);
        self.conn = Some(conn);
        self.up_since = now;
    }

    /// `Pumped::poll_timeout`: connection `conn`'s session timer and, on the link of the
    /// moment, the calls' (the next poll, retries, limits).
    pub(super) fn poll_timeout(&self, conn: u64) -> Option<Instant> {
        let s = self.sessions.get(&conn)?;
        let calls = (self.conn == Some(conn))
            .then(|| self.calls.poll_timeout())
            .flatten();
        [s.poll_timeout(), calls].into_iter().flatten().min()
    }

    /// `Pumped::handle_timeout`, also a wake-up of the pump: the session's time, then, on
    /// the link of the moment, the calls kept go out and what is due is done.
    pub(super) fn handle_timeout(&mut self, conn: u64, now: Instant) {
        let current = self.conn == Some(conn);
        let Some(s) = self.sessions.get_mut(&conn) else {
            return;
        };
        s.handle_timeout(now);
        if current {
            self.calls.flush(now, s);
            self.calls.handle_timeout(now, s);
        }
    }

    /// `Inner::settle`: connection `conn`'s session events, the answers into the calls
    /// (relayed calls are not served here); whether the session ended, and why.
    pub(super) fn settle(&mut self, conn: u64, now: Instant) -> Option<String> {
        let mut down = None;
        if let Some(s) = self.sessions.get_mut(&conn) {
            while let Some(e) = s.poll_event() {
                match e {
                    ServerEvent::Answered { id, result } => self.calls.answered(now, id, result),
                    ServerEvent::Down(why) => down = Some(why),
                    ServerEvent::Relay { .. } | ServerEvent::Unexpected(_) => {}
                }
            }
        }
        self.take_waited();
        down
    }

    /// The waited calls' answers: a reservation call's for [`End::answered`] (no file
    /// operation goes to an agent in this simulation).
    fn take_waited(&mut self) {
        while let Some((id, result)) = self.calls.poll_waited() {
            if let Some((call, attempt)) = self.reserving.remove(&id) {
                self.answered.push((call, attempt, result));
            }
        }
    }

    /// `Pumped::end`: connection `conn` leaves the site (its calls in flight fail or are
    /// kept); whether another connection is the link.
    pub(super) fn end(&mut self, conn: u64, now: Instant) -> bool {
        self.settle(conn, now);
        self.sessions.remove(&conn);
        if self.conn == Some(conn) {
            self.conn = None;
        }
        self.calls.disconnected(conn);
        self.take_waited();
        self.conn.is_some()
    }

    /// What the driver is to hear, in order.
    pub(super) fn reports(&mut self) -> Vec<Report> {
        std::iter::from_fn(|| self.calls.poll_report()).collect()
    }
}

fn call_error(e: BackendError) -> CallError {
    match e {
        BackendError::Rejected(m) => CallError::Rejected(m),
        other => CallError::Unavailable(other.to_string()),
    }
}

impl World {
    /// The agent carries out one of the server's calls on its site's manager.
    pub(super) fn agent_execute(&mut self, site: usize, call: Call) -> Result<Answer, CallError> {
        let now = self.now;
        let result = match call {
            Call::Submit(r) => self
                .agent_submit(site, vec![*r])
                .pop()
                .unwrap_or_else(|| Err(CallError::Unavailable("no submission made".into())))
                .map(Answer::Submitted),
            Call::SubmitMany(rs) => Ok(Answer::SubmittedMany(self.agent_submit(site, rs))),
            Call::Query(ids) => {
                let rm = &self.rms[site];
                rm.load(now).map_err(CallError::Unavailable)?;
                let states: Vec<RemoteState> = ids.iter().map(|r| rm.state(r)).collect();
                if let Some(a) = self.net.agents[site].as_mut() {
                    for (id, s) in ids.iter().zip(&states) {
                        if s.is_final() {
                            a.held.retain(|_, h| &h.remote != id);
                        }
                    }
                }
                Ok(Answer::States(states))
            }
            Call::Cancel(remote) => {
                self.rms[site].cancel(now, &remote).map_err(call_error)?;
                if let Some(a) = self.net.agents[site].as_mut() {
                    a.held.retain(|_, h| h.remote != remote);
                }
                Ok(Answer::Done)
            }
            Call::CancelUnrecorded { launch, .. } => {
                let held = self.net.agents[site]
                    .as_ref()
                    .and_then(|a| a.held.get(&launch).cloned());
                if let Some(h) = held {
                    self.rms[site].cancel(now, &h.remote).map_err(call_error)?;
                    if let Some(a) = self.net.agents[site].as_mut() {
                        a.held.remove(&launch);
                    }
                }
                self.rms[site]
                    .cancel_launch(now, launch)
                    .map_err(call_error)?;
                Ok(Answer::Done)
            }
            Call::Load => self.rms[site]
                .load(now)
                .map(Answer::Load)
                .map_err(CallError::Unavailable),
            Call::Discard(ids) => {
                for id in &ids {
                    self.discards_unsent[site].remove(id);
                }
                self.rms[site].discard(&ids);
                Ok(Answer::Done)
            }
            Call::File(_) => Err(CallError::Rejected("no files in this simulation".into())),
            call @ (Call::ReserveEarliest { .. }
            | Call::Reserve { .. }
            | Call::Unreserve(_)
            | Call::Reservations) => self.rm_reserve(site, &call).map_err(call_error),
        };
        self.log(|| format!("s{site}'s agent answers {result:?}"));
        self.rm_wake(site);
        result
    }

    /// Submit each request once: a launch in the record answers its id again.
    fn agent_submit(
        &mut self,
        site: usize,
        reqs: Vec<SubmitRequest>,
    ) -> Vec<Result<String, CallError>> {
        reqs.into_iter()
            .map(|r| {
                let known = self.net.agents[site]
                    .as_ref()
                    .and_then(|a| a.held.get(&r.launch))
                    .map(|h| h.remote.clone());
                if let Some(remote) = known {
                    return Ok(remote);
                }
                let (result, _, pending) = self.rm_submit(site, &r);
                self.rm_submitted(site, pending);
                let remote = result.map_err(call_error)?;
                if let Some(a) = self.net.agents[site].as_mut() {
                    let h = HeldLaunch {
                        launch: r.launch,
                        job: r.job,
                        component: r.component,
                        remote: remote.clone(),
                    };
                    a.held.insert(r.launch, h);
                }
                Ok(remote)
            })
            .collect()
    }

    /// Heartbeat stop: cancel every launch held, keeping it in the record (as
    /// `coalloc-agent`'s `Agent::stop_launches` does) for the next hello to list, so that
    /// the server hears of it and a repeated submission of its number gets its id again.
    pub(super) fn agent_stop_launches(&mut self, site: usize) {
        let held: Vec<HeldLaunch> = match &self.net.agents[site] {
            Some(a) => a.held.values().cloned().collect(),
            None => return,
        };
        self.log(|| format!("s{site}'s agent stops its {} launches", held.len()));
        for h in held {
            let why = || {
                format!(
                    "s{site}'s agent stopped launch {} at a heartbeat stop",
                    h.launch
                )
            };
            self.excuse_job(h.job, why);
            // A failure leaves it running: the server cancels it once back, as before.
            let _ = self.rms[site].cancel(self.now, &h.remote);
        }
        self.rm_wake(site);
    }

    /// The driver's calls of one turn to an agent site, as `link/remote.rs`'s `AgentLink`
    /// hands them over: into the site's calls, and a wake-up of the pump of the link of
    /// the moment when some wait to go out.
    pub(super) fn agent_calls(&mut self, site: usize, calls: Vec<SiteCall>) {
        let inst = self.net.inst(self.now);
        let Some(end) = self.net.ends[site].as_mut() else {
            return;
        };
        for call in calls {
            end.calls.call(call);
        }
        if let Some(conn) = end.conn.filter(|_| end.calls.has_queued()) {
            end.handle_timeout(conn, inst);
            self.pump_server(site, conn);
        }
    }
}
