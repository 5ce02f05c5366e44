//! One simulated site (seed 001 §2.1): a pool of processors with its own local scheduler,
//! which runs the site's local (non-coalloc) jobs first come, first served, holds coalloc's
//! components, and keeps the processor-time integrals the load metrics are made of.
//!
//! Coalloc's components claim processors at once when they are free ("the processors
//! allocated to the job are claimed immediately", seed 001 §2.2); a component that finds too
//! few free waits in the site's own queue and goes before every local job. Local jobs run
//! strictly FCFS: the head waits until it fits and nothing passes it. Under GP the scheduler
//! may kill local jobs; the most recently started go first, so that the least work is lost
//! (the document does not say which). Reservations (issue 31, [`super::calendar`]): a local
//! job starts only if it leaves every reservation's unclaimed processors free while it runs.

use coalloc_core::model::{Millis, Time};
use coalloc_core::scheduler::LaunchId;
use std::collections::VecDeque;

/// A local job as the site sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Local {
    pub submit: Time,
    pub size: u32,
    pub runtime: Millis,
}

/// What happened to one local job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LocalFate {
    pub start: Option<Time>,
    pub end: Option<Time>,
    pub killed: bool,
}

/// Processor-time, in processor-milliseconds, inside the measurement window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Usage {
    /// Held by local jobs.
    pub local: u128,
    /// Held by coalloc's components before their job's barrier released them.
    pub held: u128,
    /// Held by coalloc's components running after the barrier.
    pub running: u128,
    /// Reserved for coalloc's components (issue 31) and not yet used by them: idle
    /// processors no other job may take.
    pub reserved: u128,
}

/// A simulated site.
#[derive(Debug, Clone)]
pub struct SimSite {
    pub total: u32,
    /// The resource manager answers (false during an outage).
    pub up: bool,
    pub busy_local: u32,
    pub busy_held: u32,
    pub busy_running: u32,
    /// Local jobs waiting, by index into [`SimSite::locals`].
    queue: VecDeque<usize>,
    /// Running local jobs (index, start), in start order.
    running: Vec<(usize, Time)>,
    /// Coalloc launches waiting for processors, with their sizes.
    waiting: VecDeque<(LaunchId, u32)>,
    pub locals: Vec<Local>,
    pub fates: Vec<LocalFate>,
    pub usage: Usage,
    /// Advance reservations (issue 31).
    pub calendar: super::calendar::Calendar,
    /// Integrals are kept up to this time.
    clock: Time,
    window_end: Time,
}

impl SimSite {
    pub fn new(total: u32, locals: Vec<Local>, window_end: Time) -> SimSite {
        let fates = vec![LocalFate::default(); locals.len()];
        SimSite {
            total,
            up: true,
            busy_local: 0,
            busy_held: 0,
            busy_running: 0,
            queue: VecDeque::new(),
            running: Vec::new(),
            waiting: VecDeque::new(),
            locals,
            fates,
            usage: Usage::default(),
            calendar: Default::default(),
            clock: 0,
            window_end,
        }
    }

    /// Processors nobody holds.
    pub fn free(&self) -> u32 {
        self.total
            .saturating_sub(self.busy_local + self.busy_held + self.busy_running)
    }

    /// Whether nothing is over-allocated.
    fn within_total(&self) -> bool {
        self.busy_local + self.busy_held + self.busy_running <= self.total
    }

    /// Whether the calendar holds a reservation.
    fn reserving(&self) -> bool {
        !self.calendar.windows().is_empty()
    }

    /// Advance the processor-time integrals to `now` (clipped to the measurement window).
    /// The holdings must not have changed since the integrals were last advanced:
    /// [`Sites::at`] calls this before every change.
    pub fn advance(&mut self, now: Time) {
        debug_assert!(self.within_total(), "site over-allocated");
        let to = now.min(self.window_end);
        // With no reservations (most runs) the calendar is not walked.
        let reserving = self.reserving();
        if to > self.clock {
            let dt = (to - self.clock) as u128;
            self.usage.local += dt * u128::from(self.busy_local);
            self.usage.held += dt * u128::from(self.busy_held);
            self.usage.running += dt * u128::from(self.busy_running);
            if reserving {
                self.usage.reserved += self.calendar.idle_integral(self.clock, to);
            }
        }
        if reserving {
            self.calendar.prune(now);
        }
        self.clock = self.clock.max(to);
    }

    /// Local job `i` arrives.
    pub fn local_arrives(&mut self, i: usize) {
        self.queue.push_back(i);
    }

    /// Whether [`Self::dispatch`] may start anything: the site is up and something waits.
    pub fn may_dispatch(&self) -> bool {
        self.up && !(self.waiting.is_empty() && self.queue.is_empty())
    }

    /// Start what fits: waiting coalloc launches first (in order), then local jobs FCFS.
    /// Returns the launches and local jobs started, so the driver can schedule their ends.
    pub fn dispatch(&mut self, now: Time) -> (Vec<LaunchId>, Vec<usize>) {
        let mut launches = Vec::new();
        let mut locals = Vec::new();
        if !self.up {
            return (launches, locals);
        }
        while let Some(&(launch, n)) = self.waiting.front() {
            if n > self.free() {
                break;
            }
            self.waiting.pop_front();
            self.busy_held += n;
            launches.push(launch);
        }
        if !self.waiting.is_empty() {
            // A waiting component keeps its place ahead of the local jobs.
            return (launches, locals);
        }
        while let Some(&i) = self.queue.front() {
            let Local { size, runtime, .. } = self.locals[i];
            let promised = self.calendar.peak_unclaimed(now, now + runtime.max(1));
            if size + promised > self.free() {
                break;
            }
            self.queue.pop_front();
            self.busy_local += size;
            self.running.push((i, now));
            self.fates[i].start = Some(now);
            locals.push(i);
        }
        (launches, locals)
    }

    /// A coalloc launch of `n` processors asks for them: taken now if free (true), else it
    /// waits ahead of the local queue.
    pub fn claim(&mut self, launch: LaunchId, n: u32) -> bool {
        if self.waiting.is_empty() && n <= self.free() {
            self.busy_held += n;
            true
        } else {
            self.waiting.push_back((launch, n));
            false
        }
    }

    /// A launch that waits for processors is withdrawn; true if it was waiting.
    pub fn withdraw(&mut self, launch: LaunchId) -> bool {
        let before = self.waiting.len();
        self.waiting.retain(|&(l, _)| l != launch);
        self.waiting.len() != before
    }

    /// Drain every waiting launch (an outage fails them).
    pub fn take_waiting(&mut self) -> Vec<LaunchId> {
        self.waiting.drain(..).map(|(l, _)| l).collect()
    }

    /// A held launch's job passed its barrier: its processors now compute.
    pub fn run(&mut self, n: u32) {
        self.busy_held = self.busy_held.saturating_sub(n);
        self.busy_running += n;
    }

    /// A launch gives its processors back.
    pub fn release(&mut self, n: u32, running: bool) {
        if running {
            self.busy_running = self.busy_running.saturating_sub(n);
        } else {
            self.busy_held = self.busy_held.saturating_sub(n);
        }
    }

    /// Local job `i` ends normally (false if it was killed before).
    pub fn local_ends(&mut self, i: usize, now: Time) -> bool {
        let Some(pos) = self.running.iter().position(|&(j, _)| j == i) else {
            return false;
        };
        self.running.remove(pos);
        self.busy_local -= self.locals[i].size;
        self.fates[i].end = Some(now);
        true
    }

    /// The processors running local jobs hold and until when (their runtimes are known).
    pub fn local_running_until(&self) -> impl Iterator<Item = (u32, Time)> + '_ {
        self.running
            .iter()
            .map(|&(i, start)| (self.locals[i].size, start + self.locals[i].runtime))
    }

    /// Kill running local jobs, newest first, until `processors` more are free than now
    /// (GP, seed 001 §2.2). Returns how many were killed.
    pub fn kill_local(&mut self, processors: u32, now: Time) -> usize {
        let mut freed = 0;
        let mut killed = 0;
        while freed < processors {
            let Some((i, _)) = self.running.pop() else {
                break;
            };
            let size = self.locals[i].size;
            self.busy_local -= size;
            freed += size;
            self.fates[i].end = Some(now);
            self.fates[i].killed = true;
            killed += 1;
        }
        killed
    }

    /// An outage: every running local job is lost (counted as killed) and the queue waits.
    pub fn go_down(&mut self, now: Time) {
        self.up = false;
        let all = self.total;
        self.kill_local(all, now);
    }
}

/// The simulated sites of a run. A site's processor-time integrals hold its holdings since it
/// last changed, so a site is changed only through [`Sites::at`], which first brings them to
/// the present: most sites do not change at most instants, and none is moved for nothing.
#[derive(Debug)]
pub struct Sites(Vec<SimSite>);

impl Sites {
    pub fn new(sites: Vec<SimSite>) -> Sites {
        Sites(sites)
    }

    /// Site `site`, to change at `now`.
    pub fn at(&mut self, site: usize, now: Time) -> &mut SimSite {
        let s = &mut self.0[site];
        s.advance(now);
        s
    }

    /// The end of the measurement window, once it is known (a fed run's last arrival; no
    /// integral has been advanced past it yet).
    pub fn set_window_end(&mut self, end: Time) {
        for s in &mut self.0 {
            s.window_end = end;
        }
    }

    /// A new instant: the sites that hold reservations move to it (their calendars forget
    /// the windows that ended).
    pub fn reach(&mut self, now: Time) {
        for s in &mut self.0 {
            debug_assert!(s.within_total(), "site over-allocated");
            if s.reserving() {
                s.advance(now);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, SimSite> {
        self.0.iter()
    }

    /// Every site, its integrals brought to `end`.
    pub fn finish(mut self, end: Time) -> Vec<SimSite> {
        for s in &mut self.0 {
            s.advance(end);
        }
        self.0
    }
}

impl std::ops::Index<usize> for Sites {
    type Output = SimSite;

    fn index(&self, site: usize) -> &SimSite {
        &self.0[site]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn local(size: u32) -> Local {
        Local {
            submit: 0,
            size,
            runtime: 1_000,
        }
    }

    #[test]
    fn local_jobs_run_fcfs_and_the_head_blocks() {
        let mut s = SimSite::new(10, vec![local(6), local(6), local(2)], i64::MAX);
        for i in 0..3 {
            s.local_arrives(i);
        }
        let (_, started) = s.dispatch(0);
        assert_eq!(started, vec![0]); // job 1 does not fit, and job 2 may not pass it
        assert_eq!(s.free(), 4);
        assert!(s.local_ends(0, 5));
        assert_eq!(s.dispatch(5).1, vec![1, 2]);
        assert_eq!(s.free(), 2);
    }

    #[test]
    fn a_waiting_component_goes_before_local_jobs() {
        let mut s = SimSite::new(10, vec![local(8), local(1)], i64::MAX);
        s.local_arrives(0);
        s.dispatch(0);
        assert!(!s.claim(LaunchId(1), 4));
        s.local_arrives(1);
        assert_eq!(s.dispatch(1), (vec![], vec![])); // job 1 would fit, but the launch waits
        s.local_ends(0, 2);
        assert_eq!(s.dispatch(2), (vec![LaunchId(1)], vec![1]));
        assert_eq!((s.busy_held, s.busy_local), (4, 1));
    }

    #[test]
    fn gp_kills_the_newest_local_jobs_first() {
        let mut s = SimSite::new(32, vec![local(8), local(8), local(8)], i64::MAX);
        for i in 0..3 {
            s.local_arrives(i);
        }
        s.dispatch(0);
        assert_eq!(s.kill_local(10, 3), 2);
        assert!(s.fates[2].killed && s.fates[1].killed && !s.fates[0].killed);
        assert_eq!(s.free(), 24);
        assert!(!s.local_ends(2, 9)); // its end event is stale
    }

    /// Sites moved only when they change integrate what sites moved at every instant do.
    #[test]
    fn sites_moved_at_their_changes_integrate_as_every_instant() {
        let mut lazy = Sites::new(vec![SimSite::new(10, vec![], 1_000); 3]);
        let mut eager = vec![SimSite::new(10, vec![], 1_000); 3];
        let mut rng = crate::workload::stream_of(7, crate::workload::Purpose::Failures, 0);
        let mut launch = 0;
        for now in (0..1_200).step_by(7) {
            for s in &mut eager {
                s.advance(now);
            }
            lazy.reach(now);
            let site = rng.random_range(0..3);
            let n = rng.random_range(1..4);
            if eager[site].free() >= n {
                launch += 1;
                assert!(eager[site].claim(LaunchId(launch), n));
                assert!(lazy.at(site, now).claim(LaunchId(launch), n));
                if rng.random_bool(0.5) {
                    eager[site].run(n);
                    lazy.at(site, now).run(n);
                }
            } else {
                let (running, held) = (eager[site].busy_running, eager[site].busy_held);
                for s in [&mut eager[site], lazy.at(site, now)] {
                    s.release(running, true);
                    s.release(held, false);
                }
            }
        }
        let lazy = lazy.finish(1_200);
        for (l, e) in lazy.iter().zip(&mut eager) {
            e.advance(1_200);
            assert_eq!(l.usage, e.usage);
        }
        assert!(lazy.iter().all(|s| s.usage.held > 0 && s.usage.running > 0));
    }

    #[test]
    fn usage_is_integrated_inside_the_window() {
        let mut s = SimSite::new(10, vec![local(4)], 100);
        s.local_arrives(0);
        s.dispatch(0);
        assert!(s.claim(LaunchId(1), 2));
        s.advance(50);
        s.run(2);
        s.advance(200); // clipped at 100
        assert_eq!(s.usage.local, 4 * 100);
        assert_eq!(s.usage.held, 2 * 50);
        assert_eq!(s.usage.running, 2 * 50);
    }
}
