//! Reserve claiming's calls on their way to the fake managers (issue 31; the server's
//! `driver/reserve.rs` and `sites::reserve`). The driver's [`ReserveCall`]s are carried out
//! as the server's site workers do, on a thread each (here, events on the clock):
//!
//! - at a direct site, a call reaches the manager after a network delay (one of a server
//!   that died since still lands, as a submission does); the manager may be down, refuse
//!   the reservation (its plan's `refuse`), or take it and lose the answer (its plan's
//!   `lost_answer`: the server hears a time-out five seconds later, the window stays);
//! - at an agent site, the call is waited for on the link of the moment (`AgentCalls`'
//!   waited calls, as `AgentBackend` makes them): it fails at once without one, or when
//!   the link ends before the answer, or past the calls' limit; the agent carries it out on
//!   its manager ([`super::agent`]);
//! - a deletion, and a restart's list of what a site holds, are tried again after
//!   [`super::retry_after`] while the manager or the agent cannot be reached, as
//!   `cancel_until_taken` does, until the server that asked dies (its thread dies with it:
//!   the next restart lists the site's reservations and deletes those no live run owns);
//! - the answers come back as [`Report::Reservation`] for the incarnation that asked.

use super::{retry_after, Ev, World};
use coalloc_backends::BackendError;
use coalloc_core::model::Time;
use coalloc_server::link::calls::backend_error;
use coalloc_server::link::proto::{Answer, Call};
use coalloc_server::msg::{Report, ReserveCall, ReserveReport};
use rand::Rng;

/// The link's call for a reservation call.
fn to_link(call: &ReserveCall) -> Call {
    match call {
        ReserveCall::Earliest {
            count,
            duration_ms,
            not_before_ms,
            ..
        } => Call::ReserveEarliest {
            count: *count,
            duration_ms: *duration_ms,
            not_before_ms: *not_before_ms,
        },
        ReserveCall::Make {
            name,
            count,
            start_ms,
            duration_ms,
            ..
        } => Call::Reserve {
            name: name.clone(),
            count: *count,
            start_ms: *start_ms,
            duration_ms: *duration_ms,
        },
        ReserveCall::Delete(name) => Call::Unreserve(name.clone()),
        ReserveCall::List => Call::Reservations,
    }
}

impl World {
    /// What `site`'s manager does with a reservation call of the link (also the agent's
    /// way), with its draw: a reservation refused.
    pub(super) fn rm_reserve(&mut self, site: usize, call: &Call) -> Result<Answer, BackendError> {
        let now = self.now;
        let result = match call {
            Call::ReserveEarliest {
                count,
                duration_ms,
                not_before_ms,
            } => self.rms[site]
                .reserve_earliest(now, *count, *duration_ms, *not_before_ms)
                .map(Answer::Earliest),
            Call::Reserve {
                name,
                count,
                start_ms,
                duration_ms,
            } => {
                let refuse = self.rng.random_range(0..1000) < self.rms[site].plan.refuse;
                self.rms[site]
                    .reserve(now, name, *count, *start_ms, *duration_ms, refuse)
                    .map(|()| Answer::Done)
            }
            Call::Unreserve(name) => self.rms[site].unreserve(now, name).map(|()| Answer::Done),
            Call::Reservations => self.rms[site].reservations(now).map(Answer::Reservations),
            other => Err(BackendError::Rejected(format!(
                "not a reservation call: {other:?}"
            ))),
        };
        self.log(|| format!("s{site}'s manager: {call:?} -> {result:?}"));
        self.rm_wake(site);
        result
    }

    /// A direct site's reservation call reaches its manager (try `attempt` of a deletion).
    pub(super) fn direct_reserve(
        &mut self,
        epoch: u64,
        site: usize,
        call: ReserveCall,
        attempt: u32,
    ) {
        let result = self.rm_reserve(site, &to_link(&call));
        let lost = self.rng.random_range(0..1000) < self.rms[site].plan.lost_answer;
        let (result, back) = match result {
            Ok(_) if lost => (Err(BackendError::Unavailable("timed out".into())), 5_000),
            other => (other, self.delay()),
        };
        self.reserve_answered(epoch, site, call, attempt, result, self.now + back);
    }

    /// An agent site's reservation call (try `attempt` of a deletion), waited for on its
    /// link of the moment.
    pub(super) fn agent_reserve(
        &mut self,
        epoch: u64,
        site: usize,
        call: ReserveCall,
        attempt: u32,
    ) {
        let inst = self.net.inst(self.now);
        let Some(end) = self.net.ends[site].as_mut() else {
            return;
        };
        let link = to_link(&call);
        let sent = match end.conn.and_then(|c| Some((c, end.sessions.get_mut(&c)?))) {
            Some((conn, session)) => end.calls.waited(inst, link, session).map(|id| (conn, id)),
            None => Err(BackendError::Unavailable(format!(
                "the agent of site s{site} is not connected"
            ))),
        };
        match sent {
            Ok((conn, id)) => {
                end.reserving.insert(id, (call, attempt));
                self.pump_server(site, conn);
            }
            Err(e) => self.reserve_answered(epoch, site, call, attempt, Err(e), self.now),
        }
    }

    /// What came of a reservation call, heard at `at`: its report for the driver, or a
    /// deletion tried again.
    pub(super) fn reserve_answered(
        &mut self,
        epoch: u64,
        site: usize,
        call: ReserveCall,
        attempt: u32,
        result: Result<Answer, BackendError>,
        at: Time,
    ) {
        self.log(|| format!("s{site}: {call:?} (try {attempt}) -> {result:?}"));
        let odd = |a: Answer| format!("the site answered with {a:?}");
        // A deletion and a list are tried again while the site cannot be reached.
        if matches!(call, ReserveCall::Delete(_) | ReserveCall::List) {
            if let (Err(BackendError::Unavailable(_)), Some(t)) = (&result, retry_after(attempt)) {
                self.at(at + t, Ev::ReserveAgain(epoch, site, call, attempt + 1));
                return;
            }
        }
        let report = match call {
            ReserveCall::Delete(_) => return,
            ReserveCall::Earliest { reservation, .. } => ReserveReport::Offer {
                reservation,
                earliest: match result {
                    Ok(Answer::Earliest(t)) => Ok(t),
                    Ok(a) => Err(odd(a)),
                    Err(e) => Err(e.to_string()),
                },
            },
            ReserveCall::Make { reservation, .. } => ReserveReport::Made {
                reservation,
                result: match result {
                    Ok(Answer::Done) => Ok(()),
                    Ok(a) => Err(odd(a)),
                    Err(e) => Err(e.to_string()),
                },
            },
            ReserveCall::List => ReserveReport::Found {
                site,
                names: match result {
                    Ok(Answer::Reservations(n)) => Ok(n),
                    Ok(a) => Err(odd(a)),
                    Err(e) => Err(e.to_string()),
                },
            },
        };
        self.at(at, Ev::Report(epoch, Report::Reservation(report)));
    }

    /// The answers an agent site's link heard to its reservation calls.
    pub(super) fn reserve_answers(&mut self, site: usize) {
        let answered = match self.net.ends[site].as_mut() {
            Some(end) => std::mem::take(&mut end.answered),
            None => return,
        };
        for (call, attempt, result) in answered {
            let result = result.map_err(backend_error);
            self.reserve_answered(self.epoch, site, call, attempt, result, self.now);
        }
    }

    /// A deletion's or a list's next try, by the thread of incarnation `epoch` (gone with
    /// it).
    pub(super) fn reserve_again(
        &mut self,
        epoch: u64,
        site: usize,
        call: ReserveCall,
        attempt: u32,
    ) {
        if epoch != self.epoch || self.server.is_none() {
            return;
        }
        if self.net.is_agent(site) {
            self.agent_reserve(epoch, site, call, attempt);
        } else {
            self.direct_reserve(epoch, site, call, attempt);
        }
    }

    /// A reservation call of the driver's turn (incarnation `epoch`) to `site`.
    pub(super) fn reserve_sent(&mut self, epoch: u64, site: usize, call: ReserveCall) {
        if self.net.is_agent(site) {
            self.agent_reserve(epoch, site, call, 1);
        } else {
            let t = self.now + self.delay();
            self.at(t, Ev::Call(epoch, site, super::link::Call::Reserve(call)));
        }
    }
}
