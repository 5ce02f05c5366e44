//! Sites come back by themselves (issue 20): a site its errors made unusable (seed 000 §3.4)
//! is probed after a wait; once its resource monitor has read it healthy for a while it is
//! used again on probation. Its first success ends the probation; an error on probation
//! takes it out at once and doubles the wait before the next probe (capped). A site an
//! operator took down or drained is never probed: only `resume` brings it back.
//!
//! Off in [`SchedulerConfig::default`](super::SchedulerConfig) (the documents' model: an
//! unusable site waits for an operator); on in
//! [`SchedulerConfig::served`](super::SchedulerConfig::served).

use super::api::SiteId;
use super::config::doubled;
use super::{Core, Timer};
use crate::model::Millis;

/// When and how a site made unusable by its errors is let back in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SiteRecovery {
    /// The first wait after a site is made unusable before it is probed; doubled at each
    /// relapse on probation.
    pub probe_after: Millis,
    /// How long its monitor must have read it healthy before it is let back.
    pub healthy_for: Millis,
    /// The longest wait before a probe.
    pub probe_max: Millis,
}

impl Default for SiteRecovery {
    fn default() -> Self {
        SiteRecovery {
            probe_after: crate::model::MINUTE,
            healthy_for: 30 * crate::model::SECOND,
            probe_max: 30 * crate::model::MINUTE,
        }
    }
}

impl Core {
    /// Site `site` was just made unusable by its errors: time its probe.
    pub(super) fn schedule_probe(&mut self, site: SiteId) {
        let Some(r) = self.config.site_recovery else {
            return;
        };
        let s = &self.sites.state[site];
        let wait = doubled(r.probe_after, s.relapses + 1, r.probe_max);
        self.probe_at(site, self.now + wait);
    }

    fn probe_at(&mut self, site: SiteId, at: crate::model::Time) {
        self.sites.state[site].probe_at = Some(at);
        self.timers.insert((at, Timer::Probe { site, at }));
    }

    /// The probe of `site` timed for `at` is due: let the site back on probation if its
    /// monitor has read it healthy long enough, else look again when it may have.
    pub(super) fn probe(&mut self, site: SiteId, at: crate::model::Time) {
        let Some(r) = self.config.site_recovery else {
            return;
        };
        let Some(s) = self.sites.state.get(site) else {
            return;
        };
        if s.probe_at != Some(at) || s.enabled {
            return;
        }
        let healthy_since = s.healthy_since.filter(|_| s.healthy);
        match healthy_since {
            Some(since) if self.now.saturating_sub(since) >= r.healthy_for => {
                let was = s.usable();
                self.sites.set_enabled(site, true);
                self.sites.state[site].probation = true;
                self.dirty = true;
                self.usable_changed(site, was, "");
            }
            Some(since) => self.probe_at(site, since.saturating_add(r.healthy_for)),
            None => self.probe_at(site, self.now + r.healthy_for),
        }
    }
}
