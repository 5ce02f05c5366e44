//! Reserve claiming's site calls (issue 31; the core's `scheduler::reserve`): the core's
//! `ReserveQuery`, `Reserve` and `Unreserve` become calls to the site's worker
//! ([`ReserveCall`]), made on threads of the worker's like every other site call, and the
//! answers come back as journaled entries (`ReserveOffer`, `Reserved`). A `Reserve` is sent
//! only once the turn that decided it is durable (`run_commands`), under the name the core
//! gave it, so that a restart finds it again: after a replay every site is asked what it
//! holds under coalloc's names (`ReservationsFound`), and the core keeps the live runs'
//! and deletes the others; queries whose answers were lost are asked again. Each step is an
//! event on the stream and a count of `coalloc_reservations_total`.

use super::Driver;
use crate::entry::Entry;
use crate::msg::{ReserveCall, ReserveReport, SiteCall};
use coalloc_core::scheduler::reserve::ResvState;
use coalloc_core::scheduler::{Command, Start};
use serde_json::json;

impl Driver {
    /// Carry out one of reserve claiming's commands (booked only, during a replay: the
    /// restart asks the sites instead, [`Driver::resume_reservations`]).
    pub(crate) fn reserve_command(&mut self, cmd: Command) {
        if self.replaying {
            return;
        }
        let call = match cmd {
            Command::ReserveQuery {
                reservation,
                site,
                count,
                duration,
                not_before,
                ..
            } => (
                site,
                ReserveCall::Earliest {
                    reservation: reservation.0,
                    count,
                    duration_ms: duration,
                    not_before_ms: not_before,
                },
            ),
            Command::Reserve {
                reservation,
                job,
                component,
                site,
                count,
                start,
                duration,
                name,
            } => {
                self.emit(
                    json!({"event": "reserving", "job": job, "component": component,
                    "site": self.config.sites[site].name, "reservation": name,
                    "start": start, "duration": duration}),
                );
                (
                    site,
                    ReserveCall::Make {
                        reservation: reservation.0,
                        name,
                        count,
                        start_ms: start,
                        duration_ms: duration,
                    },
                )
            }
            Command::Unreserve { site, name } => {
                let outcome = if self.honoured.remove(&name) {
                    "released"
                } else {
                    self.count_reservation("rolled_back");
                    "rolled_back"
                };
                self.emit(
                    json!({"event": "unreserved", "site": self.config.sites[site].name,
                    "reservation": name, "outcome": outcome}),
                );
                (site, ReserveCall::Delete(name))
            }
            _ => return,
        };
        self.workers[call.0].send(SiteCall::Reserve(call.1));
    }

    /// A component is started into its reservation (an event; it is honoured once the
    /// barrier releases its job, [`Driver::reservations_honoured`]).
    pub(crate) fn started_into(&mut self, s: &Start) {
        let Some(r) = &s.reservation else {
            return;
        };
        if self.replaying {
            return;
        }
        self.emit(json!({"event": "started_into_reservation", "job": s.job,
            "component": s.component, "launch": s.launch.0,
            "site": self.config.sites[s.site].name, "reservation": r.name,
            "start": r.start}));
    }

    /// A site's answer to a reservation call: an entry for the core.
    pub(crate) fn reservation_report(&mut self, r: ReserveReport) {
        let entry = match r {
            ReserveReport::Offer {
                reservation,
                earliest,
            } => Entry::ReserveOffer {
                reservation,
                earliest,
            },
            ReserveReport::Made {
                reservation,
                result,
            } => {
                if result.is_ok() {
                    self.count_reservation("made");
                }
                let (name, job, site) = self.reservation_names(reservation);
                self.emit(
                    json!({"event": if result.is_ok() { "reserved" } else { "reservation_refused" },
                    "job": job, "site": site, "reservation": name,
                    "reason": result.as_ref().err()}),
                );
                Entry::Reserved {
                    reservation,
                    result,
                }
            }
            ReserveReport::Found { site, names } => match names {
                Ok(names) => Entry::ReservationsFound {
                    site,
                    names,
                    pending: self.listing.remove(&site),
                },
                Err(e) => {
                    tracing::warn!(site, "listing the site's reservations failed: {e}");
                    return;
                }
            },
        };
        if let Err(e) = self.apply(entry) {
            tracing::warn!("the core refused a reservation report: {e}");
        }
    }

    /// Job `job`'s barrier was released: each reservation its run started a component into
    /// was honoured (the site ran the component by the promised start). A later deletion of
    /// it is a release, not a roll back.
    pub(crate) fn reservations_honoured(&mut self, job: u64) {
        let names: Vec<String> = (self.core.reservations().table.values())
            .filter(|r| r.job == job && r.state == ResvState::Started)
            .map(|r| r.name.clone())
            .collect();
        for name in names {
            if self.honoured.insert(name) {
                self.count_reservation("honoured");
            }
        }
    }

    /// Reservation `rid`'s name, job and site name, as the core keeps it.
    fn reservation_names(&self, rid: u64) -> (Option<String>, Option<u64>, Option<String>) {
        let table = &self.core.reservations().table;
        match table.get(&coalloc_core::scheduler::ReservationId(rid)) {
            Some(r) => (
                Some(r.name.clone()),
                Some(r.job),
                self.config.sites.get(r.site).map(|s| s.name.clone()),
            ),
            None => (None, None, None),
        }
    }

    /// Component `component` of job `job`'s run `generation`: its reservation's name, where
    /// it stands, and the run's common start once agreed (for the job's view).
    pub(crate) fn reservation_of(
        &self,
        job: u64,
        generation: u64,
        component: usize,
    ) -> Option<(String, &'static str, Option<i64>)> {
        let all = self.core.reservations();
        let r = all.table.values().find(|r| {
            r.job == job
                && r.generation == generation
                && r.component == component
                && r.state != ResvState::Abandoned
        })?;
        let state = match r.state {
            ResvState::Asking { .. } => "asking",
            ResvState::Offered(_) => "offered",
            ResvState::Requested => "requested",
            ResvState::Made => "made",
            ResvState::Started => "started",
            ResvState::Refused => "refused",
            ResvState::Abandoned => "abandoned",
        };
        let start = all.runs.get(&job).and_then(|run| run.start);
        Some((r.name.clone(), state, start))
    }

    fn count_reservation(&self, outcome: &str) {
        if self.replaying {
            return;
        }
        self.metrics
            .reservations
            .get_or_create(&crate::metrics::label("outcome", outcome))
            .inc();
    }

    /// After a replay: ask every site what it holds under coalloc's names, and ask again
    /// for the earliest starts whose answers were lost with the process (a reservation asked
    /// for and not answered is settled by what the site holds).
    pub(crate) fn resume_reservations(&mut self) {
        for site in 0..self.config.sites.len() {
            // What the list will judge: the reservations asked for before it (by the
            // process before the restart), not those asked for while it is under way.
            let pending = (self.core.reservations().table.values())
                .filter(|r| r.site == site)
                .filter(|r| matches!(r.state, ResvState::Requested | ResvState::Abandoned))
                .map(|r| r.name.clone())
                .collect();
            self.listing.insert(site, pending);
            self.workers[site].send(SiteCall::Reserve(ReserveCall::List));
        }
        let asking: Vec<_> = self
            .core
            .reservations()
            .table
            .iter()
            .filter_map(|(rid, r)| match r.state {
                ResvState::Asking { not_before } => Some((
                    r.site,
                    ReserveCall::Earliest {
                        reservation: rid.0,
                        count: r.count,
                        duration_ms: r.duration,
                        not_before_ms: not_before,
                    },
                )),
                _ => None,
            })
            .collect();
        for (site, call) in asking {
            self.workers[site].send(SiteCall::Reserve(call));
        }
    }
}
