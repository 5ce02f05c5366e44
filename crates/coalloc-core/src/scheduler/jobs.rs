//! The scheduler's record of each job: where it is in its life, where its components run,
//! and the counters its limits are checked against.

use super::api::{JobId, JobRecord, LaunchId, SiteId, TransferId};
use crate::model::{Job, Millis, Time};

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Phase {
    /// In a placement queue.
    Queued,
    /// Placed; claiming its processors (ICP's claiming queue, seed 000 §3.2).
    Claiming,
    /// Components started; waiting for the required ones at the barrier (seed 002 §3.2).
    Starting,
    /// Committed: the barrier was released.
    Running,
    /// Ended: finished, failed or cancelled.
    Ended,
}

/// Where one component is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CompPhase {
    /// Not started (queued job, or waiting in a claiming try).
    Idle,
    /// Submitted to the site's resource manager, not yet running.
    Submitted,
    /// Running, not yet at the barrier.
    Started,
    /// At the barrier (or past it).
    Ready,
    /// Ended well.
    Finished,
    /// Failed and, for an optional component, left out.
    Failed,
    /// Deleted by an edit.
    Deleted,
}

/// One component's live state.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CompState {
    pub phase: CompPhase,
    pub launch: Option<LaunchId>,
    pub site: Option<SiteId>,
    /// Processors of the current launch.
    pub count: u32,
    /// When the current launch was submitted.
    pub launched_at: Option<Time>,
    /// The file transfer to this component's site that is under way, if any.
    pub transfer: Option<TransferId>,
}

impl CompState {
    pub fn idle() -> CompState {
        CompState {
            phase: CompPhase::Idle,
            launch: None,
            site: None,
            count: 0,
            launched_at: None,
            transfer: None,
        }
    }

    /// Its input file is still on its way.
    pub fn transferring(&self) -> bool {
        self.transfer.is_some()
    }

    /// Holds processors on a site now.
    pub fn live(&self) -> bool {
        matches!(
            self.phase,
            CompPhase::Submitted | CompPhase::Started | CompPhase::Ready
        )
    }
}

/// A job and everything the scheduler keeps about it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct JobState {
    pub id: JobId,
    pub job: Job,
    pub phase: Phase,
    /// One per component while a run is under way; empty while the job is queued (they are
    /// made when it is placed, which keeps a queued job small).
    pub comps: Vec<CompState>,
    pub record: JobRecord,
    /// The barrier may not be released before this time (seed 001: jobs start at their
    /// deadline; seed 000: at their JST).
    pub hold_until: Option<Time>,
    /// Bumped whenever the job leaves a run, so that timers of the old run are ignored.
    pub generation: u64,
    /// Claiming state (ICP), when placed under it.
    pub claim: Option<Box<ClaimState>>,
    /// ICP's L for this job in thousandths; lowered each time claiming fails (seed 000 §3.2).
    pub l_permille: Option<u32>,
    /// While the job holds processors: its estimated end, its key in [`Active`].
    pub holding_until: Option<Time>,
    /// A queued job waiting out its retry back-off: when it goes back into its queue (it
    /// is not in the queue until then).
    pub retry_at: Option<Time>,
    /// Submitted while the queue was full: waiting in the admission backlog, not yet in
    /// the queue ([`super::admission`]).
    pub awaiting_admission: bool,
    /// A job held at the barrier (`hold_at_barrier`): its owner has committed this run.
    pub owner_committed: bool,
    /// A job held at the barrier: its owner was told this run is ready to commit.
    pub told_ready: bool,
}

/// ICP's numbers for a placed job (seed 000 §3.2): all in milliseconds on the job clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClaimState {
    /// Job placement time.
    pub jpt: Time,
    /// Estimated file transfer time (max over components).
    pub ftt: Millis,
    /// Job start time = JPT + FTT.
    pub jst: Time,
    /// Next claiming try.
    pub jct: Time,
}

impl JobState {
    pub fn new(id: JobId, job: Job, now: Time) -> JobState {
        JobState {
            id,
            job,
            phase: Phase::Queued,
            comps: Vec::new(),
            record: JobRecord {
                job: id,
                submit: now,
                ..JobRecord::default()
            },
            hold_until: None,
            generation: 0,
            claim: None,
            l_permille: None,
            holding_until: None,
            retry_at: None,
            awaiting_admission: false,
            owner_committed: false,
            told_ready: false,
        }
    }

    /// Whether component `i` was deleted from the current run.
    pub fn is_deleted(&self, i: usize) -> bool {
        self.comps
            .get(i)
            .is_some_and(|c| c.phase == CompPhase::Deleted)
    }

    /// Components that must be at the barrier before commit: not optional, not deleted, not
    /// failed-and-left-out.
    pub fn required_ready(&self) -> bool {
        self.job
            .components
            .iter()
            .zip(&self.comps)
            .all(|(c, s)| match s.phase {
                // Left out of the job: neither it nor its file is waited for.
                CompPhase::Deleted | CompPhase::Failed => true,
                CompPhase::Ready | CompPhase::Finished => !s.transferring(),
                _ => c.start_type == crate::model::StartType::Optional,
            })
    }

    /// Every component that ran has ended, and none is still live.
    pub fn all_done(&self) -> bool {
        self.comps.iter().all(|s| !s.live())
    }

    pub fn ended(&self) -> bool {
        self.phase == Phase::Ended
    }
}

/// Jobs by number. The scheduler numbers jobs densely from 1, so a deque indexed by number
/// (less the forgotten ones before the first it holds) holds them; each is boxed so that
/// growing the deque moves only pointers. An ended job is kept unless the scheduler forgets
/// it ([`JobTable::forget`], under `SchedulerConfig::forget_ended`), which empties its slot;
/// empty slots at the front are dropped, so a server that has run millions of jobs keeps no
/// slot for those that left, only from its oldest live job on (issue 23).
///
/// Serialized, the table is its `base` only: a snapshot carries the slots apart, in runs
/// that can be written and read separately ([`super::snapshot::JobSlotsRef`]).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct JobTable {
    /// Jobs numbered up to this one were all forgotten and have no slot.
    base: JobId,
    // Boxed on purpose: spare capacity then costs 8 bytes a slot, not 520.
    #[allow(clippy::vec_box)]
    #[serde(skip)]
    jobs: std::collections::VecDeque<Option<Box<JobState>>>,
}

/// A job table's slot: a job, or `None` for one forgotten.
pub(crate) type Slot = Option<Box<JobState>>;

impl JobTable {
    fn slot(&self, id: JobId) -> Option<usize> {
        usize::try_from(id.checked_sub(self.base + 1)?).ok()
    }

    pub fn get(&self, id: &JobId) -> Option<&JobState> {
        self.jobs.get(self.slot(*id)?)?.as_deref()
    }

    pub fn get_mut(&mut self, id: &JobId) -> Option<&mut JobState> {
        let slot = self.slot(*id)?;
        self.jobs.get_mut(slot)?.as_deref_mut()
    }

    /// Room for `jobs` jobs in all.
    pub fn reserve(&mut self, jobs: usize) {
        self.jobs.reserve(jobs.saturating_sub(self.len()));
    }

    /// Add the job numbered next.
    pub fn insert(&mut self, id: JobId, job: JobState) {
        debug_assert_eq!(
            self.slot(id),
            Some(self.jobs.len()),
            "jobs are numbered densely"
        );
        self.jobs.push_back(Some(Box::new(job)));
    }

    /// Drop job `id`'s state; its number is not given out again.
    pub fn forget(&mut self, id: JobId) {
        if let Some(slot) = self.slot(id).and_then(|i| self.jobs.get_mut(i)) {
            *slot = None;
        }
        while self.jobs.front().is_some_and(Option::is_none) {
            self.jobs.pop_front();
            self.base += 1;
        }
        // A deque that shrank to a small part of its room gives the rest back.
        if self.jobs.capacity() > 1024 && self.jobs.len() < self.jobs.capacity() / 4 {
            self.jobs.shrink_to(self.jobs.len() * 2);
        }
    }

    /// Slots `from..to` (by position after `base`), to serialize.
    pub(crate) fn slots(
        &self,
        from: usize,
        to: usize,
    ) -> std::collections::vec_deque::Iter<'_, Slot> {
        self.jobs.range(from..to)
    }

    /// How many slots the table holds.
    pub(crate) fn slot_count(&self) -> usize {
        self.jobs.len()
    }

    /// The position of the slot of the `k`-th job not forgotten (from 0), or the number of
    /// slots if there are not that many.
    pub(crate) fn slot_of_job(&self, k: usize) -> usize {
        self.jobs
            .iter()
            .enumerate()
            .filter(|(_, j)| j.is_some())
            .nth(k)
            .map_or(self.jobs.len(), |(i, _)| i)
    }

    /// The slots of a table read back without them.
    pub(crate) fn set_slots(&mut self, slots: Vec<Slot>) {
        self.jobs = slots.into();
    }

    /// Every job not forgotten, by number.
    pub fn values(&self) -> impl Iterator<Item = &JobState> {
        self.jobs.iter().filter_map(|j| j.as_deref())
    }

    /// Every job not forgotten, by number, to change.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut JobState> {
        self.jobs.iter_mut().filter_map(|j| j.as_deref_mut())
    }

    /// Every job not forgotten numbered after `after`, by number: a page of a listing
    /// starts where the last one stopped without walking the jobs before it.
    pub fn values_after(&self, after: JobId) -> impl Iterator<Item = &JobState> {
        let from = usize::try_from(after.saturating_sub(self.base))
            .unwrap_or(usize::MAX)
            .min(self.jobs.len());
        self.jobs.range(from..).filter_map(|j| j.as_deref())
    }

    /// How many jobs were numbered (forgotten ones included).
    pub fn len(&self) -> usize {
        self.base as usize + self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;

    fn job(id: JobId) -> JobState {
        JobState::new(id, Job::new(crate::model::JobKind::Unordered, vec![]), 0)
    }

    #[test]
    fn forgotten_jobs_at_the_front_leave_no_slot_and_numbers_still_find_jobs() {
        let mut t = JobTable::default();
        for id in 1..=5 {
            t.insert(id, job(id));
        }
        t.forget(2);
        assert_eq!((t.base, t.jobs.len()), (0, 5), "a hole in the middle stays");
        t.forget(1);
        assert_eq!((t.base, t.jobs.len()), (2, 3), "1 and 2 left together");
        assert!(t.get(&1).is_none() && t.get(&2).is_none());
        assert_eq!(t.get(&4).map(|j| j.id), Some(4));
        assert_eq!(t.len(), 5);
        t.insert(6, job(6));
        let after: Vec<JobId> = t.values_after(3).map(|j| j.id).collect();
        assert_eq!(after, vec![4, 5, 6]);
        let after: Vec<JobId> = t.values_after(0).map(|j| j.id).collect();
        assert_eq!(after, vec![3, 4, 5, 6]);
        for id in 3..=6 {
            t.forget(id);
        }
        assert_eq!((t.base, t.jobs.len(), t.len()), (6, 0, 6));
        t.insert(7, job(7));
        assert_eq!(t.get(&7).map(|j| j.id), Some(7));
    }
}

impl std::ops::Index<&JobId> for JobTable {
    type Output = JobState;

    fn index(&self, id: &JobId) -> &JobState {
        self.get(id).expect("a job the scheduler numbered")
    }
}

/// The jobs that hold processors (starting or running) by estimated end, so that policies
/// can look at them without scanning every job ever submitted, and EASY's shadow time walks
/// them in end order without sorting them (see [`crate::queue::PassCtx::running_by_end`]);
/// with a version that moves at every [`Active::set`]: a job was placed, started holding
/// processors, committed, was edited or left (see [`crate::queue::PassCtx::running_version`]).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Active {
    /// `(estimated end, job)`; a job's key is kept in its [`JobState::holding_until`].
    ends: std::collections::BTreeSet<(Time, JobId)>,
    version: u64,
}

impl Active {
    /// Job `id` held processors until `old` (estimated; `None`: it held none) and now holds
    /// them until `new`. Called after every change to a job's phase, start or estimate.
    pub fn set(&mut self, id: JobId, old: Option<Time>, new: Option<Time>) {
        if old != new {
            if let Some(old) = old {
                self.ends.remove(&(old, id));
            }
            if let Some(new) = new {
                self.ends.insert((new, id));
            }
        }
        self.version += 1;
    }

    /// The jobs that hold processors, by estimated end, then number.
    pub fn by_end(&self) -> impl Iterator<Item = (Time, JobId)> + '_ {
        self.ends.iter().copied()
    }

    pub fn version(&self) -> u64 {
        self.version
    }
}
