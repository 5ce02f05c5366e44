//! A site's link (DESIGN.md "Sites apart" habit 6, issue 30): an agent site is reached over
//! a link that can fall silent, and the driver tells the core so as events, so that the
//! simulator plays a link loss with the very code the server runs.
//!
//! - [`Event::SiteDisconnected`](super::Event::SiteDisconnected): the link fell silent. This
//!   is *not* "site down": the site's launches are left alone (their processes may well run
//!   on, and the agent reports them with their launch ids when it is back, habit 5), no
//!   error is counted, and only new placements avoid it (it is not usable: what it would
//!   be sent now could not reach it). A grace timer among the core's timers starts.
//! - [`Event::SiteReconnected`](super::Event::SiteReconnected) within the grace: as if
//!   nothing had happened; the site is placed on again.
//! - The grace runs out: the site is *lost*. Link failure is then a site failure (seed 000
//!   §3.4): every live launch there fails as the site's fault, so a claiming job is aborted
//!   or its component re-placed elsewhere (seed 002 §3.2) and a committed job meets a
//!   completion failure and goes back to its queue under its failure limits (seed 003
//!   §4.3.5); the launches of stopped committed runs still draining there are no longer
//!   waited for ([`super::draining`]). The outage counts as *one* error of the site, not one per launch (it is one
//!   fault of the cluster, and a site with many launches must not be counted out by one
//!   outage), and the site stays out of service until its link comes back; it then counts
//!   as reconnected, with its error counters as they were.
//!
//! A later disconnect supersedes an earlier grace: the timer carries the time the link fell
//! silent and is ignored when that is not the current outage's (as the probe timers do).

use super::api::{LaunchId, SiteId};
use super::jobs::CompPhase;
use super::{Core, Fault, Rejected, Timer};
use crate::model::{Millis, Time};
use serde::{Deserialize, Serialize};

/// Where a site's link stands, as the core heard it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum LinkState {
    /// Connected, or a site without a link (every direct site).
    #[default]
    Up,
    /// Silent since `since`; lost at `since + grace` unless it comes back first.
    Disconnected { since: Time, grace: Millis },
    /// Silent past its grace (since `since`): its launches failed; out until it comes back.
    Lost { since: Time },
}

/// A site's link as a snapshot keeps it: read from the snapshot, or up when the head
/// being read is of a form that kept no link (it then reads nothing).
pub(super) fn read_link<'de, D: serde::Deserializer<'de>>(d: D) -> Result<LinkState, D::Error> {
    if super::snapshot::reading_linkless() {
        return Ok(LinkState::Up);
    }
    LinkState::deserialize(d)
}

impl LinkState {
    pub fn is_up(self) -> bool {
        self == LinkState::Up
    }

    /// Why a site with this link is not usable (`None` when up).
    pub fn why_out(self) -> Option<String> {
        match self {
            LinkState::Up => None,
            LinkState::Disconnected { .. } => Some("its link is disconnected".to_owned()),
            LinkState::Lost { .. } => Some("its link is lost (silent past its grace)".to_owned()),
        }
    }
}

impl Core {
    /// The link of `site` fell silent; it is lost unless it comes back within `grace`.
    pub(super) fn site_disconnected(
        &mut self,
        site: SiteId,
        grace: Millis,
    ) -> Result<(), Rejected> {
        let Some(s) = self.sites.state.get(site) else {
            return Err(Rejected::UnknownSite(site));
        };
        if !s.link.is_up() {
            // Already silent (or lost): the first outage's timer stands.
            return Ok(());
        }
        let was = s.usable();
        let since = self.now;
        self.sites.state[site].link = LinkState::Disconnected {
            since,
            grace: grace.max(0),
        };
        self.timers
            .insert((since + grace.max(0), Timer::LinkGrace { site, since }));
        self.dirty = true;
        self.usable_changed(site, was, "its link is disconnected");
        Ok(())
    }

    /// The link of `site` is back: the site is placed on again (a lost one too; its
    /// launches failed when it was lost, and the driver cancels those the agent still holds).
    pub(super) fn site_reconnected(&mut self, site: SiteId) -> Result<(), Rejected> {
        let Some(s) = self.sites.state.get(site) else {
            return Err(Rejected::UnknownSite(site));
        };
        if s.link.is_up() {
            return Ok(());
        }
        let was = s.usable();
        self.sites.state[site].link = LinkState::Up;
        self.sites.epoch += 1;
        self.dirty = true;
        self.usable_changed(site, was, "");
        Ok(())
    }

    /// The grace of the outage that began at `since` ran out.
    pub(super) fn link_grace_over(&mut self, site: SiteId, since: Time) {
        let Some(s) = self.sites.state.get(site) else {
            return;
        };
        let LinkState::Disconnected {
            since: current,
            grace,
        } = s.link
        else {
            return;
        };
        if current != since {
            return;
        }
        self.sites.state[site].link = LinkState::Lost { since };
        let live: Vec<LaunchId> = self
            .launches
            .live()
            .filter(|(_, job, i)| {
                self.jobs.get(job).is_some_and(|j| {
                    j.comps
                        .get(*i)
                        .is_some_and(|c| c.site == Some(site) && c.live())
                })
            })
            .map(|(l, _, _)| l)
            .collect();
        let any = !live.is_empty();
        let before_start = live
            .iter()
            .any(|l| self.launch_phase(*l) != Some(CompPhase::Ready));
        let reason = format!(
            "the site's link was silent past its grace ({})",
            crate::spec::units::format_duration(grace)
        );
        // Its launches fail as the site's fault; the outage is one error of the site, not
        // one per launch (`site_error` counts nothing while the link is lost).
        for l in live {
            self.failed(l, reason.clone(), Fault::Site);
        }
        // Nor are its draining launches waited for any more (`draining.rs`).
        self.give_up_draining_at(site);
        if any {
            if let super::sites::ErrorOutcome::MadeUnusable(_) =
                self.sites.error(site, before_start)
            {
                self.schedule_probe(site);
            }
        }
        self.dirty = true;
    }

    fn launch_phase(&self, launch: LaunchId) -> Option<CompPhase> {
        let (job, i) = self.launches.get(launch)?;
        Some(self.jobs.get(&job)?.comps.get(i)?.phase)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Command, Event, Notice, Reply, Scheduler, SchedulerConfig};
    use super::*;
    use crate::model::{Component, Job, JobKind, Site};

    const GRACE: Millis = 30_000;

    fn two_sites() -> Scheduler {
        // Worst fit: a job goes to the site with the most idle processors, s0 first.
        let sites = vec![Site::cluster("s0", 32), Site::cluster("s1", 16)];
        Scheduler::new(SchedulerConfig::default(), sites)
    }

    fn job(count: u32) -> Box<Job> {
        Box::new(Job::new(
            JobKind::Unordered,
            vec![Component {
                count,
                ..Component::default()
            }],
        ))
    }

    fn submit(s: &mut Scheduler, now: Time, count: u32) -> u64 {
        match s.handle(now, Event::Submit(job(count))) {
            Ok(Reply::Submitted(id)) => id,
            other => panic!("{other:?}"),
        }
    }

    /// The commands out, as (launch, site) of each start, and every other command.
    fn drain(s: &mut Scheduler) -> (Vec<(LaunchId, SiteId)>, Vec<Command>) {
        let mut starts = Vec::new();
        let mut rest = Vec::new();
        while let Some(c) = s.poll_command() {
            match c {
                Command::StartComponent(st) => starts.push((st.launch, st.site)),
                other => rest.push(other),
            }
        }
        (starts, rest)
    }

    #[test]
    fn a_disconnected_site_gets_no_new_placements_and_keeps_its_launches() {
        let mut s = two_sites();
        let a = submit(&mut s, 0, 8);
        let (started, _) = drain(&mut s);
        assert_eq!(started.iter().map(|x| x.1).collect::<Vec<_>>(), [0]);
        let launch = started[0].0;
        s.handle(1, Event::ComponentStarted { launch }).unwrap();
        s.handle(
            2,
            Event::SiteDisconnected {
                site: 0,
                grace: GRACE,
            },
        )
        .unwrap();
        let (_, rest) = drain(&mut s);
        assert!(
            rest.iter().any(|c| matches!(c,
                Command::Notify(Notice::SiteUnusable { site: 0, reason })
                    if reason.contains("disconnected"))),
            "{rest:?}"
        );
        assert_eq!(
            s.next_wakeup(),
            Some(2 + GRACE),
            "the grace is a core timer"
        );
        // A new job goes to s1 although s0 has more idle processors.
        submit(&mut s, 3, 8);
        let (started, _) = drain(&mut s);
        assert_eq!(started.iter().map(|x| x.1).collect::<Vec<_>>(), [1]);
        // Disconnected is not down: the launch on s0 is left alone, no error counted.
        let st = s.site_state(0).unwrap();
        assert_eq!(
            (st.submit_errors, st.completion_errors, st.enabled),
            (0, 0, true)
        );
        assert!(s.job(a).unwrap().comps[0].live());
        // Back within the grace: as if nothing had happened; the old timer does nothing.
        s.handle(10, Event::SiteReconnected { site: 0 }).unwrap();
        let (_, rest) = drain(&mut s);
        assert!(rest
            .iter()
            .any(|c| matches!(c, Command::Notify(Notice::SiteUsable { site: 0 }))));
        s.handle(2 + GRACE, Event::Tick).unwrap();
        assert!(s.job(a).unwrap().comps[0].live());
        assert_eq!(s.site_state(0).unwrap().link, LinkState::Up);
        submit(&mut s, 2 + GRACE + 1, 4);
        let (started, _) = drain(&mut s);
        assert_eq!(started.iter().map(|x| x.1).collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn past_its_grace_a_site_is_lost_its_launches_fail_once_and_the_job_is_placed_again() {
        let mut s = two_sites();
        let a = submit(&mut s, 0, 8);
        let b = submit(&mut s, 0, 8);
        let (started, _) = drain(&mut s);
        // Worst fit: 32 and 16 idle, then 24 and 16: both on s0.
        assert_eq!(started.iter().map(|x| x.1).collect::<Vec<_>>(), [0, 0]);
        for &(launch, _) in &started {
            s.handle(1, Event::ComponentStarted { launch }).unwrap();
            s.handle(1, Event::ComponentReady { launch }).unwrap();
        }
        drain(&mut s);
        s.handle(
            5,
            Event::SiteDisconnected {
                site: 0,
                grace: GRACE,
            },
        )
        .unwrap();
        // A second silence report does not move the grace.
        s.handle(
            6,
            Event::SiteDisconnected {
                site: 0,
                grace: GRACE,
            },
        )
        .unwrap();
        drain(&mut s);
        s.handle(5 + GRACE - 1, Event::Tick).unwrap();
        assert!(s.job(a).unwrap().comps[0].live(), "not before the grace");
        s.handle(5 + GRACE, Event::Tick).unwrap();
        let (again, rest) = drain(&mut s);
        assert_eq!(s.site_state(0).unwrap().link, LinkState::Lost { since: 5 });
        let requeued: Vec<u64> = rest
            .iter()
            .filter_map(|c| match c {
                Command::Notify(Notice::Requeued { job, reason }) => {
                    assert!(reason.contains("silent past its grace"), "{reason}");
                    Some(*job)
                }
                _ => None,
            })
            .collect();
        assert_eq!(requeued, [a, b]);
        // Both are placed again, on s1 only (s0 is out until its link is back); s1 has room
        // for both.
        assert_eq!(
            again.iter().map(|x| x.1).collect::<Vec<_>>(),
            [1, 1],
            "{again:?}"
        );
        assert!(again.iter().all(|x| !started.iter().any(|y| y.0 == x.0)));
        // One error of the site for the outage, not one per launch.
        let st = s.site_state(0).unwrap();
        assert_eq!(st.completion_errors, 1);
        assert!(st.enabled);
        assert!(!st.usable());
        assert_eq!(st.ours, 0, "the lost launches' processors are given back");
        // Back: placed on again.
        s.handle(100_000, Event::SiteReconnected { site: 0 })
            .unwrap();
        assert!(s.site_state(0).unwrap().usable());
        submit(&mut s, 100_001, 4);
        let (started, _) = drain(&mut s);
        assert_eq!(started.iter().map(|x| x.1).collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn a_new_outage_has_its_own_grace_and_unknown_sites_are_refused() {
        let mut s = two_sites();
        let a = submit(&mut s, 0, 8);
        let (started, _) = drain(&mut s);
        s.handle(
            1,
            Event::ComponentStarted {
                launch: started[0].0,
            },
        )
        .unwrap();
        s.handle(
            10,
            Event::SiteDisconnected {
                site: 0,
                grace: GRACE,
            },
        )
        .unwrap();
        s.handle(20, Event::SiteReconnected { site: 0 }).unwrap();
        s.handle(
            30,
            Event::SiteDisconnected {
                site: 0,
                grace: GRACE,
            },
        )
        .unwrap();
        // The first outage's timer fires and is ignored.
        s.handle(10 + GRACE, Event::Tick).unwrap();
        assert!(s.job(a).unwrap().comps[0].live());
        assert_eq!(s.job(a).unwrap().comps[0].launch, Some(started[0].0));
        s.handle(30 + GRACE, Event::Tick).unwrap();
        let c = &s.job(a).unwrap().comps[0];
        assert_ne!(c.launch, Some(started[0].0), "failed, and placed again");
        assert_eq!(c.site, Some(1));
        // Lost before its barrier: a submission error.
        assert_eq!(s.site_state(0).unwrap().submit_errors, 1);
        let before = s.site_state(1).cloned();
        assert!(s
            .handle(40, Event::SiteDisconnected { site: 9, grace: 1 })
            .is_err());
        assert!(s.handle(40, Event::SiteReconnected { site: 9 }).is_err());
        assert_eq!(s.site_state(1).cloned(), before);
    }
}
