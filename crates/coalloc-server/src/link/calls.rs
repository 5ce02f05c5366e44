//! The driver's calls to one agent site, as a sans-IO machine (DESIGN.md "Sites apart"
//! habit 1; issue 30 item 2): what an agent site's [`crate::msg::SiteLink`] is sent, how
//! it goes out on the site's [`ServerSession`], and what the agent's answers become for the
//! driver. It owns the calls' numbering, the calls kept while the link is down (delivered
//! in order on the next connection), the launches watched, the discards batched, the
//! site's polls (its load and its watched launches' states every monitor interval, as a
//! site worker's, seed 003 §4.3.2), the retries of failed cancels, and the calls a
//! thread waits for (file operations, the reservation calls of issue 31). No lock, no clock,
//! no channel: the time is passed in, the session is lent by its owner
//! ([`super::remote::AgentSite`]), and what the driver is to hear is taken with
//! [`AgentCalls::poll_report`].
//!
//! What a silent link means is not decided here: the hub tells the driver, and the core
//! keeps the grace (`coalloc_core::scheduler::link`). A call in flight on a connection
//! that ends is failed (a submission: the driver cancels it by name later, as any
//! unanswered one) or kept for the next connection (cancels, discards).

use super::proto::{Answer, Call, CallError, ToAgent};
use super::session::server::ServerSession;
use crate::msg::{Report, SiteCall};
use coalloc_backends::{BackendError, RemoteState, SiteLoad, SubmitRequest};
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// Discards go to the agent in messages of this many (or with the next poll).
pub const DISCARD_BATCH: usize = 256;
/// How long the agent may take to give the site's load. The core hears a site's health
/// only through its readings, and only the link knows that one is outstanding: a reading
/// that does not come must become a reading of "down" here (as a site worker's load call
/// times out), or the site would stay healthy on its last reading for ever.
pub const LOAD_LIMIT: Duration = Duration::from_secs(5);
/// How long the rest of a poll (the launches' states) and a waited call may take, for
/// the same reason: the waiting side (the monitor, a transfer's thread) has no other way
/// to learn that the answer is not coming while the agent itself still answers pings.
pub const CALL_LIMIT: Duration = Duration::from_secs(60);
/// A failed cancel is tried this many times in all, 1, 2, 4, 8 s apart (as a site
/// worker's: a launch left running beside its replacement is the worse outcome).
const CANCEL_TRIES: u32 = 5;

/// What an answer is awaited for.
#[derive(Debug)]
enum Pending {
    /// A burst of submissions, these launches in order.
    Submit(Vec<u64>),
    /// A cancel (`Cancel` or `CancelUnrecorded`), on its `try`-th try.
    Cancel(Call, u32),
    Discard(Vec<String>),
    Load,
    /// The states of these launches.
    Query(Vec<u64>),
    /// A call a thread waits for (a file operation, a reservation call); failed at `due`.
    Waited(Instant),
}

/// The poll in flight.
#[derive(Debug)]
struct Poll {
    started: Instant,
    load: Option<Result<SiteLoad, String>>,
    /// `None` while the states are awaited; no query was sent when nothing is watched.
    states: Option<Vec<(u64, RemoteState)>>,
}

/// One agent site's calls (see the module doc).
pub struct AgentCalls {
    site: usize,
    name: String,
    interval: Duration,
    next_id: u64,
    /// Calls not yet on a connection, in order: all of them while the link is down.
    queued: VecDeque<Call>,
    /// Answers awaited, by call number, with the connection the call went out on.
    pending: BTreeMap<u64, (u64, Pending)>,
    /// The launches whose states every poll asks for, with their remote ids.
    watched: BTreeMap<u64, String>,
    discards: Vec<String>,
    /// Failed cancels to try again at their time (and their next try's number).
    retries: Vec<(Instant, Call, u32)>,
    /// The connection calls go out on, when the link is up.
    conn: Option<u64>,
    next_poll: Option<Instant>,
    polling: Option<Poll>,
    /// The last submission, and whether the due poll already waited for one.
    last_submit: Option<Instant>,
    postponed: bool,
    reports: VecDeque<Report>,
    waited: VecDeque<(u64, Result<Answer, CallError>)>,
}

impl AgentCalls {
    /// The calls of site number `site` (named `name`), polled every `interval`.
    pub fn new(site: usize, name: String, interval: Duration) -> AgentCalls {
        AgentCalls {
            site,
            name,
            interval,
            next_id: 0,
            queued: VecDeque::new(),
            pending: BTreeMap::new(),
            watched: BTreeMap::new(),
            discards: Vec::new(),
            retries: Vec::new(),
            conn: None,
            next_poll: None,
            polling: None,
            last_submit: None,
            postponed: false,
            reports: VecDeque::new(),
            waited: VecDeque::new(),
        }
    }

    /// A call of the driver: kept until [`AgentCalls::flush`] puts it on the link (the
    /// watched launches change at once). Leases, releases and preemptions are not the
    /// agent's (the link's owner carries them out).
    pub fn call(&mut self, call: SiteCall) {
        match call {
            SiteCall::Submit(r) => self.queued.push_back(Call::Submit(r)),
            SiteCall::Cancel(remote) => self.queued.push_back(Call::Cancel(remote)),
            SiteCall::CancelUnrecorded {
                job,
                component,
                launch,
            } => self.queued.push_back(Call::CancelUnrecorded {
                job,
                component,
                launch,
            }),
            SiteCall::Watch { launch, remote } => {
                self.watched.insert(launch, remote);
            }
            SiteCall::Forget(launch) => {
                self.watched.remove(&launch);
            }
            SiteCall::Discard(remote) => {
                self.discards.push(remote);
                if self.discards.len() >= DISCARD_BATCH {
                    let all = std::mem::take(&mut self.discards);
                    self.queued.push_back(Call::Discard(all));
                }
            }
            // The link's owner ([`super::remote::AgentLink`]) carries these out.
            SiteCall::KillLocal(_)
            | SiteCall::Lease(_)
            | SiteCall::Release { .. }
            | SiteCall::Reserve(_) => {}
        }
    }

    /// Whether calls wait to go out.
    pub fn has_queued(&self) -> bool {
        !self.queued.is_empty()
    }

    /// Connection `conn` is the site's link from `now`: polls start at once, and what was
    /// kept goes out first ([`AgentCalls::flush`]).
    pub fn connected(&mut self, now: Instant, conn: u64, session: &mut ServerSession) {
        self.conn = Some(conn);
        self.next_poll = Some(now);
        self.postponed = false;
        self.flush(now, session);
    }

    /// Connection `conn` ended. Submissions in flight on it fail (the driver cancels them
    /// by name: the agent may have taken them), cancels and discards go back in front of
    /// the queue, the poll is dropped, waited calls fail (Unavailable).
    pub fn disconnected(&mut self, conn: u64) {
        if self.conn == Some(conn) {
            self.conn = None;
            self.next_poll = None;
            self.polling = None;
            // Retries wait for the next connection, in front of what came after them.
            self.retries.sort_by_key(|(at, _, _)| *at);
            for (_, call, _) in self.retries.drain(..).rev() {
                self.queued.push_front(call);
            }
        }
        let lost: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, (c, _))| *c == conn)
            .map(|(id, _)| *id)
            .collect();
        let mut again = Vec::new();
        for id in lost {
            let Some((_, p)) = self.pending.remove(&id) else {
                continue;
            };
            match p {
                Pending::Submit(launches) => {
                    let why = format!(
                        "the link to the agent of site `{}` closed before its answer",
                        self.name
                    );
                    let all = launches
                        .into_iter()
                        .map(|l| (l, Err(BackendError::Unavailable(why.clone()))))
                        .collect();
                    self.reports
                        .push_back(Report::SubmittedMany(self.site, all));
                }
                Pending::Cancel(call, _) => again.push(call),
                Pending::Discard(ids) => again.push(Call::Discard(ids)),
                Pending::Waited(_) => self.waited.push_back((
                    id,
                    Err(CallError::Unavailable("the agent link closed".into())),
                )),
                Pending::Load | Pending::Query(_) => {}
            }
        }
        for call in again.into_iter().rev() {
            self.queued.push_front(call);
        }
    }

    /// Number `call` and put it on `session`, awaiting its answer as `pending`.
    fn send(&mut self, conn: u64, session: &mut ServerSession, call: Call, pending: Pending) {
        self.next_id += 1;
        let id = self.next_id;
        self.pending.insert(id, (conn, pending));
        session.send(ToAgent::Call { id, call });
    }

    /// Put the calls kept on the link's `session`, in order, each run of submissions as
    /// one burst (one message; the agent submits it as its backend prefers). Nothing while
    /// the link is down.
    pub fn flush(&mut self, now: Instant, session: &mut ServerSession) {
        let Some(conn) = self.conn else {
            return;
        };
        while let Some(call) = self.queued.pop_front() {
            match call {
                Call::Submit(first) => {
                    let mut burst = vec![*first];
                    while let Some(Call::Submit(_)) = self.queued.front() {
                        if let Some(Call::Submit(r)) = self.queued.pop_front() {
                            burst.push(*r);
                        }
                    }
                    self.last_submit = Some(now);
                    let launches = burst.iter().map(|r: &SubmitRequest| r.launch).collect();
                    self.send(
                        conn,
                        session,
                        Call::SubmitMany(burst),
                        Pending::Submit(launches),
                    );
                }
                Call::Discard(ids) => self.send(
                    conn,
                    session,
                    Call::Discard(ids.clone()),
                    Pending::Discard(ids),
                ),
                cancel => self.send(conn, session, cancel.clone(), Pending::Cancel(cancel, 1)),
            }
        }
    }

    /// A call a thread waits for (a file operation, a reservation call) on the link's
    /// `session`, failed at `now + CALL_LIMIT`; its number (its answer comes out of
    /// [`AgentCalls::poll_waited`]), or why it cannot go out: not kept while the link is
    /// down, it fails at once as Unavailable.
    pub fn waited(
        &mut self,
        now: Instant,
        call: Call,
        session: &mut ServerSession,
    ) -> Result<u64, BackendError> {
        let Some(conn) = self.conn else {
            return Err(BackendError::Unavailable(format!(
                "the agent of site `{}` is not connected",
                self.name
            )));
        };
        self.send(conn, session, call, Pending::Waited(now + CALL_LIMIT));
        Ok(self.next_id)
    }

    /// The agent answered call `id` (on connection `conn`) at `now`.
    pub fn answered(&mut self, now: Instant, id: u64, result: Result<Answer, CallError>) {
        let Some((_, pending)) = self.pending.remove(&id) else {
            return;
        };
        match pending {
            Pending::Submit(launches) => {
                let n = launches.len();
                let all: Vec<Result<String, BackendError>> = match result {
                    Ok(Answer::SubmittedMany(all)) if all.len() == n => {
                        all.into_iter().map(|r| r.map_err(backend_error)).collect()
                    }
                    Ok(other) => {
                        let why =
                            format!("the agent answered a burst of submissions with {other:?}");
                        (0..n)
                            .map(|_| Err(BackendError::Unavailable(why.clone())))
                            .collect()
                    }
                    Err(e) => (0..n).map(|_| Err(backend_error(e.clone()))).collect(),
                };
                self.reports.push_back(Report::SubmittedMany(
                    self.site,
                    launches.into_iter().zip(all).collect(),
                ));
            }
            Pending::Cancel(call, tries) => {
                if let Err(e) = result {
                    tracing::warn!(site = %self.name, ?call, tries, "cancel failed: {e:?}");
                    if tries < CANCEL_TRIES {
                        let wait = Duration::from_secs(1 << (tries - 1));
                        self.retries.push((now + wait, call, tries + 1));
                    }
                }
            }
            Pending::Discard(_) => {}
            Pending::Load => {
                let load = match result {
                    Ok(Answer::Load(l)) => Ok(l),
                    Ok(other) => Err(format!("the agent answered a load reading with {other:?}")),
                    Err(e) => Err(backend_error(e).to_string()),
                };
                if let Some(p) = &mut self.polling {
                    p.load = Some(load);
                }
                self.poll_done(now);
            }
            Pending::Query(launches) => {
                let states = match result {
                    Ok(Answer::States(s)) if s.len() == launches.len() => {
                        launches.into_iter().zip(s).collect()
                    }
                    other => {
                        tracing::warn!(site = %self.name, "query failed: {other:?}");
                        Vec::new()
                    }
                };
                if let Some(p) = &mut self.polling {
                    p.states = Some(states);
                }
                self.poll_done(now);
            }
            Pending::Waited(_) => self.waited.push_back((id, result)),
        }
    }

    /// Report the poll in flight once both its answers are in.
    fn poll_done(&mut self, now: Instant) {
        if self
            .polling
            .as_ref()
            .is_some_and(|p| p.load.is_some() && p.states.is_some())
        {
            self.report_poll(now);
        }
    }

    /// Report the poll in flight with what came of it (a load not given: an error; states
    /// not given: none) and forget its calls.
    fn report_poll(&mut self, now: Instant) {
        let Some(p) = self.polling.take() else {
            return;
        };
        self.pending
            .retain(|_, (_, w)| !matches!(w, Pending::Load | Pending::Query(_)));
        let load = p.load.unwrap_or_else(|| {
            Err(format!(
                "the agent of site `{}` did not give its load within {} s",
                self.name,
                LOAD_LIMIT.as_secs()
            ))
        });
        self.reports.push_back(Report::Polled {
            site: self.site,
            load,
            states: p.states.unwrap_or_default(),
        });
        // The next one an interval after this one's start, not before its end.
        let next = p.started + self.interval;
        self.next_poll = Some(next.max(now));
    }

    /// When [`AgentCalls::handle_timeout`] is due: the next poll (or the one in flight's
    /// limit), a retry, a waited call's limit. Nothing while the link is down.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.conn?;
        let poll = match &self.polling {
            Some(p) => Some(self.poll_limit(p)),
            None => self.next_poll,
        };
        let retry = self.retries.iter().map(|(at, _, _)| *at).min();
        let waited = self
            .pending
            .values()
            .filter_map(|(_, p)| match p {
                Pending::Waited(due) => Some(*due),
                _ => None,
            })
            .min();
        [poll, retry, waited].into_iter().flatten().min()
    }

    fn poll_limit(&self, p: &Poll) -> Instant {
        p.started
            + match p.load {
                None => LOAD_LIMIT,
                Some(_) => CALL_LIMIT,
            }
    }

    /// Time passed up to `now`: poll when due (discards kept go first), try failed cancels
    /// again, give up on answers past their limits.
    pub fn handle_timeout(&mut self, now: Instant, session: &mut ServerSession) {
        let Some(conn) = self.conn else {
            return;
        };
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retries)
            .into_iter()
            .partition(|(at, _, _)| *at <= now);
        self.retries = later;
        for (_, call, tries) in due {
            self.send(conn, session, call.clone(), Pending::Cancel(call, tries));
        }
        let late: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, (_, p))| matches!(p, Pending::Waited(due) if *due <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            self.pending.remove(&id);
            let why = format!(
                "the agent of site `{}` did not answer within {} s",
                self.name,
                CALL_LIMIT.as_secs()
            );
            self.waited
                .push_back((id, Err(CallError::Unavailable(why))));
        }
        if let Some(p) = &self.polling {
            if now >= self.poll_limit(p) {
                self.report_poll(now);
            }
            return;
        }
        let Some(at) = self.next_poll.filter(|at| *at <= now) else {
            return;
        };
        // A poll due within an interval of a submission waits until an interval after it,
        // once (as a site worker's: the launch is starting, its reading would be half-made).
        if let Some(after) = self.last_submit.map(|t| t + self.interval) {
            if !self.postponed && after > now {
                self.next_poll = Some(after.max(at));
                self.postponed = true;
                return;
            }
        }
        self.postponed = false;
        self.next_poll = None;
        if !self.discards.is_empty() {
            // The load is read at every poll, even when no launch is watched: the last
            // discards of a site left idle go with it, not never.
            let ids = std::mem::take(&mut self.discards);
            self.send(
                conn,
                session,
                Call::Discard(ids.clone()),
                Pending::Discard(ids),
            );
        }
        self.send(conn, session, Call::Load, Pending::Load);
        let (launches, remotes): (Vec<u64>, Vec<String>) =
            self.watched.iter().map(|(l, r)| (*l, r.clone())).unzip();
        let states = if remotes.is_empty() {
            Some(Vec::new())
        } else {
            self.send(
                conn,
                session,
                Call::Query(remotes),
                Pending::Query(launches),
            );
            None
        };
        self.polling = Some(Poll {
            started: now,
            load: None,
            states,
        });
    }

    /// What the driver is to hear, in order.
    pub fn poll_report(&mut self) -> Option<Report> {
        self.reports.pop_front()
    }

    /// A waited call's answer, by its number.
    pub fn poll_waited(&mut self) -> Option<(u64, Result<Answer, CallError>)> {
        self.waited.pop_front()
    }
}

/// An agent's error in the backend's classes.
pub fn backend_error(e: CallError) -> BackendError {
    match e {
        CallError::Rejected(m) => BackendError::Rejected(m),
        CallError::Unavailable(m) => BackendError::Unavailable(m),
    }
}

#[cfg(test)]
mod tests;
