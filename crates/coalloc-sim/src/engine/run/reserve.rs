//! Reservations on the simulated sites (issue 31): the core's reserve claiming
//! (`coalloc_core::scheduler::reserve`) against each site's [`Calendar`]. A query is answered
//! from the calendar and the known ends of what runs now (local jobs' runtimes, coalloc's
//! running components' ends; a component waiting at its barrier holds its processors for
//! ever as far as the site knows); a reservation is made if it still fits; a component
//! started into its reservation waits for the reservation's start, then takes its
//! processors, which local jobs have left free. A site with a `reserve_ahead` refuses a
//! reservation that starts further ahead than that.
//!
//! [`Calendar`]: super::super::calendar::Calendar

use super::super::calendar::Window;
use super::{Ev, LState, Sim};
use coalloc_core::model::{Millis, Time};
use coalloc_core::scheduler::{Event, LaunchId, ReservationId, SiteId, Start};

impl Sim<'_> {
    /// What holds processors at `site` now and until when, for the calendar.
    fn busy_at(&self, site: SiteId) -> Vec<(u32, Time)> {
        let mut busy: Vec<(u32, Time)> = self.sites[site].local_running_until().collect();
        busy.extend(
            self.launches
                .values()
                .filter(|l| l.site == site && !l.window && l.state != LState::Queued)
                .map(|l| (l.count, l.until.unwrap_or(Time::MAX))),
        );
        busy
    }

    /// [`coalloc_core::scheduler::Command::ReserveQuery`].
    pub(super) fn reserve_query(
        &mut self,
        reservation: ReservationId,
        site: SiteId,
        count: u32,
        duration: Millis,
        not_before: Time,
    ) {
        let busy = self.busy_at(site);
        let s = &self.sites[site];
        let earliest = if !s.up {
            Err(format!("site {} does not answer", self.site_names[site]))
        } else {
            s.calendar
                .earliest(&busy, s.total, count, duration, not_before.max(self.now))
                .ok_or_else(|| format!("{count} processors never fit for that long"))
        };
        self.follow.push(Event::ReserveOffer {
            reservation,
            earliest,
        });
    }

    /// [`coalloc_core::scheduler::Command::Reserve`].
    pub(super) fn reserve(
        &mut self,
        reservation: ReservationId,
        site: SiteId,
        count: u32,
        (start, duration): (Time, Millis),
        name: String,
    ) {
        let busy = self.busy_at(site);
        let ahead = self.reserve_ahead[site].filter(|&a| start - self.now > a);
        let s = self.sites.at(site, self.now);
        let result = if !s.up {
            Err(format!("site {} does not answer", self.site_names[site]))
        } else if let Some(a) = ahead {
            Err(format!(
                "reservations are taken at most {} s ahead",
                a / 1000
            ))
        } else if s.calendar.fits(&busy, s.total, count, start, duration) {
            s.calendar.add(Window {
                name,
                start,
                end: start + duration.max(1),
                count,
                claimed: false,
            });
            Ok(())
        } else {
            Err("the processors are taken at that time".to_owned())
        };
        self.follow.push(Event::Reserved {
            reservation,
            result,
        });
    }

    /// [`coalloc_core::scheduler::Command::Unreserve`]: its processors are free for local
    /// jobs again.
    pub(super) fn unreserve(&mut self, site: SiteId, name: &str) {
        self.sites.at(site, self.now).calendar.remove(name);
        self.dirty.insert(site);
    }

    /// A start into a reservation that begins later waits for it (true: deferred).
    pub(super) fn defer(&mut self, st: &Start) -> bool {
        match &st.reservation {
            Some(r) if r.start > self.now => {
                self.deferred.insert(st.launch, st.clone());
                self.push(r.start, Ev::ReservedStart(st.launch));
                true
            }
            _ => false,
        }
    }

    /// A deferred start's reservation begins: start it now (unless it was cancelled).
    pub(super) fn reserved_start(&mut self, launch: LaunchId) {
        if let Some(st) = self.deferred.remove(&launch) {
            self.start(&st);
        }
    }
}
