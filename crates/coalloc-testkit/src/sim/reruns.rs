//! The started-twice check (issue 32, failover_netns): no component's program is started
//! twice, under another launch or taken a second time under its number, unless a fault
//! that may rightly start it again came first. The core starts a job again only after a
//! launch of its run failed (refused, lost, timed out pending or at the barrier, its site's
//! link lost past its grace), after its owner's cancel or edit, or when its policy kills it
//! at a runtime limit or pre-empts it; so each fault excuses the jobs whose launches it may
//! fail, for the rest of the run, and no other. Server crashes, cut commits and snapshots,
//! and fail-overs alone excuse nothing: they start nothing twice.
//!
//! What excuses a job:
//! - its own faults, as they strike: a submission refused, its answer lost, or its launch
//!   mute (`World::rm_submit`); its launch lost (`Ev::Lose`); a process's check-in refused,
//!   so that it exits failing; an unanswered submission at a direct site cancelled by number
//!   after a restart, as the server sends the cancel (it places the component again in the
//!   same turn); the client's cancel or edit, as the client sends it; an input file
//!   (its transfer may be cut or its stage-in fail its start), from its first start on;
//! - a site in trouble ([`Trouble`]): its manager down, or, at an agent site, a partition,
//!   the agent's crash, a frame lost on its link (which resets the connection: every call in
//!   flight on it fails, and its processes cannot check in). Every job with a launch at the
//!   site, at the check before the fault and at every check until the trouble is over, is
//!   excused: the leader's live components and draining launches there, and the manager's
//!   pending and running launches. The trouble is over once the manager answers again, the
//!   partition is over, the agent is up, and its link is whole (on a connection newer than
//!   those the fault broke, not stalled) for [`TAIL`];
//! - an agent's heartbeat stop: the jobs of the launches it held, which it stops;
//! - a site's link lost past its grace in the leader's core (which fails its launches there):
//!   the jobs with a launch there at the check before and at this one;
//! - a launch that waited [`WAIT`] or more for room at its manager (a launch the server let
//!   go of still there, its cancel slowed by a manager down or slow to cancel or by a link
//!   down; RPP's kills of other users' jobs, which the fake managers never make): its job,
//!   whose launch may then time out pending;
//! - a runtime-limit kill (TAGS) or a pre-emption (ICP): the job whose record counts one.
//!
//! What excuses no job: slow cancels (cancelled launches are those the server let go of; the
//! launches it wants meet only the room those hold longer: the wait excuse), mute processes
//! (their jobs are excused as their launches are submitted), cut transfers (only jobs with an
//! input file transfer one).

use super::rm::St;
use super::{Violation, World};
use coalloc_core::model::Time;
use coalloc_core::scheduler::link::LinkState;
use std::collections::{BTreeMap, BTreeSet};

/// How long a launch may wait for room at its manager and its job stay checked: a launch
/// fails pending 30 s after it is made (`pending_timeout` in `Plan::config`; from its
/// reservation's start for one made into a reservation), and its manager's pending delay
/// is 3 s at most: a wait shorter than this times nothing out.
const WAIT: Time = 5_000;

/// How long a site in trouble stays so once whole again: what the fault left in flight
/// (the reports of the calls a broken connection failed, the agent's hello) is heard by then.
const TAIL: Time = 1_000;

/// A launch whose program ran: its site, the manager's id, its launch number, and when.
type Ran = (usize, u64, u64, Time);

/// A site where a fault may fail launches, until it is whole again.
#[derive(Debug)]
struct Trouble {
    /// The first fault of this trouble.
    why: String,
    /// Not over before then (the manager back, the partition over, the agent restarted).
    until: Time,
    /// At an agent site: the connections up to this one are broken; the link must be on a
    /// newer one.
    broken: Option<u64>,
    /// Since when the site has been whole again.
    whole_since: Option<Time>,
}

/// What the started-twice check knows (see the module doc).
#[derive(Debug, Default)]
pub(super) struct Reruns {
    /// Per (job, component): the launches whose programs ran, as (site, the manager's id,
    /// launch number, when): an agent that lost its record of a launch (as one did of those
    /// it stopped at a heartbeat stop) makes one sent again under its number a second time.
    ran: BTreeMap<(u64, usize), Vec<Ran>>,
    /// Jobs a fault may have started again, and the first such fault.
    jobs: BTreeMap<u64, String>,
    /// Per site: the jobs with a launch there at the last check.
    at: Vec<BTreeSet<u64>>,
    /// The sites in trouble.
    troubles: BTreeMap<usize, Trouble>,
    /// The first component started twice with no such fault before.
    found: Option<String>,
    /// Programs started, and those started while the check held for their job (no fault
    /// that excuses it came before): the check's reach, for the run's `Outcome`.
    pub(super) starts: u32,
    pub(super) checked: u32,
}

impl Reruns {
    /// How many jobs a fault may have started again.
    pub(super) fn excused(&self) -> usize {
        self.jobs.len()
    }
}

impl World {
    /// A fault that may start job `job` again.
    pub(super) fn excuse_job(&mut self, job: u64, why: impl FnOnce() -> String) {
        if !self.reruns.jobs.contains_key(&job) {
            let why = why();
            self.log(|| format!("job {job} may start again: {why}"));
            self.reruns.jobs.insert(job, why);
        }
    }

    /// A fault at `site` that may fail launches there until `until`, and at an agent site
    /// until its link is on a connection newer than `broken`.
    pub(super) fn trouble(
        &mut self,
        site: usize,
        until: Time,
        broken: Option<u64>,
        why: impl FnOnce() -> String,
    ) {
        let t = self.reruns.troubles.entry(site).or_insert_with(|| Trouble {
            why: why(),
            until,
            broken,
            whole_since: None,
        });
        t.until = t.until.max(until);
        t.broken = t.broken.max(broken);
        t.whole_since = None;
    }

    /// Launch `id` at `site` starts running (its program begins): its component must not
    /// have run under another launch, but after a fault that may start it again.
    pub(super) fn ran(&mut self, site: usize, id: u64) {
        let l = &self.rms[site].launches[&id];
        let (job, c, launch) = (l.job, l.component, l.launch);
        let planned = self.acked.get(&job).map(|i| &self.plan.jobs[*i]);
        if planned.is_some_and(|j| j.input.is_some()) {
            // An input file's transfer or stage-in may fail (and its job's start with it).
            self.excuse_job(job, || "it has an input file".into());
        }
        let before = self.reruns.ran.entry((job, c)).or_default();
        let earlier: Vec<_> = (before.iter())
            .filter(|(s, i, _, _)| (*s, *i) != (site, id))
            .copied()
            .collect();
        before.push((site, id, launch, self.now));
        let excused = self.reruns.jobs.contains_key(&job);
        self.reruns.starts += 1;
        self.reruns.checked += u32::from(!excused);
        if earlier.is_empty() || self.reruns.found.is_some() || excused {
            return;
        }
        let earlier: Vec<String> = earlier
            .iter()
            .map(|(s, i, l, t)| {
                format!("launch {l} (R{i}) at s{s} from +{} ms", t - super::plan::T0)
            })
            .collect();
        self.reruns.found = Some(format!(
            "job {job} component {c} started twice with no fault that may start it again: launch {launch} (R{id}) at s{site} runs, after {}",
            earlier.join(", ")
        ));
    }

    /// The excuses a check finds (the jobs at sites in trouble or whose link is lost, the
    /// launches that waited for room, the kills and pre-emptions of the leader's core), then
    /// the check's finding.
    pub(super) fn check_reruns(&mut self) -> Result<(), Violation> {
        let n = self.plan.sites.len();
        let mut at: Vec<BTreeSet<u64>> = (self.rms.iter())
            .map(|rm| {
                (rm.launches.values())
                    .filter(|l| !l.ended())
                    .map(|l| l.job)
                    .collect()
            })
            .collect();
        let (mut lost, mut killed) = (Vec::new(), Vec::new());
        match &self.server {
            Some(s) => {
                let core = s.driver.core();
                for j in core.jobs() {
                    for c in j.comps.iter().filter(|c| c.live()) {
                        if let Some(site) = c.site {
                            at[site].insert(j.id);
                        }
                    }
                    if j.record.limit_kills() > 0 || j.record.preemptions() > 0 {
                        killed.push(j.id);
                    }
                }
                for (_, d) in core.draining().iter() {
                    at[d.site].insert(d.job);
                }
                lost = (0..n)
                    .filter(|i| {
                        core.site_state(*i)
                            .is_some_and(|st| matches!(st.link, LinkState::Lost { .. }))
                    })
                    .collect();
            }
            // No leader (down, or before a standby takes over): what the last one held.
            None => (at.iter_mut().zip(&self.reruns.at)).for_each(|(a, b)| a.extend(b)),
        }
        for job in killed {
            self.excuse_job(job, || {
                "its policy killed it at a runtime limit or pre-empted it".into()
            });
        }
        let mut excused: Vec<(usize, String)> = (lost.iter())
            .map(|i| (*i, format!("s{i}'s link lost past its grace")))
            .collect();
        let now = self.now;
        let mut over = Vec::new();
        for (site, t) in &mut self.reruns.troubles {
            excused.push((*site, t.why.clone()));
            let whole = now >= t.until
                && self.rms[*site].up(now)
                && self.net.link_whole(*site, now, t.broken);
            match (whole, t.whole_since) {
                (false, _) => t.whole_since = None,
                (true, None) => t.whole_since = Some(now),
                (true, Some(since)) if now >= since + TAIL => over.push(*site),
                (true, Some(_)) => {}
            }
        }
        for site in over {
            self.reruns.troubles.remove(&site);
            self.log(|| format!("s{site} is whole again"));
        }
        let before = std::mem::take(&mut self.reruns.at);
        for (site, why) in excused {
            let jobs: Vec<u64> = (before.get(site).into_iter().flatten())
                .chain(&at[site])
                .copied()
                .collect();
            for job in jobs {
                self.excuse_job(job, || format!("{why} (a launch at s{site})"));
            }
        }
        self.reruns.at = at;
        let waited: Vec<(u64, usize, u64)> = (self.rms.iter().enumerate())
            .flat_map(|(site, rm)| rm.launches.iter().map(move |(id, l)| (site, id, l)))
            .filter(|(_, _, l)| {
                let end = match l.state {
                    St::Pending { .. } => now,
                    St::Running { since } => since,
                    _ => return false,
                };
                l.waiting.is_some_and(|w| end - w >= WAIT)
            })
            .map(|(site, id, l)| (l.job, site, *id))
            .collect();
        for (job, site, id) in waited {
            self.excuse_job(job, || format!("R{id} waited for room at s{site}"));
        }
        match &self.reruns.found {
            Some(what) => Err(self.violation(what.clone())),
            None => Ok(()),
        }
    }
}
