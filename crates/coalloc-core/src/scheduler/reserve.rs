//! Reserve claiming: co-allocation by advance reservation at a common start (issue 31).
//!
//! Seed 000 §2.7 says what KOALA would have done had its local managers allowed it: estimate
//! the job's start from the file transfers it needs and reserve processors at its execution
//! sites for then; seed 002 §2.2 names advance reservation, and forecasts of when a
//! resource will be free, as the ways to make a co-allocation request succeed. This module
//! is that protocol, sans-IO, as a two-phase commit over the sites:
//!
//! 1. **Place** (only on sites that may reserve, [`may_reserve`]); the placed processors are
//!    held in the core's idle counts from now on, so no site is over-allocated while the
//!    reservation is negotiated or waits for its start; input transfers start at once.
//! 2. **Ask** every component's site for its earliest start at or after a floor
//!    ([`Command::ReserveQuery`] / [`Event::ReserveOffer`]). The floor is the latest of the
//!    job's requested start, now, and the time its input files arrive by the transfer
//!    estimates (seed 000 §2.7, §2.6).
//! 3. **Agree**: the common start T is the latest offer (and the floor). Sites that offered
//!    earlier are asked again from T, up to [`ReserveParams::rounds`] rounds, until every
//!    site offers T.
//! 4. **Prepare**: reserve on every site at T ([`Command::Reserve`] / [`Event::Reserved`];
//!    each site's window begins its [`start_delay`] before T, so that a batch manager's
//!    scheduling pass has started the component by T, and the barrier holds it until T),
//!    under a name that can be found again (`coalloc-J<job>-c<i>-<generation>`). A site
//!    that takes reservations only so far ahead (its manager's `reserve_ahead`, the
//!    one-hour horizon of flux-sched #284) is asked once its window is within that lead of
//!    now, the others at once; the processors stay held in the core's counts meanwhile,
//!    but the site's other users may take them, and a refusal then rolls the run back,
//!    deleting what the other sites made (step 6).
//! 5. **Commit**: once every reservation is made, each component is started into its own
//!    ([`Start::reservation`]); the barrier (seed 002 §3.2) is held until T and still checks
//!    that every component really runs.
//! 6. **Roll back**: a refusal, a missing answer past [`ReserveParams::answer_timeout`], or
//!    any other end of the run (abort, cancel, failure, the job's end) deletes every
//!    reservation made or asked for ([`Command::Unreserve`]), the refused one too (an
//!    error may be a lost answer of a manager that made it); an answer that comes after
//!    its run was rolled back, `ok` or not, is deleted when it comes. The job goes back
//!    to its queue with the usual back-off and limits.
//!
//! The state lives in the core's snapshot (form 6); after a restart the driver reports what
//! each site holds under coalloc's names ([`Event::ReservationsFound`]) and the core deletes
//! what no live run owns.

use super::api::*;
use super::jobs::{CompPhase, Phase};
use super::{Core, Timer};
use crate::model::{Job, Millis, ReserveRequest, Site, Time};
use crate::placement::{Fit, Placement};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod restart;

/// Reserve claiming's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReserveParams {
    /// Query rounds to agree on a common start before reserving at the latest offer anyway.
    pub rounds: u32,
    /// A run whose sites have not all answered its queries and reservations this long
    /// after its placement is rolled back (`None`: wait). Five minutes by default, like the
    /// server's barrier timeout; the simulator answers at once.
    pub answer_timeout: Option<Millis>,
}

impl Default for ReserveParams {
    fn default() -> Self {
        ReserveParams {
            rounds: 4,
            answer_timeout: Some(5 * crate::model::MINUTE),
        }
    }
}

/// Whether a site may take reservations: its manager's `reserve` setting, else local and
/// simulated sites (no manager type, `local`, `sim`) may and others (Slurm, Grid Engine,
/// agents: the rights are the site's to grant) may not.
pub fn may_reserve(site: &Site) -> bool {
    match site.manager.get("reserve").map(String::as_str) {
        Some(v) => matches!(v.to_ascii_lowercase().as_str(), "true" | "yes" | "1"),
        None => matches!(
            site.manager.get("type").map(String::as_str),
            None | Some("local" | "sim" | "simulated")
        ),
    }
}

/// How far ahead of a reservation's start `site` takes it (its manager's `reserve_ahead`,
/// a duration such as "1h"; checked when the sites are read): `None`, no limit.
pub fn reserve_ahead(site: &Site) -> Option<Millis> {
    let v = site.manager.get("reserve_ahead")?;
    crate::spec::units::parse_duration(&crate::spec::units::Scalar::Str(v.clone())).ok()
}

/// How long after a reservation begins `site`'s manager may take to start a component in
/// it (its manager's `start_delay`, a duration). A batch manager starts a job in a
/// reservation only on its next scheduling pass (Slurm's background loop runs once a
/// second, its backfill every `bf_interval`; Grid Engine's scheduler every
/// `schedule_interval`), so a reservation that begins exactly at the common start T
/// would start its component up to a pass or two late. Each site's reservation therefore
/// begins this much before T (and lasts this much longer), and the barrier holds every
/// component until T (seed 002 §3.2): the components run from T together, whichever
/// manager was slowest. Default: none on local and simulated sites (they start a
/// component at once), 3 s on every other (measured: a Slurm job in a reservation started
/// 0.1–2.1 s after it began on the rigs, bench/RESULTS.md).
pub fn start_delay(site: &Site) -> Millis {
    if let Some(v) = site.manager.get("start_delay") {
        let v = crate::spec::units::Scalar::Str(v.clone());
        return crate::spec::units::parse_duration(&v).unwrap_or(0);
    }
    match site.manager.get("type").map(String::as_str) {
        None | Some("local" | "sim" | "simulated") => 0,
        Some(_) => 3 * crate::model::SECOND,
    }
}

/// The name a reservation is made under at its site.
pub fn reservation_name(job: JobId, component: usize, generation: u64) -> String {
    format!("coalloc-J{job}-c{component}-{generation}")
}

/// Where one reservation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResvState {
    /// Queried, no offer yet.
    Asking { not_before: Time },
    /// The site offered this start.
    Offered(Time),
    /// Asked to reserve; no answer yet.
    Requested,
    /// Made at the site (and, after its run's commit, left by its component when a later
    /// launch replaced the one started into it: `Core::relaunched`).
    Made,
    /// Its component's current launch was started into it.
    Started,
    /// The site could not offer or refused to reserve: nothing was made.
    Refused,
    /// Its run was rolled back while the reservation was asked for: deleted already, and
    /// deleted again if a late `ok` comes.
    Abandoned,
}

/// One reservation of one component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resv {
    pub job: JobId,
    pub generation: u64,
    pub component: usize,
    pub site: SiteId,
    pub count: u32,
    pub duration: Millis,
    pub name: String,
    pub state: ResvState,
    /// Its processors are counted in the core's idle counts (until its launch takes them
    /// over, or it is dropped).
    pub held: bool,
}

/// A reserving run's common start and how many query rounds it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Round {
    /// No earlier than this (requested start, files, the last round's latest offer).
    pub floor: Time,
    pub rounds: u32,
    /// The agreed start, once reservations were asked for.
    pub start: Option<Time>,
}

/// Everything reserve claiming keeps (in the core's snapshot).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservations {
    next: u64,
    /// Jobs' own requests, copied from their spec at submission.
    pub requests: BTreeMap<JobId, ReserveRequest>,
    /// Every reservation not known gone.
    pub table: BTreeMap<ReservationId, Resv>,
    /// Runs being reserved or started into reservations.
    pub runs: BTreeMap<JobId, Round>,
}

/// The reservations as a snapshot keeps them: empty when the head being read is of a form
/// before them (5 or older; it then reads nothing).
pub(super) fn read<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Reservations, D::Error> {
    if super::snapshot::reading_reserveless() {
        return Ok(Reservations::default());
    }
    Reservations::deserialize(d)
}

impl Core {
    fn reserve_params(&self) -> ReserveParams {
        match self.config.claiming {
            super::config::Claiming::Reserve(p) => p,
            _ => ReserveParams::default(),
        }
    }

    /// Whether job `id` is placed by reservation: its own request or the scheduler's mode.
    pub(super) fn reserves(&self, id: JobId) -> bool {
        matches!(self.config.claiming, super::config::Claiming::Reserve(_))
            || self.reserve.requests.contains_key(&id)
    }

    /// At submission: keep the job's own request, and refuse a reserving job no site that
    /// may reserve could ever hold, with the reason.
    pub(super) fn check_reservable(&self, job: &Job, own: bool) -> Result<(), Rejected> {
        let reserving = own || matches!(self.config.claiming, super::config::Claiming::Reserve(_));
        if !reserving {
            return Ok(());
        }
        if !self.sites.sites.iter().any(may_reserve) {
            return Err(Rejected::Invalid(
                "the job asks for advance reservation and no site may reserve (a site's \
                 manager setting `reserve = true` allows it)"
                    .to_owned(),
            ));
        }
        let mut idle: Vec<u32> = self.sites.sites.iter().map(|s| s.processors).collect();
        self.no_room_unless_reserving(&mut idle);
        let usable = vec![true; idle.len()];
        self.place_sites(job, &idle, &usable, None)
            .map(|_| ())
            .map_err(|e| {
                Rejected::Invalid(format!(
                    "the job asks for advance reservation and cannot run on the sites that may \
                     reserve: {e}"
                ))
            })
    }

    /// Placed under reserve claiming: hold the processors, start the transfers, and ask
    /// every site for its earliest start (steps 1–2 of the module documentation).
    #[cold]
    #[inline(never)]
    pub(super) fn begin_reserving(&mut self, id: JobId, placement: Placement) {
        let now = self.now;
        self.apply_pieces(id, &super::transaction::sites_of(&placement));
        let files = now + placement.transfer_time().unwrap_or(0);
        let requested = self.reserve.requests.get(&id).and_then(|r| r.start);
        let floor = files.max(requested.unwrap_or(now)).max(now);
        let duration = self.estimate_of(id);
        self.enter_claiming(id, &placement, floor);
        let generation = self.jobs[&id].generation();
        self.reserve.runs.insert(
            id,
            Round {
                floor,
                rounds: 1,
                start: None,
            },
        );
        let mut asked = Vec::new();
        for (i, p) in placement.components.iter().enumerate() {
            if let Some(f) = p.file.as_ref().filter(|f| f.site != p.site) {
                self.transfer(id, i, f.site, p.site, f.bytes);
            }
            self.sites.claim(p.site, p.count);
            let rid = ReservationId(self.reserve.next);
            self.reserve.next += 1;
            self.reserve.table.insert(
                rid,
                Resv {
                    job: id,
                    generation,
                    component: i,
                    site: p.site,
                    count: p.count,
                    duration,
                    name: reservation_name(id, i, generation),
                    state: ResvState::Asking { not_before: floor },
                    held: true,
                },
            );
            asked.push(rid);
        }
        for rid in asked {
            self.ask(rid);
        }
        let sites = placement.components.iter().map(|p| p.site).collect();
        self.notify(Notice::Placed { job: id, sites });
        self.arm_answer(id);
    }

    /// The processors' holding time a reservation asks for: the job's wall time or
    /// estimate ([`crate::queue::PassCtx::estimate`]).
    fn estimate_of(&self, id: JobId) -> Millis {
        crate::queue::PassCtx::estimate(self, id)
    }

    /// Ask reservation `rid`'s site for its earliest start. The count asked for is every
    /// processor the run places on that site, not the component's alone: the components
    /// start together, so a site that offers T for each of two components separately may
    /// not hold both at T, and would refuse the second reservation at every try.
    fn ask(&mut self, rid: ReservationId) {
        let r = &self.reserve.table[&rid];
        let ResvState::Asking { not_before } = r.state else {
            return;
        };
        let count = self
            .reserve
            .table
            .values()
            .filter(|o| o.job == r.job && o.generation == r.generation && o.site == r.site)
            .filter(|o| o.state != ResvState::Abandoned)
            .map(|o| o.count)
            .sum();
        // The site is asked for its own start, [`start_delay`] ahead of the common one.
        let delay = start_delay(&self.sites.sites[r.site]);
        self.commands.push_back(Command::ReserveQuery {
            reservation: rid,
            job: r.job,
            component: r.component,
            site: r.site,
            count,
            duration: r.duration + delay,
            not_before: (not_before - delay).max(self.now),
        });
    }

    /// A missing answer fails the run after the answer timeout.
    fn arm_answer(&mut self, id: JobId) {
        if let Some(t) = self.reserve_params().answer_timeout {
            let generation = self.jobs[&id].generation();
            self.timers.insert((
                self.now + t,
                Timer::ReserveAnswer {
                    job: id,
                    generation,
                },
            ));
        }
    }

    /// The answer timer of a run fired: if it still waits for a site, roll it back.
    pub(super) fn answer_overdue(&mut self, id: JobId, generation: u64) {
        let live = self
            .jobs
            .get(&id)
            .is_some_and(|j| j.generation() == generation && j.phase == Phase::Claiming);
        let waiting = self
            .run_resvs(id)
            .find(|(_, r)| matches!(r.state, ResvState::Asking { .. } | ResvState::Requested));
        if let (true, Some((_, r))) = (live, waiting) {
            let why = format!(
                "site `{}` did not answer the reservation in time",
                self.sites.sites[r.site].name
            );
            self.abort(id, why, false);
        }
    }

    /// The reservations of job `id`'s current run.
    fn run_resvs(&self, id: JobId) -> impl Iterator<Item = (ReservationId, &Resv)> + '_ {
        let generation = self.jobs.get(&id).map(|j| j.generation());
        self.reserve
            .table
            .iter()
            .filter(move |(_, r)| r.job == id && Some(r.generation) == generation)
            .filter(|(_, r)| r.state != ResvState::Abandoned)
            .map(|(&k, r)| (k, r))
    }

    /// The live reservation `rid` and its job, if its run is still reserving.
    fn reserving(&self, rid: ReservationId) -> Option<JobId> {
        let r = self.reserve.table.get(&rid)?;
        let j = self.jobs.get(&r.job)?;
        (r.state != ResvState::Abandoned
            && j.generation() == r.generation
            && j.phase == Phase::Claiming)
            .then_some(r.job)
    }

    /// An answer about a reservation no longer kept: a late one (taken, nothing to do: a
    /// forgotten one made nothing, or was deleted), or one never asked for (refused).
    fn forgotten(&self, rid: ReservationId) -> Result<(), Rejected> {
        if rid.0 < self.reserve.next {
            Ok(())
        } else {
            Err(Rejected::Invalid(format!("no reservation {rid}")))
        }
    }

    /// [`Event::ReserveOffer`] (steps 2–4).
    pub(super) fn reserve_offer(
        &mut self,
        rid: ReservationId,
        earliest: Result<Time, String>,
    ) -> Result<(), Rejected> {
        let Some(r) = self.reserve.table.get(&rid) else {
            return self.forgotten(rid);
        };
        let ResvState::Asking { not_before } = r.state else {
            return Ok(()); // a late or repeated answer
        };
        let Some(id) = self.reserving(rid) else {
            return Ok(());
        };
        let site = self.sites.sites[r.site].name.clone();
        match earliest {
            Err(why) => {
                self.reserve.table.get_mut(&rid).expect("looked up").state = ResvState::Refused;
                self.abort(id, format!("site `{site}` cannot reserve: {why}"), false);
            }
            Ok(t) => {
                let delay = start_delay(&self.sites.sites[r.site]);
                let r = self.reserve.table.get_mut(&rid).expect("looked up");
                r.state = ResvState::Offered((t + delay).max(not_before));
                self.agree(id);
            }
        }
        Ok(())
    }

    /// Every site offered: agree on the common start, or ask again from the latest offer
    /// (step 3); then reserve at it (step 4).
    fn agree(&mut self, id: JobId) {
        let mut offers = Vec::new();
        for (rid, r) in self.run_resvs(id) {
            match r.state {
                ResvState::Offered(t) => offers.push((rid, t)),
                _ => return,
            }
        }
        let params = self.reserve_params();
        let round = self.reserve.runs[&id];
        let start = offers.iter().map(|&(_, t)| t).fold(round.floor, Time::max);
        let behind: Vec<ReservationId> = offers
            .iter()
            .filter(|&&(_, t)| t < start)
            .map(|&(rid, _)| rid)
            .collect();
        let run = self.reserve.runs.get_mut(&id).expect("a reserving run");
        if !behind.is_empty() && round.rounds < params.rounds {
            run.rounds += 1;
            run.floor = start;
            for rid in behind {
                let r = self.reserve.table.get_mut(&rid).expect("listed");
                r.state = ResvState::Asking { not_before: start };
                self.ask(rid);
            }
            return;
        }
        run.start = Some(start);
        let j = self.jobs.get_mut(&id).expect("reserving");
        j.set_hold_until(Some(start));
        j.record.run_mut().last_jst = Some(start);
        self.request_due(id, start);
    }

    /// A site of run `id` takes its reservation: now (a timer, [`Self::request_due`]).
    pub(super) fn reserve_due(&mut self, id: JobId, generation: u64) {
        let live = self
            .jobs
            .get(&id)
            .is_some_and(|j| j.generation() == generation && j.phase == Phase::Claiming);
        if let (true, Some(start)) = (live, self.reserve.runs.get(&id).and_then(|r| r.start)) {
            self.request_due(id, start);
            self.arm_answer(id);
        }
    }

    /// Ask every site of run `id` whose turn has come to reserve at `start` (step 4): a
    /// site without a lead at once, one with a lead once its own window's start (the
    /// common start less its [`start_delay`]) is within that lead of now. The earliest
    /// site still to come arms [`Timer::ReserveDue`]. Each site reserves as early as it
    /// allows, so that the others' users cannot take its processors meanwhile.
    fn request_due(&mut self, id: JobId, start: Time) {
        // Each offered reservation: its site's start delay, and when the site takes it.
        let offered: Vec<(ReservationId, Millis, Time)> = self
            .run_resvs(id)
            .filter(|(_, r)| matches!(r.state, ResvState::Offered(_)))
            .map(|(rid, r)| {
                let site = &self.sites.sites[r.site];
                let delay = start_delay(site);
                let due = reserve_ahead(site).map_or(Time::MIN, |lead| start - delay - lead);
                (rid, delay, due)
            })
            .collect();
        let mut next: Option<Time> = None;
        for (rid, delay, due) in offered {
            if due > self.now {
                next = Some(next.map_or(due, |n| n.min(due)));
                continue;
            }
            let r = self.reserve.table.get_mut(&rid).expect("listed");
            r.state = ResvState::Requested;
            let r = r.clone();
            self.commands.push_back(Command::Reserve {
                reservation: rid,
                job: id,
                component: r.component,
                site: r.site,
                count: r.count,
                start: start - delay,
                duration: r.duration + delay,
                name: r.name,
            });
        }
        if let Some(due) = next {
            let generation = self.jobs[&id].generation();
            let timer = Timer::ReserveDue {
                job: id,
                generation,
            };
            self.timers.insert((due, timer));
        }
    }

    /// [`Event::Reserved`] (steps 4–6).
    pub(super) fn reserved(
        &mut self,
        rid: ReservationId,
        result: Result<(), String>,
    ) -> Result<(), Rejected> {
        let Some(r) = self.reserve.table.get(&rid) else {
            return self.forgotten(rid);
        };
        if r.state == ResvState::Abandoned {
            // Rolled back before its answer came: delete what the late answer made, an
            // error too (a refusal may hide a reservation made, below).
            let r = self.reserve.table.remove(&rid).expect("looked up");
            self.commands.push_back(Command::Unreserve {
                site: r.site,
                name: r.name,
            });
            return Ok(());
        }
        if r.state != ResvState::Requested {
            return Ok(());
        }
        let Some(id) = self.reserving(rid) else {
            return Ok(());
        };
        let site = self.sites.sites[r.site].name.clone();
        match result {
            Err(why) => {
                let r = self.reserve.table.get_mut(&rid).expect("looked up");
                r.state = ResvState::Refused;
                let (at, name) = (r.site, r.name.clone());
                self.abort(
                    id,
                    format!("site `{site}` refused the reservation: {why}"),
                    false,
                );
                // An error is not always a refusal: a manager that took the reservation and
                // whose answer was lost (a time-out, a link that closed) holds it all the
                // same. Deleting one that does not exist is no error (simulation harness,
                // seed 51: a time-out left a reservation behind).
                self.commands
                    .push_back(Command::Unreserve { site: at, name });
            }
            Ok(()) => {
                self.reserve.table.get_mut(&rid).expect("looked up").state = ResvState::Made;
                if self.run_resvs(id).all(|(_, r)| r.state == ResvState::Made) {
                    self.commit_reserved(id);
                }
            }
        }
        Ok(())
    }

    /// Every reservation is made: start each component into its own (step 5).
    fn commit_reserved(&mut self, id: JobId) {
        let comps = &self.jobs[&id].comps;
        if comps.iter().any(|c| c.site.is_none()) {
            // A failed transfer with no other replica sent a component to be placed again
            // (`transfers.rs`): its reservation is where its file will not be.
            let why = "an input file did not arrive and no other replica can send it";
            return self.abort(id, why.to_owned(), false);
        }
        let reserved = self.run_resvs(id).count();
        if comps.len() != reserved || comps.iter().any(|c| c.phase != CompPhase::Idle) {
            // Edited while its reservations were made (a component added, deleted or
            // substituted): reserve again for the job as it is now.
            let why = "its components were edited while they were reserved";
            return self.abort(id, why.to_owned(), false);
        }
        // Kept, so that the start commands can be made again ([`Core::reservation_of`]).
        let run = self.reserve.runs.get_mut(&id).expect("a reserving run");
        let start = *run.start.get_or_insert(self.now);
        let resvs: Vec<(ReservationId, Resv)> =
            self.run_resvs(id).map(|(k, r)| (k, r.clone())).collect();
        for (rid, r) in resvs {
            // The launch takes over the processors the reservation held.
            self.sites.release(r.site, r.count, true);
            self.launch(id, r.component, r.site, r.count);
            let Some(Command::StartComponent(st)) = self.commands.back_mut() else {
                unreachable!("a launch ends with its start command");
            };
            st.reservation = Some(Reservation {
                id: rid,
                name: r.name.clone(),
                start,
                duration: r.duration,
            });
            let launch = st.launch;
            // Not expected to run before its start: its pending timeout counts from then.
            if let Some(t) = self.config.pending_timeout {
                let timer = Timer::Pending {
                    job: id,
                    component: r.component,
                    launch,
                };
                if self.timers.remove(&(self.now + t, timer)) {
                    self.timers.insert((start.max(self.now) + t, timer));
                }
            }
            let r = self.reserve.table.get_mut(&rid).expect("listed");
            r.state = ResvState::Started;
            r.held = false;
        }
        let j = self.jobs.get_mut(&id).expect("reserving");
        j.phase = Phase::Starting;
        j.set_hold_until(Some(start));
        self.active_changed(id);
        self.arm_hold(id);
        self.check_commit(id);
    }

    /// Component `i` of job `id` is launched: a reservation of its run it was started into
    /// no longer holds its current launch (an edit's substitute, or a failed component
    /// placed again elsewhere, launches it anew without one), and is `Made` again. Only the
    /// current launch of a `Started` reservation's component is in it, which
    /// [`Core::reservation_of`] relies on.
    pub(super) fn relaunched(&mut self, id: JobId, i: usize) {
        // Most runs reserve nothing: every launch passes by here.
        if self.reserve.runs.contains_key(&id) {
            self.unstart(id, i);
        }
    }

    /// [`Core::relaunched`] for a reserving run.
    #[cold]
    #[inline(never)]
    fn unstart(&mut self, id: JobId, i: usize) {
        let generation = self.jobs[&id].generation();
        for r in self.reserve.table.values_mut() {
            if (r.job, r.generation, r.component) == (id, generation, i)
                && r.state == ResvState::Started
            {
                r.state = ResvState::Made;
            }
        }
    }

    /// The reservation the current launch of component `i` of job `id` was started into, as
    /// its start command named it ([`Core::commit_reserved`]): made again from the
    /// reservation table and the run's common start, both kept in the snapshot. `None` for a
    /// component not started into one (a job that does not reserve, a component added or
    /// substituted after its run's commit).
    pub(super) fn reservation_of(&self, id: JobId, i: usize) -> Option<Reservation> {
        let start = self.reserve.runs.get(&id)?.start?;
        let (rid, r) = self
            .run_resvs(id)
            .find(|(_, r)| r.component == i && r.state == ResvState::Started)?;
        Some(Reservation {
            id: rid,
            name: r.name.clone(),
            start,
            duration: r.duration,
        })
    }

    /// Job `id`'s run ends (back to the queue, or the job ended): give back the processors
    /// its reservations held and delete every reservation asked for (step 6).
    pub(super) fn drop_reservations(&mut self, id: JobId) {
        if self.reserve.runs.remove(&id).is_none() {
            return;
        }
        let mine: Vec<ReservationId> = self
            .reserve
            .table
            .iter()
            .filter(|(_, r)| r.job == id && r.state != ResvState::Abandoned)
            .map(|(&k, _)| k)
            .collect();
        for rid in mine {
            let r = self.reserve.table.get_mut(&rid).expect("listed");
            if std::mem::take(&mut r.held) {
                let (site, count) = (r.site, r.count);
                self.sites.release(site, count, true);
                self.dirty = true;
            }
            let r = self.reserve.table.get_mut(&rid).expect("listed");
            match r.state {
                ResvState::Asking { .. } | ResvState::Offered(_) | ResvState::Refused => {
                    self.reserve.table.remove(&rid);
                }
                ResvState::Requested => {
                    r.state = ResvState::Abandoned;
                    let (site, name) = (r.site, r.name.clone());
                    self.commands.push_back(Command::Unreserve { site, name });
                }
                ResvState::Made | ResvState::Started | ResvState::Abandoned => {
                    let r = self.reserve.table.remove(&rid).expect("listed");
                    self.commands.push_back(Command::Unreserve {
                        site: r.site,
                        name: r.name,
                    });
                }
            }
        }
    }

    /// Job `id` ended: its run's reservations are dropped and its request forgotten.
    pub(super) fn end_reservations(&mut self, id: JobId) {
        // Most runs reserve nothing: their every job's end passes by here.
        if !self.reserve.runs.is_empty() || !self.reserve.requests.is_empty() {
            self.end_reserving(id);
        }
    }

    /// [`Core::end_reservations`] while anything is reserved or asked for.
    #[cold]
    #[inline(never)]
    fn end_reserving(&mut self, id: JobId) {
        self.drop_reservations(id);
        self.reserve.requests.remove(&id);
    }

    /// Under reserve claiming, placement looks for files as well (the floor of the common
    /// start): the whole placement, with no room on the sites that may not reserve (they
    /// still serve files). Room is what coalloc does not hold: processors other users'
    /// jobs hold now count as free, since the sites answer when they will be (seed 002
    /// §2.2's forecasts); what coalloc holds or has reserved does not.
    #[cold]
    #[inline(never)]
    pub(super) fn place_reserving(
        &self,
        job: &Job,
        allowed: Option<&[bool]>,
        fit: Option<Fit>,
    ) -> Result<Placement, crate::placement::NoFit> {
        let (mut idle, usable) = self.view_now(allowed, true);
        self.no_room_unless_reserving(&mut idle);
        let p = self.place_against(job, &idle, &usable, fit)?;
        // Not while every replica of its input file is on an unusable site: placed without a
        // file site, no transfer would bring it, and the barrier would be released without
        // it (`--files` seed 3564, as 108 was before `Core::place` checked it).
        self.unless_replicas_out(job, p, &usable)
    }

    fn no_room_unless_reserving(&self, idle: &mut [u32]) {
        for (n, site) in idle.iter_mut().zip(&self.sites.sites) {
            if !may_reserve(site) {
                *n = 0;
            }
        }
    }
}

impl super::Scheduler {
    /// Reserve claiming's state: every reservation not known gone, the runs' common
    /// starts, and the jobs' own requests.
    pub fn reservations(&self) -> &Reservations {
        &self.core.reserve
    }
}
