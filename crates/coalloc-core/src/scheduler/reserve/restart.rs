//! Reserve claiming after a restart (issue 31, item 2): the driver reports what each site
//! holds under coalloc's names, and the core keeps the live runs' reservations and deletes
//! the others.

use super::super::api::*;
use super::super::Core;
use super::ResvState;

impl Core {
    /// [`Event::ReservationsFound`]: after a restart, keep the live runs' reservations
    /// (one asked for and found was made), and delete the others. One asked for and not
    /// found is judged only if it was `pending` when the list was asked for: one asked for
    /// since may be made after the list was taken, and its answer is still to come (one
    /// rolled back meanwhile and forgotten here was left at its site when it was made:
    /// simulation harness, seed 347).
    pub(in crate::scheduler) fn reservations_found(
        &mut self,
        site: SiteId,
        names: Vec<String>,
        pending: Option<Vec<String>>,
    ) -> Result<(), Rejected> {
        if site >= self.sites.len() {
            return Err(Rejected::UnknownSite(site));
        }
        let mut made = Vec::new();
        for name in &names {
            let known = self
                .reserve
                .table
                .iter()
                .find(|(_, r)| r.site == site && &r.name == name)
                .map(|(&k, r)| (k, r.state));
            match known {
                Some((rid, ResvState::Requested)) => made.push(rid),
                Some((rid, ResvState::Abandoned)) => {
                    self.reserve.table.remove(&rid);
                    self.unreserve(site, name);
                }
                Some(_) => {}
                None => self.unreserve(site, name),
            }
        }
        // Abandoned ones the site does not hold are gone; one asked for and not held was not
        // made (its request was lost with the restart): refused. Only those pending when
        // the list was asked for.
        let judged = |name: &String| pending.as_ref().is_none_or(|p| p.contains(name));
        let unheld =
            |r: &super::Resv| r.site == site && !names.contains(&r.name) && judged(&r.name);
        self.reserve
            .table
            .retain(|_, r| !(r.state == ResvState::Abandoned && unheld(r)));
        let lost: Vec<ReservationId> = self
            .reserve
            .table
            .iter()
            .filter(|(_, r)| r.state == ResvState::Requested && unheld(r))
            .map(|(&k, _)| k)
            .collect();
        for rid in made {
            self.reserved(rid, Ok(()))?;
        }
        for rid in lost {
            self.reserved(rid, Err("not found at the site after a restart".to_owned()))?;
        }
        Ok(())
    }

    fn unreserve(&mut self, site: SiteId, name: &str) {
        self.commands.push_back(Command::Unreserve {
            site,
            name: name.to_owned(),
        });
    }
}
