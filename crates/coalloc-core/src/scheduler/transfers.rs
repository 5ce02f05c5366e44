//! Input-file transfers of placed components (seed 000 §2.5: "KOALA first initiates the
//! third-party file transfers from the selected file sites to the execution sites"): their
//! start, and their end. A transfer that fails counts against the file's site (seed 000
//! §3.4 charges errors to the site at fault); then, when another usable replica can reach
//! the component's site, the file is *re-sourced* from the best of them (§2.6's smallest
//! estimated delay) and the component keeps its site and its launch. The destination keeps
//! what the failed transfer delivered, so the new source only sends the rest (replicas of a
//! logical file are the same bytes, checked at the end against one checksum). Only when no
//! other replica is left (each file site is tried once per placement) is the component sent
//! back to be placed again, as before.

use super::api::*;
use super::Core;
use crate::placement::{other_source, SiteView};

/// One transfer under way, as the core keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct OpenTransfer {
    pub job: JobId,
    pub component: usize,
    /// The file's site.
    pub from: SiteId,
    pub bytes: u64,
    /// File sites that already failed to deliver to this component since its placement.
    pub tried: Vec<SiteId>,
}

impl Core {
    /// Send `bytes` of job `id`'s input file from `from` to component `i`'s site `to`.
    pub(super) fn transfer(&mut self, id: JobId, i: usize, from: SiteId, to: SiteId, bytes: u64) {
        self.transfer_after(id, i, from, to, bytes, Vec::new());
    }

    fn transfer_after(
        &mut self,
        id: JobId,
        i: usize,
        from: SiteId,
        to: SiteId,
        bytes: u64,
        tried: Vec<SiteId>,
    ) {
        let transfer = TransferId(self.next_transfer);
        self.next_transfer += 1;
        let open = OpenTransfer {
            job: id,
            component: i,
            from,
            bytes,
            tried,
        };
        self.transfers.insert(transfer, open);
        self.jobs.get_mut(&id).expect("known job").comps[i].transfer = Some(transfer);
        self.commands.push_back(Command::StartTransfer {
            transfer,
            job: id,
            component: i,
            from,
            to,
            bytes,
        });
    }

    /// A transfer ended; a failed one is re-sourced from another replica, or sends its
    /// component back to be re-placed. A report of a transfer that is no longer current (an
    /// old run's) changes nothing.
    pub(super) fn transfer_done(&mut self, transfer: TransferId, ok: bool) {
        let Some(t) = self.transfers.remove(&transfer) else {
            return;
        };
        let (id, i, from) = (t.job, t.component, t.from);
        let Some(j) = self.jobs.get_mut(&id).filter(|j| !j.ended()) else {
            return;
        };
        let Some(c) = j.comps.get_mut(i).filter(|c| c.transfer == Some(transfer)) else {
            return;
        };
        c.transfer = None;
        if ok {
            return self.check_commit(id);
        }
        let site = c.site.unwrap_or(0);
        let launch = c.launch.filter(|_| c.live());
        if self.resource(t, site) {
            // The file's site failed to deliver: its error (it may now be unusable, and
            // then serves no files); the component waits for the new source.
            self.site_error(from, true);
            return;
        }
        match launch {
            Some(launch) => {
                // The launch runs but will never get its input: stop it, then handle it as
                // a failed component — the file site's failure, not the launch's site's.
                self.commands.push_back(Command::CancelComponent {
                    launch,
                    job: id,
                    component: i,
                    site,
                });
                self.failed_charging(
                    launch,
                    "its input file did not arrive".to_owned(),
                    super::Fault::Site,
                    Some(from),
                );
            }
            None => {
                // The file's site failed to deliver (seed 000 §3.4 counts errors against
                // the site at fault); the component is placed again.
                if let Some(c) = self.jobs.get_mut(&id).and_then(|j| j.comps.get_mut(i)) {
                    c.site = None;
                }
                self.site_error(from, true);
                self.check_commit(id);
            }
        }
    }

    /// Start the failed transfer `t` to `site` again from the best replica not yet tried;
    /// whether there was one.
    fn resource(&mut self, t: OpenTransfer, site: SiteId) -> bool {
        let mut tried = t.tried;
        tried.push(t.from);
        let (idle, usable) = self.view_now(None, false);
        let view = SiteView::borrowed(&self.sites.sites, &idle, &usable);
        let Some(f) = other_source(&self.jobs[&t.job].job, &view, site, t.bytes, &tried) else {
            return false;
        };
        self.transfer_after(t.job, t.component, f.site, site, t.bytes, tried);
        true
    }
}
