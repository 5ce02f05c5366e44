//! The scheduler's record of each job: where it is in its life, where its components run,
//! and the counters its limits are checked against.

use super::api::{JobId, JobRecord, LaunchId, SiteId, TransferId};
use crate::model::{Job, Millis, Time};
use crate::paged::Paged;

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

/// Jobs by number, in pages ([`crate::paged`]): the scheduler numbers jobs densely from 1,
/// each job is boxed (an empty slot costs 8 bytes, not a job's size). An ended job is kept
/// unless the scheduler forgets it ([`JobTable::forget`], under
/// `SchedulerConfig::forget_ended`), which empties its slot; a page whose jobs were all
/// forgotten is dropped. So a server that has run millions of jobs keeps nothing for those
/// that left (issue 23, item 2), even when a job queued long ago still holds a page among
/// them: one page-table entry per page of numbers in between.
///
/// Serialized, the table is how many jobs were numbered: a snapshot carries the jobs apart,
/// in runs that can be written and read separately ([`super::snapshot::JobSlotsRef`]).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct JobTable {
    /// How many jobs were numbered (the next is `numbered + 1`).
    numbered: JobId,
    #[serde(skip)]
    jobs: Paged<Box<JobState>>,
}

impl JobTable {
    pub fn get(&self, id: &JobId) -> Option<&JobState> {
        self.jobs.get(*id).map(|j| &**j)
    }

    pub fn get_mut(&mut self, id: &JobId) -> Option<&mut JobState> {
        self.jobs.get_mut(*id).map(|j| &mut **j)
    }

    /// Room for `jobs` jobs in all.
    pub fn reserve(&mut self, jobs: usize) {
        self.jobs.reserve(jobs as u64);
    }

    /// Add the job numbered next.
    pub fn insert(&mut self, id: JobId, job: JobState) {
        debug_assert_eq!(id, self.numbered + 1, "jobs are numbered densely");
        self.numbered = self.numbered.max(id);
        self.jobs.insert(id, Box::new(job));
    }

    /// Drop job `id`'s state; its number is not given out again.
    pub fn forget(&mut self, id: JobId) {
        self.jobs.remove(id);
    }

    /// How many jobs the table holds (not forgotten).
    pub(crate) fn live(&self) -> usize {
        self.jobs.len()
    }

    /// The jobs of ranks `from..to` (the `k`-th job not forgotten, by number, from 0), to
    /// serialize.
    pub(crate) fn ranks(&self, from: usize, to: usize) -> impl Iterator<Item = &JobState> {
        self.jobs.ranks(from, to).map(|j| &**j)
    }

    /// A table of the previous snapshot form (3) read back: it held the number of the
    /// jobs forgotten before its first slot where this form holds how many were numbered;
    /// `slots` more were numbered after them (a job or an empty slot each).
    pub(crate) fn numbered_after_base(&mut self, slots: u64) {
        self.numbered = self.numbered.saturating_add(slots);
    }

    /// The jobs of a table read back without them, in order of number (boxed already:
    /// each is moved into its slot as it is).
    #[allow(clippy::vec_box)]
    pub(crate) fn set_jobs(&mut self, jobs: Vec<Box<JobState>>) {
        self.jobs.clear();
        for j in jobs {
            self.jobs.insert(j.id, j);
        }
    }

    /// Every job not forgotten, by number.
    pub fn values(&self) -> impl Iterator<Item = &JobState> {
        self.jobs.values().map(|j| &**j)
    }

    /// Every job not forgotten, by number, to change.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut JobState> {
        self.jobs.values_mut().map(|j| &mut **j)
    }

    /// Every job not forgotten numbered after `after`, by number: a page of a listing
    /// starts where the last one stopped without walking the jobs before it.
    pub fn values_after(&self, after: JobId) -> impl Iterator<Item = &JobState> {
        self.jobs
            .values_from_page_of(after)
            .map(|j| &**j)
            .skip_while(move |j| j.id <= after)
    }

    /// How many jobs were numbered (forgotten ones included).
    pub fn len(&self) -> usize {
        self.numbered as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;
    use crate::paged::PAGE;

    fn job(id: JobId) -> JobState {
        JobState::new(id, Job::new(crate::model::JobKind::Unordered, vec![]), 0)
    }

    #[test]
    fn forgotten_jobs_leave_no_page_and_numbers_still_find_jobs() {
        let mut t = JobTable::default();
        let n = 5 * PAGE;
        for id in 1..=n {
            t.insert(id, job(id));
        }
        assert_eq!(
            (t.jobs.table_len(), t.live(), t.len()),
            (6, n as usize, n as usize)
        );
        // A hole in a page keeps the page; a page emptied goes, and so do the empty pages
        // at the front.
        t.forget(2);
        assert_eq!(t.jobs.pages_held(), 6);
        for id in PAGE..2 * PAGE {
            t.forget(id);
        }
        assert!(
            !t.jobs.holds_page_of(PAGE),
            "an emptied page in the middle is dropped"
        );
        assert_eq!(t.jobs.first_page(), 0);
        for id in 1..PAGE {
            t.forget(id);
        }
        assert_eq!(t.jobs.first_page(), 2, "pages 0 and 1 left together");
        assert!(t.get(&1).is_none() && t.get(&(PAGE + 1)).is_none());
        assert_eq!(t.get(&(2 * PAGE + 3)).map(|j| j.id), Some(2 * PAGE + 3));
        assert_eq!(t.len(), n as usize);
        t.insert(n + 1, job(n + 1));
        let after: Vec<JobId> = t.values_after(n - 2).map(|j| j.id).collect();
        assert_eq!(after, vec![n - 1, n, n + 1]);
        let all: Vec<JobId> = t.values_after(0).map(|j| j.id).collect();
        assert_eq!(all, (2 * PAGE..=n + 1).collect::<Vec<_>>());
        assert_eq!(t.values().count(), t.live());
        // Ranks skip whole pages by their counts.
        let ranked: Vec<JobId> = t
            .ranks(PAGE as usize - 1, PAGE as usize + 2)
            .map(|j| j.id)
            .collect();
        assert_eq!(ranked, vec![3 * PAGE - 1, 3 * PAGE, 3 * PAGE + 1]);
        assert_eq!(t.ranks(0, usize::MAX).count(), t.live());
        // Everything forgotten: no page is left; the next job makes one.
        for id in 1..=n + 1 {
            t.forget(id);
        }
        assert_eq!(
            (t.jobs.table_len(), t.live(), t.len()),
            (0, 0, n as usize + 1)
        );
        t.insert(n + 2, job(n + 2));
        assert_eq!(t.get(&(n + 2)).map(|j| j.id), Some(n + 2));
        assert_eq!(t.jobs.table_len(), 1);
        // Read back from its jobs.
        let mut back = JobTable {
            numbered: t.numbered,
            ..JobTable::default()
        };
        back.set_jobs(vec![Box::new(job(7)), Box::new(job(3 * PAGE))]);
        assert_eq!(
            back.values().map(|j| j.id).collect::<Vec<_>>(),
            vec![7, 3 * PAGE]
        );
        assert_eq!((back.live(), back.jobs.table_len()), (2, 4));
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
