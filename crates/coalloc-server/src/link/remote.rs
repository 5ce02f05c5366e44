//! An agent site as the server's driver sees it: one more [`Backend`], whose calls travel
//! over the site's agent link ([`AgentSite`]) instead of reaching a resource manager on this
//! host. The link's state lives here: the connection of the moment, the calls waiting for
//! their answers, the cancels made while the link was down (delivered in order when it comes
//! back), and what the site last said, so that a short outage is ridden out.
//!
//! Link failure is a site failure (seed 000 §3.4), but only after a grace period. The core
//! decides it: the hub tells the driver when a connection ends, the core hears "site
//! disconnected" and keeps the grace among its timers (`coalloc_core::scheduler::link`).
//! Until then the site answers with its last reading and its launches' last states. The
//! wall-clock check kept here is a fallback for a link that never came up since the
//! server started (no connection ended, so the core heard nothing): past the grace the
//! site is unhealthy and every launch there is reported failed ("the site is
//! unreachable"). When the agent comes back, the launches it still holds that the server
//! no longer wants are cancelled (see [`super::hub`]).

use super::proto::{Answer, Call, CallError, ToAgent};
use crate::views::LinkView;
use coalloc_backends::files::{FileAnswer, FileOp};
use coalloc_backends::{Backend, BackendError, RemoteId, RemoteState, SiteLoad, SubmitRequest};
use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

type Waiter = Sender<Result<Answer, CallError>>;

/// One agent site's link, shared by its connection (the hub) and its backend (the driver's
/// site worker).
pub struct AgentSite {
    pub name: String,
    /// How long the link may be down before the site counts as failed.
    pub grace: Duration,
    /// How long a call waits for its answer (a submission to a slow resource manager
    /// included).
    pub call_timeout: Duration,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The connection of the moment: its number and its outgoing queue.
    conn: Option<(u64, UnboundedSender<ToAgent>)>,
    /// Since when the link is down (the server's start, before the first connection).
    down_since: Option<Instant>,
    next_id: u64,
    /// Calls waiting for an answer, with the connection they went out on.
    waiting: BTreeMap<u64, (u64, Option<Waiter>)>,
    /// Cancels made while the link was down, in order.
    outbox: VecDeque<Call>,
    last_load: Option<SiteLoad>,
    /// The last state of each launch asked about, by its remote id.
    states: BTreeMap<String, RemoteState>,
    /// Launches whose job the server dropped, to tell the agent in one message.
    discards: Vec<String>,
}

/// Discards go to the agent in messages of this many (or with the next query).
const DISCARD_BATCH: usize = 256;

impl AgentSite {
    pub fn new(name: String, grace: Duration, call_timeout: Duration) -> AgentSite {
        AgentSite {
            name,
            grace,
            call_timeout,
            inner: Mutex::new(Inner {
                down_since: Some(Instant::now()),
                ..Inner::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection was accepted: it becomes the site's link, and what waited in the outbox
    /// goes out first, in order.
    pub fn connected(&self, conn: u64, tx: UnboundedSender<ToAgent>) {
        let mut g = self.lock();
        g.conn = Some((conn, tx.clone()));
        g.down_since = None;
        while let Some(call) = g.outbox.pop_front() {
            g.next_id += 1;
            let id = g.next_id;
            g.waiting.insert(id, (conn, None));
            let _ = tx.send(ToAgent::Call { id, call });
        }
    }

    /// Connection `conn` ended. Calls that went out on it fail now (they would only time
    /// out); cancels among them go back to the outbox.
    pub fn disconnected(&self, conn: u64) {
        let mut g = self.lock();
        if g.conn.as_ref().is_some_and(|(c, _)| *c == conn) {
            g.conn = None;
            g.down_since = Some(Instant::now());
        }
        let lost: Vec<u64> = g
            .waiting
            .iter()
            .filter(|(_, (c, _))| *c == conn)
            .map(|(id, _)| *id)
            .collect();
        for id in lost {
            g.waiting.remove(&id);
        }
    }

    /// An answer arrived.
    pub fn answered(&self, id: u64, result: Result<Answer, CallError>) {
        let waiter = self.lock().waiting.remove(&id);
        match waiter {
            Some((_, Some(w))) => {
                let _ = w.send(result);
            }
            Some((_, None)) => {
                if let Err(e) = result {
                    tracing::warn!(site = %self.name, "a cancel sent after a reconnect failed: {e:?}");
                }
            }
            None => {}
        }
    }

    /// The link's status, for `coalloc sites`.
    pub fn status(&self) -> LinkView {
        let g = self.lock();
        let down_for = g.down_since.map(|t| t.elapsed());
        LinkView {
            connected: g.conn.is_some(),
            down_for_ms: down_for.map(|d| d.as_millis() as u64),
            unreachable: down_for.is_some_and(|d| d > self.grace),
        }
    }

    /// Why the site counts as failed, once the link has been down past the grace period.
    fn unreachable(&self, g: &Inner) -> Option<String> {
        let down = g.down_since?.elapsed();
        (down > self.grace).then(|| {
            format!(
                "site `{}` is unreachable: its agent has been disconnected for {} s (grace {} s)",
                self.name,
                down.as_secs(),
                self.grace.as_secs()
            )
        })
    }

    /// Make a call and wait for its answer; `Err` at once when the link is down.
    fn call(&self, call: Call, timeout: Duration) -> Result<Answer, BackendError> {
        let (tx, rx) = channel();
        {
            let mut g = self.lock();
            let Some((conn, link)) = g.conn.clone() else {
                return Err(BackendError::Unavailable(format!(
                    "the agent of site `{}` is not connected",
                    self.name
                )));
            };
            g.next_id += 1;
            let id = g.next_id;
            g.waiting.insert(id, (conn, Some(tx)));
            if link.send(ToAgent::Call { id, call }).is_err() {
                g.waiting.remove(&id);
                return Err(BackendError::Unavailable("the agent link closed".into()));
            }
        }
        match rx.recv_timeout(timeout) {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(CallError::Rejected(m))) => Err(BackendError::Rejected(m)),
            Ok(Err(CallError::Unavailable(m))) => Err(BackendError::Unavailable(m)),
            Err(_) => Err(BackendError::Unavailable(format!(
                "the agent of site `{}` did not answer within {} s",
                self.name,
                timeout.as_secs()
            ))),
        }
    }

    /// Send the discards kept, without waiting for an answer; kept while the link is down.
    fn send_discards(&self, g: &mut Inner) {
        if g.discards.is_empty() {
            return;
        }
        let Some((conn, tx)) = g.conn.clone() else {
            return;
        };
        g.next_id += 1;
        let id = g.next_id;
        g.waiting.insert(id, (conn, None));
        let _ = tx.send(ToAgent::Call {
            id,
            call: Call::Discard(std::mem::take(&mut g.discards)),
        });
    }

    /// A cancel: sent now, or kept for the link's return.
    fn cancel_call(&self, call: Call) -> Result<(), BackendError> {
        match self.call(call.clone(), self.call_timeout) {
            Ok(_) => Ok(()),
            Err(BackendError::Rejected(m)) => Err(BackendError::Rejected(m)),
            Err(_) => {
                let mut g = self.lock();
                if let Some((conn, tx)) = g.conn.clone() {
                    // Reconnected meanwhile: send it on the new link.
                    g.next_id += 1;
                    let id = g.next_id;
                    g.waiting.insert(id, (conn, None));
                    let _ = tx.send(ToAgent::Call { id, call });
                } else {
                    g.outbox.push_back(call);
                }
                Ok(())
            }
        }
    }
}

/// The [`Backend`] of an agent site.
pub struct AgentBackend(pub Arc<AgentSite>);

impl Backend for AgentBackend {
    fn submit(&self, request: &SubmitRequest) -> Result<RemoteId, BackendError> {
        match self
            .0
            .call(Call::Submit(Box::new(request.clone())), self.0.call_timeout)?
        {
            Answer::Submitted(id) => Ok(id),
            other => Err(BackendError::Unavailable(format!(
                "the agent answered a submission with {other:?}"
            ))),
        }
    }

    /// A job's components on this site go out in one message (the site worker collects
    /// them, see [`AgentBackend::submits_in_parallel`]); the agent submits them as its own
    /// backend prefers.
    fn submit_many(&self, requests: &[SubmitRequest]) -> Vec<Result<RemoteId, BackendError>> {
        let answer = self
            .0
            .call(Call::SubmitMany(requests.to_vec()), self.0.call_timeout);
        let fail = |e: &BackendError| match e {
            BackendError::Rejected(m) => BackendError::Rejected(m.clone()),
            other => BackendError::Unavailable(other.to_string()),
        };
        match answer {
            Ok(Answer::SubmittedMany(all)) if all.len() == requests.len() => all
                .into_iter()
                .map(|r| {
                    r.map_err(|e| match e {
                        CallError::Rejected(m) => BackendError::Rejected(m),
                        CallError::Unavailable(m) => BackendError::Unavailable(m),
                    })
                })
                .collect(),
            Ok(other) => {
                let e = BackendError::Unavailable(format!(
                    "the agent answered a burst of submissions with {other:?}"
                ));
                requests.iter().map(|_| Err(fail(&e))).collect()
            }
            Err(e) => requests.iter().map(|_| Err(fail(&e))).collect(),
        }
    }

    /// Bursts, not one thread per submission: a burst is one message on the link.
    fn submits_in_parallel(&self) -> bool {
        false
    }

    fn query(&self, ids: &[RemoteId]) -> Result<Vec<RemoteState>, BackendError> {
        let site = &self.0;
        site.send_discards(&mut site.lock());
        let asked = site.call(Call::Query(ids.to_vec()), site.call_timeout);
        let mut g = site.lock();
        match asked {
            Ok(Answer::States(states)) if states.len() == ids.len() => {
                for (id, s) in ids.iter().zip(&states) {
                    g.states.insert(id.clone(), s.clone());
                }
                g.states.retain(|k, _| ids.contains(k));
                Ok(states)
            }
            Ok(other) => Err(BackendError::Unavailable(format!(
                "the agent answered a query with {other:?}"
            ))),
            Err(e) => match site.unreachable(&g) {
                Some(why) => Ok(ids.iter().map(|_| RemoteState::Lost(why.clone())).collect()),
                // Within the grace period: the last states heard.
                None if g.conn.is_none() => Ok(ids
                    .iter()
                    .map(|id| g.states.get(id).cloned().unwrap_or(RemoteState::Queued))
                    .collect()),
                None => Err(e),
            },
        }
    }

    fn cancel(&self, id: &RemoteId) -> Result<(), BackendError> {
        self.0.cancel_call(Call::Cancel(id.clone()))
    }

    /// Passed on to the agent's backend (its launch log is compacted there), in batches.
    fn discard(&self, ids: &[RemoteId]) {
        let mut g = self.0.lock();
        g.discards.extend(ids.iter().cloned());
        if g.discards.len() >= DISCARD_BATCH {
            self.0.send_discards(&mut g);
        }
    }

    /// File operations run at the agent, on the site's file system (`base` is the server's
    /// and means nothing there: the agent's own state directory is used).
    fn file(&self, _base: &std::path::Path, op: FileOp) -> Result<FileAnswer, BackendError> {
        match self.0.call(Call::File(op), self.0.call_timeout)? {
            Answer::File(a) => Ok(a),
            other => Err(BackendError::Unavailable(format!(
                "the agent answered a file operation with {other:?}"
            ))),
        }
    }

    fn cancel_unrecorded(
        &self,
        job: u64,
        component: usize,
        launch: u64,
    ) -> Result<(), BackendError> {
        self.0.cancel_call(Call::CancelUnrecorded {
            job,
            component,
            launch,
        })
    }

    fn load(&self) -> Result<SiteLoad, BackendError> {
        let site = &self.0;
        // The load is read at every poll, even when no launch is watched (and so no query
        // made): the last discards of a site left idle go with it, not never.
        site.send_discards(&mut site.lock());
        let asked = site.call(Call::Load, site.call_timeout.min(Duration::from_secs(5)));
        let mut g = site.lock();
        match asked {
            Ok(Answer::Load(l)) => {
                g.last_load = Some(l);
                Ok(l)
            }
            Ok(other) => Err(BackendError::Unavailable(format!(
                "the agent answered a load reading with {other:?}"
            ))),
            Err(e @ BackendError::Rejected(_)) => Err(e),
            Err(e) => match (site.unreachable(&g), g.last_load) {
                (None, Some(l)) if g.conn.is_none() => Ok(l),
                (Some(why), _) => Err(BackendError::Unavailable(why)),
                _ => Err(e),
            },
        }
    }

    fn query_when_unhealthy(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(grace_ms: u64) -> Arc<AgentSite> {
        Arc::new(AgentSite::new(
            "s1".into(),
            Duration::from_millis(grace_ms),
            Duration::from_secs(5),
        ))
    }

    /// An agent on the other end of a channel that answers every call with `answer`.
    fn fake_agent(
        site: Arc<AgentSite>,
        conn: u64,
        answer: impl Fn(&Call) -> Result<Answer, CallError> + Send + 'static,
    ) -> std::thread::JoinHandle<Vec<Call>> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        site.connected(conn, tx);
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while let Some(m) = rx.blocking_recv() {
                if let ToAgent::Call { id, call } = m {
                    let text = serde_json::to_string(&call).unwrap();
                    let call: Call = serde_json::from_str(&text).unwrap();
                    site.answered(id, answer(&call));
                    seen.push(call);
                }
            }
            seen
        })
    }

    #[test]
    fn calls_travel_and_answers_come_back_by_number() {
        let s = site(1000);
        let agent = fake_agent(s.clone(), 1, |c| match c {
            Call::Load => Ok(Answer::Load(SiteLoad {
                idle: 3,
                total: 8,
                other: 1,
            })),
            Call::Submit(r) => Ok(Answer::Submitted(format!("R{}", r.launch))),
            Call::Query(ids) => Ok(Answer::States(vec![RemoteState::Running; ids.len()])),
            _ => Ok(Answer::Done),
        });
        let b = AgentBackend(s.clone());
        assert_eq!(b.load().unwrap().idle, 3);
        let req = SubmitRequest {
            launch: 7,
            ..SubmitRequest::default()
        };
        assert_eq!(b.submit(&req).unwrap(), "R7");
        assert_eq!(b.query(&["R7".into()]).unwrap(), vec![RemoteState::Running]);
        s.disconnected(1);
        drop(s.lock().conn.take());
        let _ = agent.join();
    }

    #[test]
    fn within_the_grace_period_the_last_reading_stands_and_past_it_launches_fail() {
        let s = site(300);
        let b = AgentBackend(s.clone());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        s.connected(1, tx);
        let s2 = s.clone();
        let answering = std::thread::spawn(move || {
            for _ in 0..2 {
                if let Some(ToAgent::Call { id, call }) = rx.blocking_recv() {
                    s2.answered(
                        id,
                        match call {
                            Call::Load => Ok(Answer::Load(SiteLoad {
                                idle: 5,
                                total: 8,
                                other: 0,
                            })),
                            _ => Ok(Answer::States(vec![RemoteState::Running])),
                        },
                    );
                }
            }
        });
        assert_eq!(b.load().unwrap().idle, 5);
        assert_eq!(b.query(&["R1".into()]).unwrap(), vec![RemoteState::Running]);
        answering.join().unwrap();
        s.disconnected(1);
        assert!(!s.status().connected);
        assert_eq!(b.load().unwrap().idle, 5, "the last reading, within grace");
        assert_eq!(b.query(&["R1".into()]).unwrap(), vec![RemoteState::Running]);
        std::thread::sleep(Duration::from_millis(400));
        assert!(s.status().unreachable);
        let e = b.load().unwrap_err().to_string();
        assert!(e.contains("unreachable"), "{e}");
        match &b.query(&["R1".into()]).unwrap()[..] {
            [RemoteState::Lost(why)] => assert!(why.contains("unreachable"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cancels_made_while_down_go_out_in_order_when_the_agent_is_back() {
        let s = site(60_000);
        let b = AgentBackend(s.clone());
        b.cancel(&"R1".into()).unwrap();
        b.cancel_unrecorded(4, 0, 9).unwrap();
        b.cancel(&"R2".into()).unwrap();
        let agent = fake_agent(s.clone(), 1, |_| Ok(Answer::Done));
        s.disconnected(1);
        drop(s.lock().conn.take());
        assert_eq!(
            agent.join().unwrap(),
            vec![
                Call::Cancel("R1".into()),
                Call::CancelUnrecorded {
                    job: 4,
                    component: 0,
                    launch: 9
                },
                Call::Cancel("R2".into()),
            ]
        );
    }

    #[test]
    fn discards_go_to_the_agent_in_batches_and_with_the_next_query_or_load_reading() {
        let s = site(60_000);
        let b = AgentBackend(s.clone());
        // Made while down: kept.
        b.discard(&["R0".into()]);
        let agent = fake_agent(s.clone(), 1, |c| match c {
            Call::Query(ids) => Ok(Answer::States(vec![RemoteState::Running; ids.len()])),
            _ => Ok(Answer::Done),
        });
        let ids: Vec<String> = (1..DISCARD_BATCH).map(|i| format!("R{i}")).collect();
        b.discard(&ids); // the batch is full: sent, no answer waited for
        b.discard(&["R999".into()]);
        assert_eq!(b.query(&["Q".into()]).unwrap(), vec![RemoteState::Running]);
        // Nothing left to query: the load reading takes the last discards.
        b.discard(&["R1000".into()]);
        let _ = b.load();
        s.disconnected(1);
        drop(s.lock().conn.take());
        let seen = agent.join().unwrap();
        let first: Vec<String> = (0..DISCARD_BATCH).map(|i| format!("R{i}")).collect();
        assert_eq!(
            seen,
            vec![
                Call::Discard(first),
                Call::Discard(vec!["R999".into()]),
                Call::Query(vec!["Q".into()]),
                Call::Discard(vec!["R1000".into()]),
                Call::Load,
            ]
        );
    }
}
