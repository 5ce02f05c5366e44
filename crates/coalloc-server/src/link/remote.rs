//! An agent site as the server's driver sees it: [`AgentSite`], the site's link state
//! shared by the driver's side and the hub's pump, under one mutex: the session of each
//! connection whose pump runs ([`ServerSession`]) beside the site's calls
//! ([`AgentCalls`]). Around it, [`AgentLink`] is the driver's [`SiteLink`] to the site,
//! [`Pumped`] the hub's pump's handle on one connection, and [`AgentBackend`] the site's
//! [`Backend`] for the calls a thread waits for: file operations (transfers and staging)
//! and advance reservations (issue 31 item 3), carried out by the agent on its site.
//!
//! One hand-off each way (docs/design-link.md, "The submit path"): the driver's
//! [`SiteLink::send`] puts the call in the site's [`AgentCalls`] and wakes the pump of the
//! connection of the moment (a [`Notify`]); the pump, woken, moves the calls into its
//! session (a burst of submissions as one message) and writes the frames. When the agent
//! answers, the pump hands the frame to the session, [`AgentCalls::answered`] turns the
//! answer into the driver's [`Report`], and the pump sends it on the driver's inbox. No
//! thread waits for an answer, and nothing here reads a clock but the pump's own times:
//! a silent link is the session's heartbeat, its meaning (disconnected, lost past the
//! grace) the core's (`coalloc_core::scheduler::link`); while it is down, the calls are
//! kept and go out in order on the next connection.

use super::calls::{backend_error, AgentCalls};
use super::proto::{Answer, Call, CallError, FromAgent, Reserving, ToAgent};
use super::pump::{Session, Transmit};
use super::session::server::{ServerEvent, ServerSession};
use crate::msg::{Msg, Report, SiteCall, SiteLink};
use coalloc_backends::files::{FileAnswer, FileOp};
use coalloc_backends::provider::Provider;
use coalloc_backends::{Backend, BackendError, RemoteId, RemoteState, SiteLoad, SubmitRequest};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, Notify};

/// One agent site's link, shared by its connections' pumps (the hub) and the driver.
pub struct AgentSite {
    pub name: String,
    /// The site's number in the configuration.
    pub index: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    calls: AgentCalls,
    /// Every connection whose pump runs, by number.
    conns: BTreeMap<u64, Conn>,
    /// The connection of the moment: the driver's calls go out on it.
    current: Option<u64>,
    next_conn: u64,
    /// Threads waiting for a call's answer (a file operation, a reservation call), by
    /// call number.
    waiting: BTreeMap<u64, oneshot::Sender<Result<Answer, CallError>>>,
    /// What the site's agent last said of its reservations (in its hello).
    reserving: Reserving,
}

/// One connection: its session, its pump's wake-up, the relayed calls it brought.
struct Conn {
    session: ServerSession,
    wake: Arc<Notify>,
    relays: Vec<ServerEvent>,
}

impl Inner {
    /// Take connection `conn`'s session events at `now`: answers into the calls, relayed
    /// calls kept for the pump; then the answers of waited calls to their threads.
    fn settle(&mut self, conn: u64, now: Instant) {
        if let Some(c) = self.conns.get_mut(&conn) {
            while let Some(e) = c.session.poll_event() {
                match e {
                    ServerEvent::Answered { id, result } => self.calls.answered(now, id, result),
                    e @ ServerEvent::Relay { .. } => c.relays.push(e),
                    ServerEvent::Unexpected(m) => tracing::warn!("from an agent: {m}, ignored"),
                    ServerEvent::Down(_) => {}
                }
            }
        }
        while let Some((id, result)) = self.calls.poll_waited() {
            if let Some(w) = self.waiting.remove(&id) {
                let _ = w.send(result);
            }
        }
    }

    fn wake_current(&self) {
        if let Some(c) = self.current.and_then(|c| self.conns.get(&c)) {
            c.wake.notify_one();
        }
    }
}

impl AgentSite {
    /// Site number `index`, named `name`, polled every `interval` while its agent is
    /// connected.
    pub fn new(name: String, index: usize, interval: Duration) -> AgentSite {
        AgentSite {
            inner: Mutex::new(Inner {
                calls: AgentCalls::new(index, name.clone(), interval),
                conns: BTreeMap::new(),
                current: None,
                next_conn: 0,
                waiting: BTreeMap::new(),
                reserving: Reserving::MayNot(format!(
                    "the agent of site `{name}` has not connected since the server started"
                )),
            }),
            name,
            index,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection was welcomed at `now` (`welcome` is its first message out): it becomes
    /// the site's link, and what was kept goes out first, in order. The pump's handle.
    pub fn connect(
        self: &Arc<Self>,
        now: Instant,
        heartbeat: Duration,
        welcome: ToAgent,
    ) -> Pumped {
        let mut g = self.lock();
        g.next_conn += 1;
        let conn = g.next_conn;
        let mut session = ServerSession::new(now, heartbeat, welcome);
        g.calls.connected(now, conn, &mut session);
        let wake = Arc::new(Notify::new());
        g.conns.insert(
            conn,
            Conn {
                session,
                wake: wake.clone(),
                relays: Vec::new(),
            },
        );
        g.current = Some(conn);
        Pumped {
            site: self.clone(),
            conn,
            wake,
        }
    }

    /// Whether a connection is the site's link now.
    pub fn connected(&self) -> bool {
        self.lock().current.is_some()
    }

    /// The agent said in its hello whether its site may reserve (kept across its
    /// disconnections until its next hello).
    pub fn announced(&self, reserving: Reserving) {
        self.lock().reserving = reserving;
    }

    /// What the site's agent last said of its reservations.
    pub fn reserving(&self) -> Reserving {
        self.lock().reserving.clone()
    }

    /// A call of the driver, kept in the site's calls; the pump is woken to take it.
    fn call(&self, call: SiteCall) {
        let mut g = self.lock();
        g.calls.call(call);
        if g.calls.has_queued() {
            g.wake_current();
        }
    }

    /// A call waited for (by the transfer's or the staging's own thread, by the thread
    /// that makes a reservation): on the connection of the moment, Unavailable without
    /// one. Blocking: never from an async task.
    fn wait(&self, call: Call) -> Result<Answer, BackendError> {
        let rx = {
            let mut g = self.lock();
            let Inner {
                calls,
                conns,
                current,
                waiting,
                ..
            } = &mut *g;
            let session = current
                .and_then(|c| conns.get_mut(&c))
                .map(|c| &mut c.session);
            let Some(session) = session else {
                return Err(BackendError::Unavailable(format!(
                    "the agent of site `{}` is not connected",
                    self.name
                )));
            };
            let id = calls.waited(Instant::now(), call, session)?;
            let (tx, rx) = oneshot::channel();
            waiting.insert(id, tx);
            g.wake_current();
            rx
        };
        match rx.blocking_recv() {
            Ok(r) => r.map_err(backend_error),
            Err(_) => Err(BackendError::Unavailable("the agent link closed".into())),
        }
    }
}

/// The hub's pump's handle on one connection of a site: a [`Session`] whose every step
/// takes the site's lock; the pump runs it with [`super::pump::run_notified`] on
/// [`Pumped::wake`].
pub struct Pumped {
    site: Arc<AgentSite>,
    conn: u64,
    pub wake: Arc<Notify>,
}

impl Pumped {
    /// Run `f` on the site's state and this connection, then settle the session's events.
    fn with<R>(
        &self,
        now: Instant,
        f: impl FnOnce(&mut AgentCalls, &mut Conn, bool) -> R,
    ) -> Option<R> {
        let mut g = self.site.lock();
        let current = g.current == Some(self.conn);
        let Inner { calls, conns, .. } = &mut *g;
        let r = conns.get_mut(&self.conn).map(|c| f(calls, c, current));
        g.settle(self.conn, now);
        r
    }

    /// What the driver is to hear, and the relayed calls to serve.
    pub fn take(&mut self) -> (Vec<Report>, Vec<ServerEvent>) {
        let mut g = self.site.lock();
        let mut reports = Vec::new();
        while let Some(r) = g.calls.poll_report() {
            reports.push(r);
        }
        let relays = g
            .conns
            .get_mut(&self.conn)
            .map(|c| std::mem::take(&mut c.relays))
            .unwrap_or_default();
        (reports, relays)
    }

    /// A handle for a task that answers a relayed call on this connection.
    pub fn answerer(&self) -> Answerer {
        Answerer {
            site: self.site.clone(),
            conn: self.conn,
        }
    }

    /// The pump ended: the connection leaves the site (its calls in flight fail or are
    /// kept, see [`AgentCalls::disconnected`]). What the driver is to hear, and whether
    /// another connection of the site is up.
    pub fn end(self) -> (Vec<Report>, bool) {
        let mut g = self.site.lock();
        g.conns.remove(&self.conn);
        if g.current == Some(self.conn) {
            g.current = None;
        }
        g.calls.disconnected(self.conn);
        g.settle(self.conn, Instant::now());
        let mut reports = Vec::new();
        while let Some(r) = g.calls.poll_report() {
            reports.push(r);
        }
        (reports, g.current.is_some())
    }
}

/// Sends a relayed call's answer on the connection it came from.
#[derive(Clone)]
pub struct Answerer {
    site: Arc<AgentSite>,
    conn: u64,
}

impl Answerer {
    pub fn send(&self, msg: ToAgent) {
        let mut g = self.site.lock();
        if let Some(c) = g.conns.get_mut(&self.conn) {
            c.session.send(msg);
            c.wake.notify_one();
        }
    }
}

impl Session for Pumped {
    type In = FromAgent;
    type Out = ToAgent;
    fn handle(&mut self, now: Instant, msg: FromAgent) {
        self.with(now, |_, c, _| c.session.handle(now, msg));
    }
    fn heard(&mut self, now: Instant) {
        self.with(now, |_, c, _| c.session.heard(now));
    }
    fn send(&mut self, msg: ToAgent) {
        self.with(Instant::now(), |_, c, _| c.session.send(msg));
    }
    fn closed(&mut self, now: Instant, why: String) {
        self.with(now, |_, c, _| c.session.closed(why));
    }
    fn poll_transmit(&mut self) -> Option<Transmit<ToAgent>> {
        let mut g = self.site.lock();
        g.conns.get_mut(&self.conn)?.session.poll_transmit()
    }
    fn has_transmit(&self) -> bool {
        let g = self.site.lock();
        g.conns
            .get(&self.conn)
            .is_some_and(|c| Session::has_transmit(&c.session))
    }
    /// The session's timer (ping, silence) and, on the connection of the moment, the
    /// calls' (the next poll, retries, limits).
    fn poll_timeout(&self) -> Option<Instant> {
        let g = self.site.lock();
        let c = g.conns.get(&self.conn)?;
        let calls = (g.current == Some(self.conn))
            .then(|| g.calls.poll_timeout())
            .flatten();
        [c.session.poll_timeout(), calls]
            .into_iter()
            .flatten()
            .min()
    }
    /// Also what a wake-up is: the calls kept go out, then what is due.
    fn handle_timeout(&mut self, now: Instant) {
        self.with(now, |calls, c, current| {
            c.session.handle_timeout(now);
            if current {
                calls.flush(now, &mut c.session);
                calls.handle_timeout(now, &mut c.session);
            }
        });
    }
    fn over(&self) -> Option<String> {
        let g = self.site.lock();
        match g.conns.get(&self.conn) {
            Some(c) => Session::over(&c.session),
            None => Some("the connection left its site".into()),
        }
    }
}

/// The driver's [`SiteLink`] to an agent site: calls go into the site's link state; a
/// cloud site's leases and releases go to its provider, and reservations to its
/// [`AgentBackend`], as a site worker's.
pub struct AgentLink {
    pub site: Arc<AgentSite>,
    pub provider: Option<Arc<dyn Provider>>,
    pub driver: std::sync::mpsc::Sender<Msg>,
}

impl SiteLink for AgentLink {
    fn send(&self, call: SiteCall) {
        let site = self.site.index;
        match call {
            SiteCall::Lease(vm) => {
                crate::sites::lease(site, vm, self.provider.clone(), self.driver.clone())
            }
            SiteCall::Release { vm, node } => {
                crate::sites::release(site, vm, node, self.provider.clone(), self.driver.clone())
            }
            // Reservations are the agent's to make, each call waited for on a thread of
            // its own, as a site worker's are (issue 31 item 3).
            SiteCall::Reserve(call) => {
                let backend: Arc<dyn Backend> = Arc::new(AgentBackend(self.site.clone()));
                crate::sites::reserve(site, call, backend, self.driver.clone())
            }
            SiteCall::KillLocal(processors) => {
                // Refused at startup (GP needs sites that can preempt), so never sent.
                tracing::warn!(
                    site,
                    processors,
                    "GP: an agent site cannot preempt local jobs"
                )
            }
            call => self.site.call(call),
        }
    }
}

/// The [`Backend`] of an agent site: its file operations and its reservations, carried
/// out by its agent (each call waited for, Unavailable while the link is down). The
/// launches go over the site's [`AgentLink`], never through here.
pub struct AgentBackend(pub Arc<AgentSite>);

impl AgentBackend {
    fn not_here(&self) -> BackendError {
        BackendError::Unavailable(format!(
            "site `{}`: an agent site's launches go over its link, not its backend",
            self.0.name
        ))
    }

    /// `call`, whose answer must be `Done`.
    fn done(&self, call: Call) -> Result<(), BackendError> {
        match self.0.wait(call)? {
            Answer::Done => Ok(()),
            other => Err(self.odd(other)),
        }
    }

    fn odd(&self, answer: Answer) -> BackendError {
        BackendError::Unavailable(format!(
            "the agent of site `{}` answered with {answer:?}",
            self.0.name
        ))
    }
}

impl Backend for AgentBackend {
    fn submit(&self, _: &SubmitRequest) -> Result<RemoteId, BackendError> {
        Err(self.not_here())
    }
    fn query(&self, _: &[RemoteId]) -> Result<Vec<RemoteState>, BackendError> {
        Err(self.not_here())
    }
    fn cancel(&self, _: &RemoteId) -> Result<(), BackendError> {
        Err(self.not_here())
    }
    fn load(&self) -> Result<SiteLoad, BackendError> {
        Err(self.not_here())
    }
    /// File operations run at the agent, on the site's file system (`base` is the server's
    /// and means nothing there: the agent's own state directory is used).
    fn file(&self, _base: &std::path::Path, op: FileOp) -> Result<FileAnswer, BackendError> {
        match self.0.wait(Call::File(op))? {
            Answer::File(a) => Ok(a),
            other => Err(self.odd(other)),
        }
    }
    /// What the agent said in its last hello (its backend's `may_reserve` and its own
    /// `reserve` setting); `false` before its first.
    fn may_reserve(&self) -> bool {
        self.0.reserving().may()
    }
    fn reserve_earliest(
        &self,
        count: u32,
        duration_ms: i64,
        not_before_ms: i64,
    ) -> Result<i64, BackendError> {
        let call = Call::ReserveEarliest {
            count,
            duration_ms,
            not_before_ms,
        };
        match self.0.wait(call)? {
            Answer::Earliest(t) => Ok(t),
            other => Err(self.odd(other)),
        }
    }
    fn reserve(
        &self,
        name: &str,
        count: u32,
        start_ms: i64,
        duration_ms: i64,
    ) -> Result<(), BackendError> {
        self.done(Call::Reserve {
            name: name.to_owned(),
            count,
            start_ms,
            duration_ms,
        })
    }
    fn unreserve(&self, name: &str) -> Result<(), BackendError> {
        self.done(Call::Unreserve(name.to_owned()))
    }
    fn reservations(&self) -> Result<Vec<String>, BackendError> {
        match self.0.wait(Call::Reservations)? {
            Answer::Reservations(names) => Ok(names),
            other => Err(self.odd(other)),
        }
    }
}

#[cfg(test)]
mod tests;
