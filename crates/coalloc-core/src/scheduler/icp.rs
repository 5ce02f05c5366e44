//! The Incremental Claiming Policy (seed 000 §3.2–3.3).
//!
//! A placed job is not started at once: its input files are moved first. With JPT the
//! placement time and FTT the longest estimated transfer, the job start time is
//! JST = JPT + FTT, and claiming tries happen at JCT0 = JPT + L·FTT and then
//! JCTn+1 = JCTn + L·(JST − JCTn). At a try, F is the fraction of components already started
//! or startable now; below T the try fails. Otherwise each component that cannot start is
//! re-placed (Close-to-Files, its file must arrive before the JST); a high-priority job may
//! then preempt low-priority jobs at the component's site, latest JST first; and every
//! component that can start, starts, waiting at the barrier until the JST. A job still not
//! fully claimed at its JST goes back to the placement queue with L lowered by a fixed step
//! (down to a bound); past the claiming-try limit it fails. T = 1 makes claiming atomic.
//!
//! Arithmetic is in integer milliseconds with L in thousandths, so runs are reproducible.

use super::api::*;
use super::jobs::{ClaimState, CompPhase, Phase};
use super::{Core, Timer};
use crate::model::{Component, Millis, Priority, Time};
use crate::placement::{Fit, Placement};

/// ICP's parameters (seed 000 §4 used L = 0.75, step 0.125, bound 0.25, T = 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IcpParams {
    /// L, 0 < L < 1: how early claiming starts.
    pub l: f64,
    /// How much L drops each time the job returns to the placement queue.
    pub l_step: f64,
    /// L's lower bound.
    pub l_min: f64,
    /// T, 0 ≤ T ≤ 1: the least fraction of components that must be claimable for a try.
    pub t: f64,
    /// Claiming tries a job may take before it fails; `None` = no limit.
    pub max_claim_tries: Option<u32>,
    /// Whether high-priority jobs may preempt low-priority ones.
    pub preempt: bool,
}

impl Default for IcpParams {
    fn default() -> Self {
        IcpParams {
            l: 0.75,
            l_step: 0.125,
            l_min: 0.25,
            t: 0.0,
            max_claim_tries: None,
            preempt: true,
        }
    }
}

fn permille(x: f64) -> u32 {
    (x.clamp(0.0, 1.0) * 1000.0).round() as u32
}

/// `JCTn+1 = JCTn + L·(JST − JCTn)`, always moving forward, ending at the JST.
pub fn next_jct(jct: Time, jst: Time, l_permille: u32) -> Time {
    let step = (jst - jct).max(0) * i64::from(l_permille) / 1000;
    if step == 0 {
        jst
    } else {
        jct + step
    }
}

/// `JCT0 = JPT + L·FTT`.
pub fn first_jct(jpt: Time, ftt: Millis, l_permille: u32) -> Time {
    jpt + ftt.max(0) * i64::from(l_permille) / 1000
}

impl Core {
    fn icp(&self) -> IcpParams {
        match self.config.claiming {
            super::config::Claiming::Icp(p) => p,
            _ => IcpParams::default(),
        }
    }

    /// Placed under ICP: start the transfers, compute JST and JCT0, and wait for the JCT.
    #[inline(never)]
    pub(super) fn begin_claiming(&mut self, id: JobId, placement: Placement) {
        let now = self.now;
        let params = self.icp();
        self.apply_pieces(id, &super::transaction::sites_of(&placement));
        let ftt = placement.transfer_time().unwrap_or(0);
        let j = self.jobs.get_mut(&id).expect("claiming a known job");
        let l = j.l_permille().unwrap_or(permille(params.l));
        j.set_l_permille(Some(l));
        let jst = now + ftt;
        let jct = first_jct(now, ftt, l);
        j.set_claim(Some(ClaimState {
            jpt: now,
            ftt,
            jst,
            jct,
        }));
        self.enter_claiming(id, &placement, jst);
        let sites = placement.components.iter().map(|p| p.site).collect();
        for (i, p) in placement.components.iter().enumerate() {
            if let Some(f) = p.file.as_ref().filter(|f| f.site != p.site) {
                self.transfer(id, i, f.site, p.site, f.bytes);
            }
        }
        self.notify(Notice::Placed { job: id, sites });
        self.arm_claim(id, jct);
    }

    /// A placed job waits in the claiming phase (ICP's claiming, or reserve claiming's
    /// reservations) with its barrier held until `jst`: its run's placement and start times
    /// recorded, each component's site and size set.
    pub(super) fn enter_claiming(&mut self, id: JobId, placement: &Placement, jst: Time) {
        let now = self.now;
        let j = self.jobs.get_mut(&id).expect("claiming a known job");
        j.phase = Phase::Claiming;
        j.set_hold_until(Some(jst));
        j.record.run_mut().placed = Some(now);
        j.record.run_mut().first_jst.get_or_insert(jst);
        j.record.run_mut().last_jst = Some(jst);
        for (i, p) in placement.components.iter().enumerate() {
            j.comps[i].site = Some(p.site);
            j.comps[i].count = p.count;
        }
        self.active_changed(id);
    }

    fn arm_claim(&mut self, id: JobId, at: Time) {
        if at <= self.now {
            return self.claim_try(id);
        }
        let generation = self.jobs[&id].generation();
        self.timers.insert((
            at,
            Timer::Claim {
                job: id,
                generation,
            },
        ));
    }

    /// One claiming try (seed 000 §3.3).
    pub(super) fn claim_try(&mut self, id: JobId) {
        let params = self.icp();
        let now = self.now;
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if j.phase != Phase::Claiming {
            return;
        }
        j.record.run_mut().claim_tries += 1;
        let Some(claim) = j.claim().copied() else {
            return;
        };
        let waiting: Vec<usize> = (0..j.comps.len())
            .filter(|&i| j.comps[i].phase == CompPhase::Idle)
            .collect();
        let members = j
            .comps
            .iter()
            .filter(|c| c.phase != CompPhase::Deleted)
            .count();
        let started = members - waiting.len();
        // Which waiting components can start where they are placed?
        let mut idle: Vec<u32> = self.sites.idle();
        let usable: Vec<bool> = self.sites.usable();
        let mut startable = Vec::new();
        let mut blocked = Vec::new();
        for &i in &waiting {
            let c = &self.jobs[&id].comps[i];
            match c.site {
                Some(s) if usable[s] && idle[s] >= c.count => {
                    idle[s] -= c.count;
                    startable.push(i);
                }
                _ => blocked.push(i),
            }
        }
        let enough = (started + startable.len()) as f64 >= params.t * members as f64 - 1e-9;
        if enough {
            // Claim what can start where it is placed, then re-place or preempt for the rest
            // against what is left.
            for i in startable {
                self.launch_placed(id, i);
            }
            for i in blocked {
                if self.replace_for_claim(id, i, claim.jst) || self.preempt_for(id, i, params) {
                    self.launch_placed(id, i);
                }
            }
        }
        let j = self.jobs.get_mut(&id).expect("known job");
        if j.comps.iter().all(|c| c.phase != CompPhase::Idle) {
            j.phase = Phase::Starting;
            self.active_changed(id);
            self.arm_hold(id);
            return self.check_commit(id);
        }
        j.record.run_mut().claim_failures += 1;
        if now >= claim.jst {
            return self.claiming_round_failed(id, params);
        }
        let l = j.l_permille().unwrap_or(permille(params.l));
        let next = next_jct(claim.jct.max(now), claim.jst, l);
        if let Some(c) = j.claim_mut() {
            c.jct = next;
        }
        self.arm_claim(id, next);
    }

    /// Start component `i` on the site it is placed on.
    fn launch_placed(&mut self, id: JobId, i: usize) {
        let c = &self.jobs[&id].comps[i];
        let (site, count) = (c.site.unwrap_or(0), c.count);
        self.launch(id, i, site, count);
    }

    /// The JST came and not every component could be claimed: back to the placement queue
    /// with a lower L, or fail past the claiming-try limit.
    fn claiming_round_failed(&mut self, id: JobId, params: IcpParams) {
        self.cancel_launches(id);
        let j = self.jobs.get_mut(&id).expect("known job");
        let l = j.l_permille().unwrap_or(permille(params.l));
        j.set_l_permille(Some(
            l.saturating_sub(permille(params.l_step))
                .max(permille(params.l_min)),
        ));
        if let Some(max) = params.max_claim_tries {
            if j.record.claim_tries() > max {
                let why = format!(
                    "could not claim every component by its start time (limit of {max} claiming tries reached)"
                );
                return self.end_job(id, Err(why));
            }
        }
        self.reset_to_queue(id);
        self.notify(Notice::Requeued {
            job: id,
            reason: "could not claim every component by its start time".to_owned(),
        });
    }

    /// Re-place a component that cannot start (Close-to-Files) so that its file arrives
    /// before the JST; start its transfer. Returns whether it found room.
    fn replace_for_claim(&mut self, id: JobId, i: usize, jst: Time) -> bool {
        let j = &self.jobs[&id];
        let comp = Component {
            site: None,
            count: j.comps[i].count,
            ..j.job.components[i].clone()
        };
        if j.job.components[i].site.is_some() {
            return false; // an ordered component stays on its site
        }
        let Some((site, _, file)) = self.place_alone(&j.job, comp, None, Some(Fit::CloseToFiles))
        else {
            return false;
        };
        let arrival = file.as_ref().map_or(0, |f| f.estimate);
        if self.now + arrival > jst {
            return false;
        }
        self.jobs.get_mut(&id).expect("known job").comps[i].site = Some(site);
        if let Some(f) = file {
            self.transfer(id, i, f.site, site, f.bytes);
        }
        true
    }

    /// A high-priority job's component preempts low-priority jobs at its site, latest JST
    /// first, if that frees enough processors.
    fn preempt_for(&mut self, id: JobId, i: usize, params: IcpParams) -> bool {
        let j = &self.jobs[&id];
        if !params.preempt || j.job.priority != Priority::High {
            return false;
        }
        let (Some(site), count) = (j.comps[i].site, j.comps[i].count) else {
            return false;
        };
        if !self.sites.state[site].usable() {
            return false;
        }
        // Low-priority jobs holding processors at the site, latest JST first.
        let mut victims: Vec<(Time, JobId, u32)> = self
            .jobs
            .values()
            .filter(|v| v.id != id && v.job.priority == Priority::Low)
            .filter(|v| matches!(v.phase, Phase::Claiming | Phase::Starting | Phase::Running))
            .filter_map(|v| {
                let held: u32 = v
                    .comps
                    .iter()
                    .filter(|c| c.live() && c.site == Some(site))
                    .map(|c| c.count)
                    .sum();
                let jst = v
                    .claim()
                    .map(|c| c.jst)
                    .or(v.record.run().last_jst)
                    .unwrap_or(0);
                (held > 0).then_some((jst, v.id, held))
            })
            .collect();
        let idle = self.sites.state[site].idle;
        let low: u32 = victims.iter().map(|v| v.2).sum();
        if count > idle + low {
            return false;
        }
        victims.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        for (_, victim, _) in victims {
            if self.sites.state[site].idle >= count {
                break;
            }
            self.cancel_launches(victim);
            self.jobs
                .get_mut(&victim)
                .expect("victim")
                .record
                .run_mut()
                .preemptions += 1;
            self.reset_to_queue(victim);
            self.notify(Notice::Preempted {
                job: victim,
                by: id,
            });
        }
        self.sites.state[site].idle >= count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jct_sequence_with_l_075() {
        // JPT = 0, FTT = 100 s: JST = 100 s, JCT0 = 75 s, then 93.75 s, 98.4375 s, ...
        let l = permille(0.75);
        let mut jct = first_jct(0, 100_000, l);
        let mut seq = vec![jct];
        while jct < 100_000 {
            jct = next_jct(jct, 100_000, l);
            seq.push(jct);
        }
        assert_eq!(&seq[..5], &[75_000, 93_750, 98_437, 99_609, 99_902]);
        assert_eq!(*seq.last().unwrap(), 100_000);
        assert!(seq.windows(2).all(|w| w[0] < w[1]));
    }
}
