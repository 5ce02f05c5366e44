//! An agent site's two ends in the harness, on the network of [`super::net`]:
//!
//! - [`Agent`]: the `coalloc agent` process in front of its site's fake manager. It carries
//!   out the server's calls as `link/agent.rs`'s `Agent::execute` does: a submission is
//!   made once per launch number (a repeated one answers the recorded id and starts
//!   nothing), recorded in its launches ([`Agent::held`], which survive its crash: the
//!   real record is synced before the answer leaves), a launch leaves the record when a
//!   query finds it ended or it is cancelled, and its hello reports the record. With
//!   `stop_after` (heartbeat stop) it cancels what it holds when its session says so.
//! - [`End`]: the server's side of the site, the driver's site worker in front of the
//!   agent site's backend (`link/remote.rs`'s `AgentSite` and `AgentBackend`): a burst of
//!   one turn's submissions goes as one `SubmitMany`; every monitor interval a load
//!   reading, then a query of the watched launches; a call waits for its answer until the
//!   link ends (it fails at once) or its time-out; with the link down, the load and the
//!   states are the last ones heard within the site's grace, and past it the site is
//!   unreachable (its launches lost); a cancel that cannot reach the agent waits in the
//!   outbox for the next connection, one the agent refuses is tried again (1, 2, 4, 8 s).
//!
//! These two stand in for code that blocks on threads and the wall clock; what the link's
//! silence means is left to the real sessions, the driver and the core.

use super::net::NetEv;
use super::plan::AgentPlan;
use super::{Ev, World, MONITOR};
use coalloc_backends::{BackendError, RemoteState, SiteLoad, SubmitRequest};
use coalloc_core::model::Time;
use coalloc_server::link::proto::{Answer, Call, CallError, HeldLaunch, ToAgent};
use coalloc_server::link::session::agent::{AgentSession, AgentSessionConfig};
use coalloc_server::link::session::server::ServerSession;
use coalloc_server::msg::{Report, SiteCall};
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// How long a call waits for its answer (`AgentSite::call_timeout` of `coalloc serve`).
const CALL_TIMEOUT: Time = 60_000;
/// A load reading waits no longer than this.
const LOAD_TIMEOUT: Time = 5_000;

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

/// What a call's answer is for.
#[derive(Debug)]
pub enum Pending {
    /// A burst of submissions (their launches).
    Submit(Vec<u64>),
    /// A cancel (`attempt` from 1).
    Cancel {
        call: Call,
        attempt: u32,
    },
    /// The poll's load reading; then the watched launches are asked about.
    Load(Vec<(u64, String)>),
    Query(Result<SiteLoad, String>, Vec<(u64, String)>),
    /// Sent without waiting (cancels out of the outbox).
    Forget,
}

struct Waiting {
    conn: u64,
    deadline: Option<Time>,
    pending: Pending,
}

/// The server's end of one agent site, for one incarnation of the server.
pub struct End {
    /// The open connections' sessions, by number (an old one may linger until it ends).
    pub(super) sessions: BTreeMap<u64, ServerSession>,
    /// The site's link: the newest connection.
    pub(super) conn: Option<u64>,
    /// Since when the link is down (the server's start before the first connection).
    down_since: Option<Time>,
    pub(super) up_since: Time,
    next_id: u64,
    waiting: BTreeMap<u64, Waiting>,
    outbox: VecDeque<Call>,
    last_load: Option<SiteLoad>,
    states: BTreeMap<String, RemoteState>,
}

impl End {
    pub(super) fn new(now: Time) -> End {
        End {
            sessions: BTreeMap::new(),
            conn: None,
            down_since: Some(now),
            up_since: now,
            next_id: 0,
            waiting: BTreeMap::new(),
            outbox: VecDeque::new(),
            last_load: None,
            states: BTreeMap::new(),
        }
    }

    /// Connection `conn` is the link now; the outbox goes out on it, in order.
    pub(super) fn connected(&mut self, conn: u64, now: Time) {
        self.conn = Some(conn);
        self.down_since = None;
        self.up_since = now;
        while let Some(call) = self.outbox.pop_front() {
            self.send(call, None, Pending::Forget);
        }
    }

    /// Connection `conn` ended: the calls made on it, failed.
    pub(super) fn disconnected(&mut self, conn: u64, now: Time) -> Vec<Pending> {
        if self.conn == Some(conn) {
            self.conn = None;
            self.down_since = Some(now);
        }
        let lost: Vec<u64> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.conn == conn)
            .map(|(id, _)| *id)
            .collect();
        lost.into_iter()
            .filter_map(|id| self.waiting.remove(&id))
            .map(|w| w.pending)
            .collect()
    }

    /// Make a call on the link; `false` when there is none.
    fn send(&mut self, call: Call, deadline: Option<Time>, pending: Pending) -> bool {
        let Some(conn) = self.conn else {
            return false;
        };
        let Some(s) = self.sessions.get_mut(&conn) else {
            return false;
        };
        self.next_id += 1;
        let id = self.next_id;
        s.send(ToAgent::Call { id, call });
        self.waiting.insert(
            id,
            Waiting {
                conn,
                deadline,
                pending,
            },
        );
        true
    }

    pub(super) fn next_deadline(&self) -> Option<Time> {
        self.waiting.values().filter_map(|w| w.deadline).min()
    }

    /// The calls whose time-out has come, taken.
    pub(super) fn expired(&mut self, now: Time) -> Vec<Pending> {
        let ids: Vec<u64> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.deadline.is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        ids.into_iter()
            .filter_map(|id| self.waiting.remove(&id))
            .map(|w| w.pending)
            .collect()
    }

    /// Why the site counts as failed: its link down past the grace.
    fn unreachable(&self, now: Time, grace: Time) -> Option<String> {
        let since = self.down_since?;
        (now - since > grace).then(|| {
            format!(
                "the agent has been disconnected for {} ms (grace {grace} ms)",
                now - since
            )
        })
    }
}

fn call_error(e: BackendError) -> CallError {
    match e {
        BackendError::Rejected(m) => CallError::Rejected(m),
        other => CallError::Unavailable(other.to_string()),
    }
}

fn backend_error(e: CallError) -> BackendError {
    match e {
        CallError::Rejected(m) => BackendError::Rejected(m),
        CallError::Unavailable(m) => BackendError::Unavailable(m),
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
            Call::Discard(_) => Ok(Answer::Done),
            Call::File(_) => Err(CallError::Rejected("no files in this simulation".into())),
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

    /// Heartbeat stop: cancel every launch held.
    pub(super) fn agent_stop_launches(&mut self, site: usize) {
        let held: Vec<HeldLaunch> = match &self.net.agents[site] {
            Some(a) => a.held.values().cloned().collect(),
            None => return,
        };
        self.log(|| format!("s{site}'s agent stops its {} launches", held.len()));
        for h in held {
            if self.rms[site].cancel(self.now, &h.remote).is_ok() {
                if let Some(a) = self.net.agents[site].as_mut() {
                    a.held.remove(&h.launch);
                }
            }
        }
        self.rm_wake(site);
    }

    /// The driver's calls of one turn to an agent site, as its site worker makes them.
    pub(super) fn agent_calls(&mut self, site: usize, calls: Vec<SiteCall>) {
        let mut burst: Vec<SubmitRequest> = Vec::new();
        for call in calls {
            if let SiteCall::Submit(r) = call {
                burst.push(*r);
                continue;
            }
            self.submit_burst(site, std::mem::take(&mut burst));
            match call {
                SiteCall::Cancel(remote) => self.cancel_call(site, Call::Cancel(remote), 1),
                SiteCall::CancelUnrecorded {
                    job,
                    component,
                    launch,
                } => self.cancel_call(
                    site,
                    Call::CancelUnrecorded {
                        job,
                        component,
                        launch,
                    },
                    1,
                ),
                _ => {}
            }
        }
        self.submit_burst(site, burst);
    }

    fn submit_burst(&mut self, site: usize, burst: Vec<SubmitRequest>) {
        if burst.is_empty() {
            return;
        }
        let launches = burst.iter().map(|r| r.launch).collect();
        self.end_call(
            site,
            Call::SubmitMany(burst),
            CALL_TIMEOUT,
            Pending::Submit(launches),
        );
    }

    pub(super) fn cancel_call(&mut self, site: usize, call: Call, attempt: u32) {
        let pending = Pending::Cancel {
            call: call.clone(),
            attempt,
        };
        self.end_call(site, call, CALL_TIMEOUT, pending);
    }

    /// The poll of an agent site: its load, then its watched launches' states.
    pub(super) fn agent_poll(&mut self, site: usize) {
        let watched = match &self.server {
            Some(s) => s.watched[site]
                .iter()
                .map(|(l, r)| (*l, r.clone()))
                .collect(),
            None => return,
        };
        self.end_call(site, Call::Load, LOAD_TIMEOUT, Pending::Load(watched));
    }

    /// Make a call; with no link it fails at once.
    fn end_call(&mut self, site: usize, call: Call, timeout: Time, pending: Pending) {
        let deadline = self.now + timeout;
        let Some(end) = self.net.ends[site].as_mut() else {
            return;
        };
        if let Some(conn) = end.conn.filter(|c| end.sessions.contains_key(c)) {
            end.send(call, Some(deadline), pending);
            self.pump_server(site, conn);
        } else {
            let e = CallError::Unavailable("the agent is not connected".into());
            self.resolve(site, pending, Err(e));
        }
    }

    /// An answer came in on the link.
    pub(super) fn answered(&mut self, site: usize, id: u64, result: Result<Answer, CallError>) {
        let w = self.net.ends[site]
            .as_mut()
            .and_then(|e| e.waiting.remove(&id));
        if let Some(w) = w {
            self.resolve(site, w.pending, result);
        }
    }

    /// A call's end (its answer, or its failure: no link, the link ended, no answer in
    /// time): what the site worker and the agent site's backend make of it.
    pub(super) fn resolve(
        &mut self,
        site: usize,
        pending: Pending,
        result: Result<Answer, CallError>,
    ) {
        let (now, grace, epoch) = (self.now, self.plan.net.grace, self.epoch);
        if self.net.ends[site].is_none() {
            return;
        }
        match pending {
            Pending::Forget => {}
            Pending::Submit(launches) => {
                let results: Vec<Result<String, BackendError>> = match result {
                    Ok(Answer::SubmittedMany(all)) if all.len() == launches.len() => {
                        all.into_iter().map(|r| r.map_err(backend_error)).collect()
                    }
                    Ok(other) => {
                        let m = format!("the agent answered a burst of submissions with {other:?}");
                        launches
                            .iter()
                            .map(|_| Err(BackendError::Unavailable(m.clone())))
                            .collect()
                    }
                    Err(e) => launches
                        .iter()
                        .map(|_| Err(backend_error(e.clone())))
                        .collect(),
                };
                let r = Report::SubmittedMany(launches.into_iter().zip(results).collect());
                self.at(now, Ev::Report(epoch, r));
            }
            Pending::Cancel { call, attempt } => match result {
                Ok(_) => {}
                // Refused: the worker tries again.
                Err(CallError::Rejected(_)) => {
                    if attempt < 5 {
                        let t = now + (1000 << (attempt - 1));
                        let again = NetEv::CancelAgain {
                            epoch,
                            site,
                            call,
                            attempt: attempt + 1,
                        };
                        self.at(t, Ev::Net(again));
                    }
                }
                // No answer: on the link of the moment without waiting, else in the outbox.
                Err(_) => {
                    let end = self.net.ends[site].as_mut().expect("checked");
                    match end.conn {
                        Some(conn) => {
                            end.send(call, None, Pending::Forget);
                            self.pump_server(site, conn);
                        }
                        None => end.outbox.push_back(call),
                    }
                }
            },
            Pending::Load(watched) => {
                let end = self.net.ends[site].as_mut().expect("checked");
                let load = match result {
                    Ok(Answer::Load(l)) => {
                        end.last_load = Some(l);
                        Ok(l)
                    }
                    Ok(other) => Err(format!("the agent answered a load reading with {other:?}")),
                    Err(CallError::Rejected(m)) => Err(m),
                    Err(CallError::Unavailable(m)) => {
                        match (end.unreachable(now, grace), end.last_load) {
                            (None, Some(l)) if end.conn.is_none() => Ok(l),
                            (Some(why), _) => Err(why),
                            _ => Err(m),
                        }
                    }
                };
                if watched.is_empty() {
                    self.polled(site, load, Vec::new());
                } else {
                    let ids = watched.iter().map(|(_, r)| r.clone()).collect();
                    let next = Pending::Query(load, watched);
                    self.end_call(site, Call::Query(ids), CALL_TIMEOUT, next);
                }
            }
            Pending::Query(load, watched) => {
                let end = self.net.ends[site].as_mut().expect("checked");
                let states: Vec<RemoteState> = match result {
                    Ok(Answer::States(s)) if s.len() == watched.len() => {
                        for ((_, id), st) in watched.iter().zip(&s) {
                            end.states.insert(id.clone(), st.clone());
                        }
                        end.states
                            .retain(|k, _| watched.iter().any(|(_, r)| r == k));
                        s
                    }
                    Ok(_) => Vec::new(),
                    Err(_) => match end.unreachable(now, grace) {
                        Some(why) => watched
                            .iter()
                            .map(|_| RemoteState::Lost(why.clone()))
                            .collect(),
                        None if end.conn.is_none() => watched
                            .iter()
                            .map(|(_, r)| end.states.get(r).cloned().unwrap_or(RemoteState::Queued))
                            .collect(),
                        None => Vec::new(),
                    },
                };
                let states = watched.into_iter().map(|(l, _)| l).zip(states).collect();
                self.polled(site, load, states);
            }
        }
    }

    /// A poll's report; the next poll one interval on.
    fn polled(
        &mut self,
        site: usize,
        load: Result<SiteLoad, String>,
        states: Vec<(u64, RemoteState)>,
    ) {
        let (now, epoch) = (self.now, self.epoch);
        self.at(
            now,
            Ev::Report(epoch, Report::Polled { site, load, states }),
        );
        self.at(now + MONITOR, Ev::Poll(epoch, site));
    }
}
