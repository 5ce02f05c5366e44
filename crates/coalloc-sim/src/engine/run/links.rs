//! Agent links that fall silent and come back ([`crate::engine::LinkLoss`], issue 30): the
//! simulated agent site runs on while the core hears nothing from it. The core is told
//! `SiteDisconnected` and `SiteReconnected`, and its grace timer decides whether the site
//! is lost meanwhile (`coalloc_core::scheduler::link`), exactly as in the server.
//!
//! While a site's link is silent its launch reports (ready, ended, crashed) wait at the
//! agent until the link is back, and its monitor readings are not sent. When the link is
//! back, the launches the core no longer wants (failed when the site was lost) are
//! cancelled, as the server cancels the unwanted launches an agent reports in its hello;
//! then the reports held meanwhile arrive, and those about cancelled launches are ignored.

use super::{Ev, Sim};
use coalloc_core::scheduler::{Event, LaunchId};

impl Sim<'_> {
    /// Link loss `k` begins.
    pub(super) fn link_down(&mut self, k: usize, batch: &mut Vec<Event>) {
        let o = self.params.failures.link_losses[k];
        // Overlapping losses of one site: the link is back at the latest end.
        let up = self.link_up_at[o.site].map_or(o.to, |t| t.max(o.to));
        self.link_up_at[o.site] = Some(up);
        batch.push(Event::SiteDisconnected {
            site: o.site,
            grace: o.grace,
        });
    }

    /// Link loss `k` ends (unless a longer one of the same site is still on).
    pub(super) fn link_up(&mut self, k: usize, batch: &mut Vec<Event>) {
        let site = self.params.failures.link_losses[k].site;
        if self.link_up_at[site].is_some_and(|t| t > self.now) {
            return;
        }
        self.link_up_at[site] = None;
        let unwanted: Vec<LaunchId> = self
            .launches
            .iter()
            .map(|(id, l)| (LaunchId(id), l))
            .filter(|(id, l)| l.site == site && !self.core_wants(l.job, *id))
            .map(|(id, _)| id)
            .collect();
        for launch in unwanted {
            self.drop_launch(launch);
        }
        batch.push(Event::SiteReconnected { site });
        self.reported[site] = (u32::MAX, false); // the next reading is sent whatever it is
        self.dirty.insert(site);
    }

    /// Whether launch `launch` is one the core still counts as current for job `job`.
    fn core_wants(&self, job: u64, launch: LaunchId) -> bool {
        self.core
            .job(job)
            .is_some_and(|j| j.comps.iter().any(|c| c.launch == Some(launch)))
    }

    /// A report about `launch` while its site's link is silent: it waits for the link
    /// (true), else it goes now (false).
    pub(super) fn held_back(&mut self, launch: LaunchId, ev: Ev) -> bool {
        let Some(l) = self.launches.get(launch.0) else {
            return false;
        };
        let Some(up) = self.link_up_at[l.site] else {
            return false;
        };
        self.push(up, ev);
        true
    }
}
