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
///
/// What few jobs ever hold (a barrier hold time, ICP's claiming state and L, a retry
/// back-off) sits in one boxed `JobRare`, absent while all of it is empty, so that a queued
/// job stays small (issue 34 item 3: 320 bytes before). Read and change those through the
/// accessors. The serialized form is the one the fields had inline (see `JobStateForm`),
/// so snapshots keep their form.
#[derive(Debug, Clone)]
pub struct JobState {
    pub id: JobId,
    pub job: Job,
    pub phase: Phase,
    /// One per component while a run is under way; empty while the job is queued (they are
    /// made when it is placed, which keeps a queued job small). A boxed slice, 8 bytes less
    /// than a `Vec`: the list is made whole at placement and grows only by an edit.
    pub comps: Box<[CompState]>,
    pub record: JobRecord,
    /// Bumped whenever the job leaves a run, so that timers of the old run are ignored
    /// ([`JobState::generation`]; 32 bits keep the state in a smaller allocation class).
    generation: u32,
    /// While the job holds processors: its estimated end, its key in [`Active`].
    pub holding_until: Option<Time>,
    /// What few jobs hold (see the type's documentation).
    rare: Option<Box<JobRare>>,
    /// Submitted while the queue was full: waiting in the admission backlog, not yet in
    /// the queue (`scheduler::admission`).
    pub awaiting_admission: bool,
    /// A job held at the barrier (`hold_at_barrier`): its owner has committed this run.
    pub owner_committed: bool,
    /// A job held at the barrier: its owner was told this run is ready to commit.
    pub told_ready: bool,
}

/// A job's state that few jobs ever hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct JobRare {
    /// The barrier may not be released before this time (seed 001: jobs start at their
    /// deadline; seed 000: at their JST).
    hold_until: Option<Time>,
    /// Claiming state (ICP), when placed under it.
    claim: Option<ClaimState>,
    /// ICP's L for this job in thousandths; lowered each time claiming fails (seed 000 §3.2).
    l_permille: Option<u32>,
    /// A queued job waiting out its retry back-off: when it goes back into its queue (it
    /// is not in the queue until then).
    retry_at: Option<Time>,
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

/// [`JobState`]'s serialized form: its fields in the order and of the types they had when
/// they were all inline (snapshot forms 3 to 6), whatever the state keeps boxed.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename = "JobState")]
struct JobStateForm<J, C, R, K> {
    id: JobId,
    job: J,
    phase: Phase,
    comps: C,
    record: R,
    hold_until: Option<Time>,
    generation: u64,
    claim: Option<K>,
    l_permille: Option<u32>,
    holding_until: Option<Time>,
    retry_at: Option<Time>,
    awaiting_admission: bool,
    owner_committed: bool,
    told_ready: bool,
}

impl serde::Serialize for JobState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        JobStateForm {
            id: self.id,
            job: &self.job,
            phase: self.phase,
            comps: &self.comps,
            record: &self.record,
            hold_until: self.hold_until(),
            generation: u64::from(self.generation),
            claim: self.claim(),
            l_permille: self.l_permille(),
            holding_until: self.holding_until,
            retry_at: self.retry_at(),
            awaiting_admission: self.awaiting_admission,
            owner_committed: self.owner_committed,
            told_ready: self.told_ready,
        }
        .serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for JobState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<JobState, D::Error> {
        let f = JobStateForm::<Job, Box<[CompState]>, JobRecord, ClaimState>::deserialize(d)?;
        let mut j = JobState {
            id: f.id,
            job: f.job,
            phase: f.phase,
            comps: f.comps,
            record: f.record,
            generation: u32::try_from(f.generation)
                .map_err(|_| serde::de::Error::custom("a job's generation beyond u32"))?,
            holding_until: f.holding_until,
            rare: None,
            awaiting_admission: f.awaiting_admission,
            owner_committed: f.owner_committed,
            told_ready: f.told_ready,
        };
        crate::model::set_boxed(&mut j.rare, |r| {
            *r = JobRare {
                hold_until: f.hold_until,
                claim: f.claim,
                l_permille: f.l_permille,
                retry_at: f.retry_at,
            }
        });
        Ok(j)
    }
}

impl JobState {
    pub fn new(id: JobId, job: Job, now: Time) -> JobState {
        JobState {
            id,
            job,
            phase: Phase::Queued,
            comps: Box::default(),
            record: JobRecord {
                job: id,
                submit: now,
                ..JobRecord::default()
            },
            generation: 0,
            holding_until: None,
            rare: None,
            awaiting_admission: false,
            owner_committed: false,
            told_ready: false,
        }
    }

    /// Bumped whenever the job leaves a run, so that timers of the old run are ignored.
    pub fn generation(&self) -> u64 {
        u64::from(self.generation)
    }

    /// The job leaves its run: its timers are ignored from now on.
    pub fn bump_generation(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }

    /// The barrier may not be released before this time (seed 001: jobs start at their
    /// deadline; seed 000: at their JST).
    pub fn hold_until(&self) -> Option<Time> {
        self.rare.as_ref().and_then(|r| r.hold_until)
    }

    pub fn set_hold_until(&mut self, t: Option<Time>) {
        crate::model::set_boxed(&mut self.rare, |r| r.hold_until = t);
    }

    /// Claiming state (ICP), when placed under it.
    pub fn claim(&self) -> Option<&ClaimState> {
        self.rare.as_ref().and_then(|r| r.claim.as_ref())
    }

    pub fn claim_mut(&mut self) -> Option<&mut ClaimState> {
        self.rare.as_mut().and_then(|r| r.claim.as_mut())
    }

    pub fn set_claim(&mut self, c: Option<ClaimState>) {
        crate::model::set_boxed(&mut self.rare, |r| r.claim = c);
    }

    /// ICP's L for this job in thousandths; lowered each time claiming fails (seed 000 §3.2).
    pub fn l_permille(&self) -> Option<u32> {
        self.rare.as_ref().and_then(|r| r.l_permille)
    }

    pub fn set_l_permille(&mut self, l: Option<u32>) {
        crate::model::set_boxed(&mut self.rare, |r| r.l_permille = l);
    }

    /// A queued job waiting out its retry back-off: when it goes back into its queue (it
    /// is not in the queue until then).
    pub fn retry_at(&self) -> Option<Time> {
        self.rare.as_ref().and_then(|r| r.retry_at)
    }

    pub fn set_retry_at(&mut self, t: Option<Time>) {
        crate::model::set_boxed(&mut self.rare, |r| r.retry_at = t);
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

/// The boxed rare fields keep the serialized form of the inline ones (snapshot forms 3-6).
#[cfg(test)]
mod form_tests {
    use super::*;
    use crate::model::{Component, Flexible, JobKind};

    /// `JobState` as it was with every field inline: the reference form, a frozen copy kept
    /// apart from `JobStateForm` on purpose (a change to that form must fail here).
    #[derive(serde::Serialize)]
    struct InlineState<'a> {
        id: JobId,
        job: &'a Job,
        phase: Phase,
        comps: &'a [CompState],
        record: &'a JobRecord,
        hold_until: Option<Time>,
        generation: u64,
        claim: Option<Box<ClaimState>>,
        l_permille: Option<u32>,
        holding_until: Option<Time>,
        retry_at: Option<Time>,
        awaiting_admission: bool,
        owner_committed: bool,
        told_ready: bool,
    }

    fn state(rare: bool) -> JobState {
        let job = Job::new(JobKind::Flexible, vec![Component::new(6)]).with_limits(
            Some(Flexible {
                total: 6,
                min_component: Some(2),
            }),
            Some(9_000),
            None,
        );
        let mut j = JobState::new(7, job, 1_000);
        j.bump_generation();
        j.bump_generation();
        j.record.try_times.push(1_500);
        if rare {
            j.set_hold_until(Some(4_000));
            j.set_claim(Some(ClaimState {
                jpt: 1,
                ftt: 2,
                jst: 3,
                jct: 4,
            }));
            j.set_l_permille(Some(625));
            j.set_retry_at(Some(5_000));
        }
        j
    }

    #[test]
    fn a_state_is_written_as_its_fields_were_inline_and_read_back_whole() {
        for rare in [false, true] {
            let j = state(rare);
            let inline = InlineState {
                id: j.id,
                job: &j.job,
                phase: j.phase,
                comps: &j.comps,
                record: &j.record,
                hold_until: rare.then_some(4_000),
                generation: 2,
                claim: rare.then(|| {
                    Box::new(ClaimState {
                        jpt: 1,
                        ftt: 2,
                        jst: 3,
                        jct: 4,
                    })
                }),
                l_permille: rare.then_some(625),
                holding_until: None,
                retry_at: rare.then_some(5_000),
                awaiting_admission: false,
                owner_committed: false,
                told_ready: false,
            };
            let text = serde_json::to_string(&j).unwrap();
            assert_eq!(text, serde_json::to_string(&inline).unwrap());
            let back: JobState = serde_json::from_str(&text).unwrap();
            assert_eq!(serde_json::to_string(&back).unwrap(), text);
            assert_eq!(
                back.rare.is_some(),
                rare,
                "no box for a job without rare state"
            );
            assert_eq!(back.hold_until(), rare.then_some(4_000));
            assert_eq!(back.claim().map(|c| c.jct), rare.then_some(4));
            assert_eq!(back.generation(), 2);
            assert_eq!(back.record.try_times, [1_500]);
            assert_eq!(back.job.deadline(), Some(9_000));
            assert_eq!(back.job.flexible().and_then(|f| f.min_component), Some(2));
        }
    }

    #[test]
    fn emptied_rare_state_drops_its_box() {
        let mut j = state(true);
        j.set_hold_until(None);
        j.set_claim(None);
        j.set_l_permille(None);
        assert!(j.rare.is_some(), "the retry time is still held");
        j.set_retry_at(None);
        assert!(j.rare.is_none());
    }

    /// A queued job's state fits mimalloc's 192-byte class (320 before, issue 34 item 3).
    #[test]
    fn a_queued_state_is_small() {
        assert!(size_of::<JobState>() <= 192, "{}", size_of::<JobState>());
    }
}
