//! Snapshots of the scheduler (issue 23, item 4): its whole state but its configuration, as
//! a serializable value, so that a driver may write it at a consistent point (between two
//! events) and, on restart, restore it and replay only the events that came after, instead
//! of every event since the first.
//!
//! Sans-IO like the rest of the core: [`Scheduler::snapshot`] borrows the state for a
//! serializer the driver picks, [`Scheduler::restore`] takes the value the driver read back.
//! Every collection in the state is ordered (vectors, deques, B-trees), so one state always
//! serializes to the same bytes: a state restored from a snapshot and the events after it
//! can be compared with one rebuilt from every event (`tests/snapshot_props.rs`).
//!
//! What a restored scheduler takes from its new configuration: the [`SchedulerConfig`]
//! (limits, fit, timeouts), the sites' definitions, and the queue policy. What it keeps from
//! the snapshot: the sites' live state, the jobs, and, when the policy's configuration is the
//! one the snapshot was taken with and no site was added, the policy's own state. An operator
//! may so change the configuration across a restart ([`Scheduler::restore`]):
//! - another queue policy, or the same with other parameters: the new policy starts empty and
//!   takes the queued jobs in the order of their numbers (their submission order); what the
//!   old one had learnt (SJF's runtime history, TAGS's running jobs) is gone, and the runtime
//!   limits it set on running jobs are lifted;
//! - sites added after the snapshot's: they join with the state a fresh start gives them (and
//!   the queue policy is rebuilt as above, since policies may keep state per site);
//! - a site's definition (processors, properties): taken from the configuration; its live
//!   counts follow at its next monitor reading. The replicas it was told of and the
//!   bandwidths measured from it are live state and kept (a restart forgot them, and a replay of the journal's tail then refused the
//!   submissions that needed them: found by the simulation harness, `--files` seed 26).
//!
//! A site of the snapshot missing from the configuration, or sites in another order, are
//! refused: jobs and launches name sites by their number.
//!
//! The job table's jobs, most of a large state, come last and may be written apart in runs
//! ([`SnapshotRef::head`], [`SnapshotRef::job_slots`]) and read back apart
//! ([`JobSlots`], [`Snapshot::join`]): a driver can then decode them on several threads.

use super::{Core, Scheduler, SchedulerConfig};
use crate::queue::saved::{Saved, SavedRef};
use serde::{Deserialize, Serialize};

/// The version of the snapshot's form; a snapshot of another version is refused.
pub const SNAPSHOT_VERSION: u32 = 8;

/// A scheduler's state, borrowed, to serialize ([`Scheduler::snapshot`]).
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotRef<'a> {
    version: u32,
    /// The queue policy's configuration, as text (compared at a restore).
    queue_config: String,
    core: &'a Core,
    queue: SavedRef<'a>,
    /// The job table's jobs (all of them, or none in a [`SnapshotRef::head`]).
    jobs: JobSlotsRef<'a>,
}

/// A run of the job table's jobs, borrowed, to serialize: the jobs of ranks `from..to`
/// (the `k`-th job not forgotten, by number), as a sequence.
#[derive(Debug, Clone, Copy)]
pub struct JobSlotsRef<'a> {
    table: &'a super::jobs::JobTable,
    from: usize,
    to: usize,
}

impl Serialize for JobSlotsRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.to - self.from))?;
        for job in self.table.ranks(self.from, self.to) {
            seq.serialize_element(job)?;
        }
        seq.end()
    }
}

/// A run of jobs read back ([`Snapshot::join`]), each boxed as the table keeps it.
#[derive(Debug)]
#[allow(clippy::vec_box)]
pub struct JobSlots(Vec<Box<super::jobs::JobState>>);

impl<'de> Deserialize<'de> for JobSlots {
    /// Into a vector made at once to the length the format gives (serde's own stops at
    /// 1 MiB and then doubles, copying a million jobs' pointers several times), up to 16 M.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Slots;
        impl<'de> serde::de::Visitor<'de> for Slots {
            type Value = JobSlots;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence of jobs")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<JobSlots, A::Error> {
                let mut jobs = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 24));
                while let Some(job) = seq.next_element()? {
                    jobs.push(job);
                }
                Ok(JobSlots(jobs))
            }
        }
        d.deserialize_seq(Slots)
    }
}

/// The previous form of a snapshot, which [`Snapshot::join_previous`] still reads (an
/// upgrade keeps its state directory). Form 3 differed from this one (4) in three places:
/// the job table held the number of the jobs forgotten before its first slot, not how many
/// were numbered; its slots were a sequence of optional jobs (`None`: forgotten), not of
/// jobs; and a queue's arrival order ([`crate::queue::Arrivals`]) carried its job-number
/// index (`seq_of`, a `Vec<u64>`) between its queue and its next sequence number.
pub const PREVIOUS_SNAPSHOT_VERSION: u32 = 3;

/// The form before this one, which differed only in the sites' state: form 4 kept no
/// site's link ([`super::link::LinkState`]), so a restart from a snapshot taken while an
/// agent's link was down forgot the outage and replayed the events after it against a
/// link that was up (found by the simulation harness). A form-4 head is read with every
/// link up, as form 4 restored it.
pub const LINKLESS_SNAPSHOT_VERSION: u32 = 4;

/// The form before this one, which differed only in the core's head: form 5 kept no
/// reservations ([`super::reserve::Reservations`], issue 31) and no site's count of other
/// users' processors ([`super::sites::SiteState::other`]). A form-5 head is read with no
/// reservations (it had none to keep) and that count 0 until the next reading.
pub const RESERVELESS_SNAPSHOT_VERSION: u32 = 5;

/// The form before this one, which differed only in the core's head: form 6 kept no
/// draining launches ([`super::draining`]). A form-6 head is read with none: its stopped
/// committed runs' launches were forgotten at their cancel, as form 6's build did.
pub const DRAINLESS_SNAPSHOT_VERSION: u32 = 6;

/// The form before this one, which differed only in the core's timers: form 7's core kept
/// the times of the draining launches' repeated cancels apart from its timers, out of the
/// snapshot, where this form has a timer for each ([`super::draining`]). A form-7 head
/// reads as this form's, without those timers; [`Scheduler::restore`] gives each draining
/// launch one, an interval after the snapshot's time, as form 7's build did.
pub const RECANCELLESS_SNAPSHOT_VERSION: u32 = 7;

/// The older forms whose job slots are laid out as this form's: only their heads differ,
/// and each is read in [`reading_form`] with its number (every site's link up for 4, no
/// reservations for 4 and 5, no draining launches for 4 to 6, no repeated cancels' timers
/// for 4 to 7), then made whole by [`Snapshot::join`] and [`Scheduler::restore`]. A form
/// added the same way joins this list.
pub const SAME_SLOTS_FORMS: [u32; 4] = [
    LINKLESS_SNAPSHOT_VERSION,
    RESERVELESS_SNAPSHOT_VERSION,
    DRAINLESS_SNAPSHOT_VERSION,
    RECANCELLESS_SNAPSHOT_VERSION,
];

thread_local! {
    /// The older form being decoded on this thread (0: this build's).
    static READING_FORM: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Decode a head of the older `form` with `read` (on this thread): the fields that form
/// lacked or had otherwise read it its way.
pub fn reading_form<R>(form: u32, read: impl FnOnce() -> R) -> R {
    struct Reset(u32);
    impl Drop for Reset {
        fn drop(&mut self) {
            READING_FORM.with(|f| f.set(self.0));
        }
    }
    let _reset = Reset(READING_FORM.with(|f| f.replace(form)));
    read()
}

/// Decode a [`PREVIOUS_SNAPSHOT_VERSION`] snapshot's head with `read` (on this thread):
/// the queue's arrival orders then read that form's fields.
pub fn reading_previous_form<R>(read: impl FnOnce() -> R) -> R {
    reading_form(PREVIOUS_SNAPSHOT_VERSION, read)
}

/// A [`PREVIOUS_SNAPSHOT_VERSION`] head is being decoded on this thread.
pub(crate) fn reading_previous() -> bool {
    READING_FORM.with(std::cell::Cell::get) == PREVIOUS_SNAPSHOT_VERSION
}

/// A head of a form without the sites' links (3 or 4) is being decoded on this thread.
pub(crate) fn reading_linkless() -> bool {
    let form = READING_FORM.with(std::cell::Cell::get);
    form != 0 && form <= LINKLESS_SNAPSHOT_VERSION
}

/// A head of a form without reservations (3 to 5) is being decoded on this thread.
pub(crate) fn reading_reserveless() -> bool {
    let form = READING_FORM.with(std::cell::Cell::get);
    form != 0 && form <= RESERVELESS_SNAPSHOT_VERSION
}

/// A head of a form without draining launches (3 to 6) is being decoded on this thread.
pub(crate) fn reading_drainless() -> bool {
    let form = READING_FORM.with(std::cell::Cell::get);
    form != 0 && form <= DRAINLESS_SNAPSHOT_VERSION
}

/// A run of a [`PREVIOUS_SNAPSHOT_VERSION`] snapshot's job slots read back: its jobs, and
/// how many slots it had (forgotten jobs' empty ones included).
#[derive(Debug)]
pub struct PreviousJobSlots {
    jobs: JobSlots,
    slots: u64,
}

impl<'de> Deserialize<'de> for PreviousJobSlots {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Slots;
        impl<'de> serde::de::Visitor<'de> for Slots {
            type Value = PreviousJobSlots;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence of job slots")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<PreviousJobSlots, A::Error> {
                let mut jobs = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 24));
                let mut slots = 0u64;
                while let Some(slot) = seq.next_element::<Option<Box<super::jobs::JobState>>>()? {
                    slots += 1;
                    jobs.extend(slot);
                }
                Ok(PreviousJobSlots {
                    jobs: JobSlots(jobs),
                    slots,
                })
            }
        }
        d.deserialize_seq(Slots)
    }
}

/// A scheduler's state, deserialized, to [`Scheduler::restore`].
#[derive(Debug, Deserialize)]
pub struct Snapshot {
    version: u32,
    queue_config: String,
    core: Core,
    queue: Saved,
    jobs: JobSlots,
}

impl<'a> SnapshotRef<'a> {
    /// The same without the job table's slots, to write them apart with
    /// [`SnapshotRef::job_slots`].
    pub fn head(&self) -> SnapshotRef<'a> {
        SnapshotRef {
            jobs: JobSlotsRef { to: 0, ..self.jobs },
            ..self.clone()
        }
    }

    /// Run `i` of `n` runs that together hold every job in order, as many in each (give or
    /// take one).
    pub fn job_slots(&self, i: usize, n: usize) -> JobSlotsRef<'a> {
        let table = self.jobs.table;
        let n = n.max(1);
        let jobs = table.live();
        let at = |k: usize| (jobs / n) * k.min(n) + (jobs % n).min(k);
        JobSlotsRef {
            table,
            from: at(i),
            to: at(i + 1).max(at(i)),
        }
    }
}

impl Snapshot {
    /// A [`PREVIOUS_SNAPSHOT_VERSION`] snapshot read back as its head (decoded in
    /// [`reading_previous_form`]) and its runs of slots, made whole in this form: the job
    /// table counts the jobs numbered, forgotten ones' empty slots are dropped.
    pub fn join_previous(mut head: Snapshot, runs: Vec<PreviousJobSlots>) -> Snapshot {
        // The head of a file written in runs has no slots of its own.
        let slots: u64 = head.jobs.0.len() as u64 + runs.iter().map(|r| r.slots).sum::<u64>();
        head.core.jobs.numbered_after_base(slots);
        if head.version == PREVIOUS_SNAPSHOT_VERSION {
            head.version = SNAPSHOT_VERSION;
        }
        Snapshot::join(head, runs.into_iter().map(|r| r.jobs).collect())
    }

    /// A snapshot read back as its [`SnapshotRef::head`] and then its runs of slots, in
    /// order, made whole.
    pub fn join(mut head: Snapshot, runs: Vec<JobSlots>) -> Snapshot {
        if SAME_SLOTS_FORMS.contains(&head.version) {
            // Read in `reading_form` with its form: the rest as now.
            head.version = SNAPSHOT_VERSION;
        }
        let len = head.jobs.0.len() + runs.iter().map(|r| r.0.len()).sum::<usize>();
        let mut runs = runs.into_iter();
        // The head's (empty in a file written in runs) and the first run's slots are kept
        // where they are; the others are moved after them.
        if head.jobs.0.is_empty() {
            if let Some(first) = runs.next() {
                head.jobs = first;
            }
        }
        head.jobs.0.reserve_exact(len - head.jobs.0.len());
        for r in runs {
            head.jobs.0.extend(r.0);
        }
        head
    }
}

/// Why a snapshot cannot be restored under a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error("the snapshot is of version {0}, this build reads version {SNAPSHOT_VERSION}")]
    Version(u32),
    #[error(
        "the snapshot's sites are [{saved}], the configuration's [{configured}]: sites may be \
         added after the others across a restart, not removed or reordered (jobs and launches \
         name sites by their number); to retire a site, take it out of service \
         (`coalloc site drain`) and keep it in the configuration"
    )]
    Sites { saved: String, configured: String },
}

/// What a restore changed because the configuration differs from the snapshot's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreChange {
    /// The queue policy (or its parameters) changed; it was rebuilt with this many queued jobs.
    Policy {
        saved: &'static str,
        configured: &'static str,
        queued: usize,
    },
    /// Sites added after the snapshot's.
    SitesAdded(Vec<String>),
    /// A site's processors changed.
    Processors { site: String, from: u32, to: u32 },
}

impl std::fmt::Display for RestoreChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RestoreChange::Policy {
                saved,
                configured,
                queued,
            } => write!(
                f,
                "queue policy {saved} -> {configured}: rebuilt with {queued} queued job(s) in \
                 submission order"
            ),
            RestoreChange::SitesAdded(names) => write!(f, "sites added: {}", names.join(", ")),
            RestoreChange::Processors { site, from, to } => {
                write!(f, "site {site}: {from} -> {to} processors")
            }
        }
    }
}

impl Scheduler {
    /// The state to serialize, or `None` if the queue policy cannot be saved (one from
    /// outside this crate). Take it between two events: what it holds is consistent then.
    pub fn snapshot(&self) -> Option<SnapshotRef<'_>> {
        Some(SnapshotRef {
            version: SNAPSHOT_VERSION,
            queue_config: format!("{:?}", self.core.config.queue),
            core: &self.core,
            queue: self.queue.saved()?,
            jobs: JobSlotsRef {
                table: &self.core.jobs,
                from: 0,
                to: self.core.jobs.live(),
            },
        })
    }

    /// The scheduler a snapshot was taken of, under `config` and with `sites` (the
    /// snapshot's, in the same order, and perhaps more after them); what differs from the
    /// snapshot is listed in the second value (see the module's doc).
    pub fn restore(
        config: SchedulerConfig,
        sites: &[crate::model::Site],
        saved: Snapshot,
    ) -> Result<(Scheduler, Vec<RestoreChange>), RestoreError> {
        if saved.version != SNAPSHOT_VERSION {
            return Err(RestoreError::Version(saved.version));
        }
        let names = |s: &[crate::model::Site]| {
            s.iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let old = saved.core.sites.sites.len();
        let prefix = sites.len() >= old
            && saved
                .core
                .sites
                .sites
                .iter()
                .zip(sites)
                .all(|(a, b)| a.name == b.name);
        if !prefix {
            return Err(RestoreError::Sites {
                saved: names(&saved.core.sites.sites),
                configured: names(sites),
            });
        }
        let mut changes = Vec::new();
        let mut core = saved.core;
        core.jobs.set_jobs(saved.jobs.0);
        let policy_same = saved.queue_config == format!("{:?}", config.queue);
        core.config = config;
        for (i, site) in sites.iter().enumerate().take(old) {
            let from = core.sites.sites[i].processors;
            if from != site.processors && core.clouds[i].is_none() {
                changes.push(RestoreChange::Processors {
                    site: site.name.clone(),
                    from,
                    to: site.processors,
                });
                let s = &mut core.sites.state[i];
                s.processors = site.processors;
                s.idle = if site.processors > from {
                    s.idle + (site.processors - from)
                } else {
                    s.idle.min(site.processors.saturating_sub(s.ours))
                };
                core.sites.epoch += 1;
            }
            // The definition is the configuration's, but the replicas the site was told of
            // since (seed 000 §2.3, `Event::Replica`) are live state: kept, in their order,
            // with any the configuration names besides.
            let learnt = std::mem::take(&mut core.sites.sites[i].files);
            let mut def = site.clone();
            let configured = std::mem::replace(&mut def.files, learnt);
            for f in configured {
                if !def.files.contains(&f) {
                    def.files.push(f);
                }
            }
            core.sites.sites[i] = def;
        }
        // Likewise the bandwidths measured since (`scheduler::bandwidth`): live state over
        // the configured estimates.
        for (&(from, to), &avg) in &core.measured {
            if from < old && to < old {
                let name = core.sites.sites[to].name.clone();
                core.sites.sites[from].bandwidth.insert(name, avg);
            }
        }
        if sites.len() > old {
            let added = &sites[old..];
            let mut table = super::sites::SiteTable::new(added.to_vec(), core.sites.limits);
            let clouds = super::clouds::init(&mut table, &core.config.provisioning);
            core.provision_now |= clouds.iter().any(Option::is_some);
            core.sites.sites.extend(table.sites);
            core.sites.state.extend(table.state);
            core.clouds.extend(clouds);
            core.sites.epoch += 1;
            changes.push(RestoreChange::SitesAdded(
                added.iter().map(|s| s.name.clone()).collect(),
            ));
        }
        let mut queue = saved.queue.into_policy();
        if !policy_same || sites.len() > old {
            let saved_name = queue.name();
            queue = core.config.queue.build();
            if !policy_same {
                // The old policy's runtime limits (TAGS) are its own.
                core.timers
                    .retain(|(_, t)| !matches!(t, super::Timer::Limit { .. }));
            }
            let now = core.now;
            let mut queued = 0;
            for j in core.jobs.values() {
                if j.phase == super::Phase::Queued
                    && j.retry_at().is_none()
                    && !j.awaiting_admission
                {
                    queue.push(j.id, &j.job, now);
                    queued += 1;
                }
            }
            if !policy_same {
                changes.insert(
                    0,
                    RestoreChange::Policy {
                        saved: saved_name,
                        configured: queue.name(),
                        queued,
                    },
                );
            }
        }
        for j in core.jobs.values_mut() {
            core.shared.share(&mut j.job);
        }
        // The repeated cancels follow the configured interval; a form-7 snapshot had no
        // timers of theirs (`draining.rs`).
        core.recancel_after_restore();
        core.dirty |= !changes.is_empty();
        Ok((Scheduler { core, queue }, changes))
    }
}
