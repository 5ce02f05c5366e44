//! Queue policies: which queued job the scheduler tries to start next, and when it stops
//! trying. Each policy is a module named after it:
//!
//! - [`koala`]: KOALA's high- and low-priority placement queues scanned S:1 (seed 000 §3.1).
//! - [`backfill`]: EASY and conservative backfilling with multi-site reservations (seed 003
//!   §3.2.2).
//! - [`fcfs`]: First Come First Served and Fit Processor First Served (seed 003 §3.2.2,
//!   §4.3.4).
//! - [`rpp`]: the Repeated Placement Policy for jobs with deadlines, with Wait-X and the
//!   GP / LP priorities (seed 001 §2.2).
//! - [`koala_c`]: KOALA-C's policies for one set of sites — FF, RR, SJF (with the runtime
//!   predictor of [`crate::predictor`]), SJF-ideal and HSDF (seed 004 §IV-A).
//! - [`tags`]: KOALA-C's TAGS-chain and TAGS-sets, with runtime limits per site or set of
//!   sites (seed 004 §IV-B, §IV-C).
//!
//! A policy owns the order of the queued jobs; the scheduler owns everything else and offers
//! it through [`PassCtx`] during a scheduling pass.

pub mod backfill;
pub mod fcfs;
pub mod koala;
pub mod koala_c;
pub mod rpp;
pub mod saved;
pub mod tags;

use crate::model::{Job, Millis, Time};
use crate::placement::{Fit, SitesOf};
use crate::scheduler::api::{JobId, JobRecord, SiteId};

/// A job that holds processors now, as backfilling sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunningJob {
    pub job: JobId,
    /// When it is expected to end: its start plus its runtime estimate.
    pub end: Time,
    /// Processors it holds, per site.
    pub holds: Holds,
}

/// Processors per site, `(site, processors)`, one entry per site: the first entry kept
/// inline, so that a job on one site (most of them) costs no allocation when a pass lists
/// the running jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Holds {
    first: Option<(SiteId, u32)>,
    more: Vec<(SiteId, u32)>,
}

impl Holds {
    /// Add `n` processors on `site`.
    pub fn add(&mut self, site: SiteId, n: u32) {
        let entry = match &mut self.first {
            None => {
                self.first = Some((site, n));
                return;
            }
            Some(first) if first.0 == site => Some(first),
            Some(_) => self.more.iter_mut().find(|(s, _)| *s == site),
        };
        match entry {
            Some((_, held)) => *held += n,
            None => self.more.push((site, n)),
        }
    }

    /// Every `(site, processors)`, in the order the sites were first added.
    pub fn iter(&self) -> impl Iterator<Item = (SiteId, u32)> + '_ {
        self.first.into_iter().chain(self.more.iter().copied())
    }
}

impl FromIterator<(SiteId, u32)> for Holds {
    fn from_iter<I: IntoIterator<Item = (SiteId, u32)>>(iter: I) -> Holds {
        let mut holds = Holds::default();
        for (site, n) in iter {
            holds.add(site, n);
        }
        holds
    }
}

/// One site as a pass sees it ([`PassCtx::site_now`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SiteNow {
    pub idle: u32,
    pub usable: bool,
    /// Processors busy with jobs that did not come through coalloc.
    pub local: u32,
}

/// Every site now, in site order ([`PassCtx::site_now`] until it says there are no more).
pub(crate) fn sites_now(ctx: &dyn PassCtx) -> impl Iterator<Item = SiteNow> + '_ {
    (0..).map_while(|i| ctx.site_now(i))
}

/// How to start a job, beyond the configured defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StartOptions {
    /// Only these sites (by [`SiteId`]) may be used.
    pub allowed: Option<Vec<bool>>,
    /// This fit instead of the configured one.
    pub fit: Option<Fit>,
    /// Start the components now but release the barrier no earlier than this (seed 001:
    /// processors are claimed at placement, the job starts at its deadline).
    pub hold_until: Option<Time>,
    /// Count processors busy with local jobs as free and kill as many local jobs as the
    /// placement needs (seed 001's GP policy).
    pub kill_local: bool,
}

/// What a policy may ask of the scheduler during a pass.
pub trait PassCtx {
    /// The time of the pass.
    fn now(&self) -> Time;
    /// A queued job.
    fn job(&self, id: JobId) -> &Job;
    /// A job's timestamps and counters.
    fn record(&self, id: JobId) -> &JobRecord;
    /// Whether the job ended (finished, failed or cancelled), or is forgotten already. Its
    /// record cannot tell: a core that forgets ended jobs gives the record away at the end.
    fn ended(&self, id: JobId) -> bool;
    /// Place the job with the configured fit (on the allowed sites only, if given) and, if
    /// it fits, start it. Returns whether it started.
    fn try_start(&mut self, id: JobId, allowed: Option<&[bool]>) -> bool {
        self.start_with(
            id,
            &StartOptions {
                allowed: allowed.map(<[bool]>::to_vec),
                ..StartOptions::default()
            },
        )
    }
    /// [`PassCtx::try_start`] with options.
    fn start_with(&mut self, id: JobId, options: &StartOptions) -> bool;
    /// [`PassCtx::try_start`] when the policy already has the placement it would make:
    /// `placed` is what [`PassCtx::place_on`] gave for the idle processors now and the usable
    /// sites (restricted to `allowed`, if given), so the job is not placed again. The
    /// default places it again.
    fn start_placed(
        &mut self,
        id: JobId,
        allowed: Option<&[bool]>,
        placed: &[(SiteId, u32)],
    ) -> bool {
        let _ = placed;
        self.try_start(id, allowed)
    }
    /// A number that changes whenever a site gains idle processors or becomes usable, or a
    /// queued job is edited. A job that could not be placed is still unplaceable as long as
    /// it has not changed, so policies can skip jobs they already tried at this epoch.
    fn epoch(&self) -> u64;
    /// Changes whenever a job starts or stops holding processors, or commits (its estimated
    /// end then counts from its start): whatever changes [`PassCtx::running`]. Submissions
    /// do not change it.
    fn running_version(&self) -> u64;
    /// Changes whenever a job ends other than by finishing (it failed or was cancelled):
    /// the ends a policy is not told of by [`QueuePolicy::finished`]. Counts from 0 in every
    /// process (not in a snapshot).
    fn unfinished_ends(&self) -> u64;
    /// Whether the job could be placed now, without starting it.
    fn fits(&self, id: JobId, allowed: Option<&[bool]>) -> bool;
    /// Idle processors per site now.
    fn idle(&self) -> Vec<u32>;
    /// Which sites are usable now.
    fn usable(&self) -> Vec<bool>;
    /// Processors per site busy with jobs that did not come through coalloc.
    fn local_busy(&self) -> Vec<u32>;
    /// Site `site` now, as [`PassCtx::idle`], [`PassCtx::usable`] and
    /// [`PassCtx::local_busy`] see it (`None` past the last site): for a policy that compares
    /// or sums them without copying them.
    fn site_now(&self, site: SiteId) -> Option<SiteNow>;
    /// Jobs that hold processors now (starting or running), by estimated end, then number.
    fn running(&self) -> Vec<RunningJob> {
        self.running_by_end().collect()
    }
    /// [`PassCtx::running`] by estimated end, then job number, taken one at a time from an
    /// index the scheduler keeps (a walk that stops early costs only the jobs it took).
    fn running_by_end(&self) -> Box<dyn Iterator<Item = RunningJob> + '_>;
    /// [`PassCtx::running_by_end`] without building a [`RunningJob`] for each:
    /// `visit(end, site, processors)` for each part of a running job's holdings (a job's
    /// processors on one site may come in several parts), jobs by estimated end, then
    /// number, until `visit` returns `false`.
    fn visit_running_by_end(&self, visit: &mut dyn FnMut(Time, SiteId, u32) -> bool) {
        for r in self.running_by_end() {
            for (site, n) in r.holds.iter() {
                if !visit(r.end, site, n) {
                    return;
                }
            }
        }
    }
    /// The runtime estimate backfilling uses: the job's estimate, else its longest wall-time
    /// limit, else the configured default.
    fn estimate(&self, id: JobId) -> Millis;
    /// Where the job would go if the sites had these idle processors: `(site, processors)`
    /// per component, or `None` if it would not fit.
    fn place_on(&self, id: JobId, idle: &[u32], usable: &[bool]) -> Option<SitesOf>;
    /// Whether the job could be placed on `sites` alone with `fit` (the configured one when
    /// `None`) if they were empty and usable: `false` means it can never start there.
    fn fits_when_empty(&self, id: JobId, sites: &[SiteId], fit: Option<Fit>) -> bool;
    /// End a queued job that the policy gives up on (a try limit); the policy has already
    /// dropped it from its queue.
    fn fail(&mut self, id: JobId, reason: String);
}

/// A queue policy. The scheduler calls `push` when a job enters the queue (at submission or
/// when it returns after an abort), `remove` when it leaves it for any reason but a start
/// from `pass`, and `pass` whenever something changed that could let a job start.
pub trait QueuePolicy: std::fmt::Debug + Send {
    /// The policy's configuration name.
    fn name(&self) -> &'static str;
    /// A job enters the queue.
    fn push(&mut self, id: JobId, job: &Job, now: Time);
    /// A job leaves the queue without being started by `pass` (cancelled, failed).
    fn remove(&mut self, id: JobId);
    /// Jobs in the queue.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// One scheduling pass: try to start jobs, in the policy's order.
    fn pass(&mut self, ctx: &mut dyn PassCtx);
    /// When the policy wants a pass even if nothing else happens (periodic scans).
    fn next_wakeup(&self) -> Option<Time> {
        None
    }
    /// Whether no pass can start anything before a site gains processors or becomes usable
    /// ([`PassCtx::epoch`]), a job enters or leaves the queue, or the time
    /// [`QueuePolicy::unblocks_at`] comes: the policy's last pass left every job it may try
    /// blocked. Such passes do nothing, so the scheduler skips the policy's
    /// [`QueuePolicy::next_wakeup`] meanwhile. `false` by default.
    fn blocked(&self) -> bool {
        false
    }
    /// While [`QueuePolicy::blocked`], when a pass may start something though nothing
    /// changed: HSDF's blocked head is overtaken (seed 004 §IV-A 4). The scheduler wakes the
    /// policy then. `None` (the default): not before something changes.
    fn unblocks_at(&self) -> Option<Time> {
        None
    }
    /// A queued job was edited (its components changed in place; it keeps its place).
    fn edited(&mut self, _id: JobId, _job: &Job) {}
    /// A job ran for this long and finished (for runtime predictors).
    fn finished(&mut self, _id: JobId, _job: &Job, _runtime: Millis) {}
    /// The fit this policy always places with, if it overrides the configured one (seed
    /// 004's policies use first-fit). Submissions are checked against it.
    fn fit(&self) -> Option<Fit> {
        None
    }
    /// The sites a new job is confined to until it moves on, one list per place it may
    /// enter (TAGS: each chain's first site, or the first set); empty (the default) when a
    /// job may use every site. A job that cannot fit one of them even when empty would wait
    /// there for good, so submission refuses it.
    fn entry_sites(&self) -> Vec<&[crate::scheduler::api::SiteId]> {
        Vec::new()
    }
    /// How long the job may run after commit before it is killed and queued again (TAGS,
    /// seed 004 §IV-B, §IV-C). Asked once per commit.
    fn runtime_limit(&self, _id: JobId) -> Option<Millis> {
        None
    }
    /// The queued jobs in the order the policy would try them, each with the sites it may
    /// use there (`None` = any): the demand On-Demand provisioning leases for (seed 004
    /// §III-B). `sites` is the number of sites. `None` (the default) lets the scheduler take
    /// every queued job in submission order, on any site.
    fn demand(&self, _sites: usize) -> Option<Vec<Demand>> {
        None
    }
    /// A hint from the driver: about `jobs` jobs will be submitted in all, numbered from 1
    /// (a trace replay knows), so per-job tables may be sized once instead of growing.
    fn reserve(&mut self, _jobs: usize) {}
    /// The policy's state for a snapshot of the scheduler; `None` (the default, a policy
    /// from outside this crate) when it cannot be saved, and the scheduler then takes none.
    fn saved(&self) -> Option<saved::SavedRef<'_>> {
        None
    }
}

/// One queued job as provisioning sees it: its number and the sites it may use (`None` =
/// any), one flag per site.
pub type Demand = (JobId, Option<Vec<bool>>);

/// Jobs in arrival order, where arriving is entering the queue: a job that comes back after
/// an abort goes to the tail (seed 003 §4.3.4). Shared by the policies that scan in arrival
/// order. Each job may carry what its policy keeps of it (`T`; EASY keeps the job's
/// [`Demand`](backfill::Demand), so that its scan rejects a job without looking the job up).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(from = "SavedArrivals<T>")]
pub struct Arrivals<T = ()> {
    /// `(arrival sequence, job, payload)` in arrival order. Sequence numbers only grow, so
    /// the deque stays sorted by them: a job is found by binary search, the head leaves in
    /// `O(1)` and a job behind it by shifting the shorter side (contiguous, where a tree
    /// would chase pointers on every step of a scan).
    queue: std::collections::VecDeque<(u64, JobId, T)>,
    /// Job → arrival sequence, for queued jobs, in pages ([`crate::paged`]: not a slot
    /// for every job ever submitted); rebuilt from `queue` when read back.
    #[serde(skip)]
    seq_of: crate::paged::Paged<u64>,
    next_seq: u64,
}

/// [`Arrivals`] as a snapshot holds it: the same fields but the index, in the same order
/// (a snapshot of the previous form, read under
/// [`reading_previous_form`](crate::scheduler::snapshot::reading_previous_form), has the
/// index, a `Vec<u64>`, between them: it is read and dropped).
struct SavedArrivals<T> {
    queue: std::collections::VecDeque<(u64, JobId, T)>,
    next_seq: u64,
}

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for SavedArrivals<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        struct Fields<T>(bool, std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Fields<T> {
            type Value = SavedArrivals<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a queue's arrival order")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<SavedArrivals<T>, A::Error> {
                let missing = |n| A::Error::invalid_length(n, &"the arrival order's fields");
                let queue = seq.next_element()?.ok_or_else(|| missing(0))?;
                if self.0 {
                    let _index: Vec<u64> = seq.next_element()?.ok_or_else(|| missing(1))?;
                }
                let next_seq = seq.next_element()?.ok_or_else(|| missing(2))?;
                Ok(SavedArrivals { queue, next_seq })
            }
            /// A self-describing format's map (by field name; the index, if any, skipped).
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<SavedArrivals<T>, M::Error> {
                let (mut queue, mut next_seq) = (None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "queue" => queue = Some(map.next_value()?),
                        "next_seq" => next_seq = Some(map.next_value()?),
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(SavedArrivals {
                    queue: queue.ok_or_else(|| M::Error::missing_field("queue"))?,
                    next_seq: next_seq.ok_or_else(|| M::Error::missing_field("next_seq"))?,
                })
            }
        }
        let previous = crate::scheduler::snapshot::reading_previous();
        let fields: &[&str] = if previous {
            &["queue", "seq_of", "next_seq"]
        } else {
            &["queue", "next_seq"]
        };
        d.deserialize_struct(
            "Arrivals",
            fields,
            Fields::<T>(previous, std::marker::PhantomData),
        )
    }
}

impl<T> From<SavedArrivals<T>> for Arrivals<T> {
    fn from(s: SavedArrivals<T>) -> Self {
        let mut seq_of = crate::paged::Paged::default();
        for &(seq, id, _) in &s.queue {
            seq_of.insert(id, seq);
        }
        Arrivals {
            queue: s.queue,
            seq_of,
            next_seq: s.next_seq,
        }
    }
}

impl<T> Default for Arrivals<T> {
    fn default() -> Self {
        Arrivals {
            queue: std::collections::VecDeque::new(),
            seq_of: Default::default(),
            next_seq: 0,
        }
    }
}

impl Arrivals<()> {
    /// Append a job (moving it to the tail if it is queued already).
    pub fn push(&mut self, id: JobId) {
        self.push_with(id, ());
    }
}

impl<T> Arrivals<T> {
    /// Append a job with its payload (moving it to the tail if it is queued already).
    pub fn push_with(&mut self, id: JobId, payload: T) {
        self.remove(id);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.push_back((seq, id, payload));
        self.seq_of.insert(id, seq);
    }

    pub fn remove(&mut self, id: JobId) {
        if let Some(seq) = self.seq(id) {
            let at = self.position_from(seq);
            debug_assert_eq!(self.queue.get(at).map(|e| e.0), Some(seq));
            self.queue.remove(at);
            self.seq_of.remove(id);
        }
    }

    /// Where the first job at or after sequence `seq` is in the arrival order (0 is the
    /// head; the length if none is).
    pub fn position_from(&self, seq: u64) -> usize {
        match self.queue.front() {
            // Most scans start at the head.
            Some(&(first, ..)) if seq <= first => 0,
            _ => self.queue.partition_point(|e| e.0 < seq),
        }
    }

    /// Size the job-number index for job numbers up to `jobs` ([`QueuePolicy::reserve`]).
    pub fn reserve(&mut self, jobs: usize) {
        self.seq_of.reserve(jobs as u64);
    }

    /// The job at position `at` of the arrival order (0 is the head), with its sequence
    /// number and payload: for a scan that walks the queue by position.
    pub fn at(&self, at: usize) -> Option<(u64, JobId, &T)> {
        self.queue.get(at).map(|(s, id, p)| (*s, *id, p))
    }

    /// A queued job's arrival sequence.
    fn seq(&self, id: JobId) -> Option<u64> {
        self.seq_of.get(id).copied()
    }

    /// A queued job's payload, to change it in place.
    pub fn payload_mut(&mut self, id: JobId) -> Option<&mut T> {
        let seq = self.seq(id)?;
        let at = self.position_from(seq);
        self.queue.get_mut(at).map(|(_, _, p)| p)
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn contains(&self, id: JobId) -> bool {
        self.seq(id).is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The sequence number the next arrival gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The head's sequence number.
    pub fn head_seq(&self) -> Option<u64> {
        self.queue.front().map(|e| e.0)
    }

    /// The first job at or after sequence `seq`.
    pub fn first_from(&self, seq: u64) -> Option<(u64, JobId)> {
        self.queue
            .get(self.position_from(seq))
            .map(|&(s, id, _)| (s, id))
    }

    /// The queued jobs in arrival order, as they are now.
    pub fn snapshot(&self) -> Vec<JobId> {
        self.since(0).collect()
    }

    /// The queued jobs that arrived at or after sequence `seq`, in arrival order.
    pub fn since(&self, seq: u64) -> impl Iterator<Item = JobId> + '_ {
        self.queue
            .range(self.position_from(seq)..)
            .map(|&(_, id, _)| id)
    }
}

impl<T: Copy> Arrivals<T> {
    /// The first job at or after sequence `seq`, with its sequence number and payload: a
    /// scan that takes jobs out of the queue as it goes walks it with this, without copying
    /// it first.
    pub fn first_with(&self, seq: u64) -> Option<(u64, JobId, T)> {
        self.queue.get(self.position_from(seq)).copied()
    }

    /// [`Arrivals::since`] with each job's payload.
    pub fn since_with(&self, seq: u64) -> impl Iterator<Item = (JobId, T)> + '_ {
        self.queue
            .range(self.position_from(seq)..)
            .map(|&(_, id, payload)| (id, payload))
    }
}
