//! The local backend, the embedded default: a virtual cluster of `slots` processor slots on
//! this machine, standing in for one site's resource manager (seed 003 §4.3's GRAM role).
//!
//! A component of count n takes n slots and runs `processes` processes (n for job types
//! `multiple` / `mpi`, 1 for `single`). Components that do not fit wait in a FIFO queue, the
//! way a plain local batch queue does. The work directory holds two files that are only
//! appended to: `launches.jsonl`, a log of what each launch is (its request), when it started
//! and in which process group, why it was killed and how it ended; and `exits`, one line per
//! process that ended. The processes are started by the cluster's long-lived [`launcher`],
//! which writes their exit codes, when the configuration names a launcher program; else each
//! launch runs under a `/bin/sh` wrapper that writes them. Because all of that is on disk and
//! the processes run in their own process groups, they outlive a crashed server: a new
//! `LocalCluster` on the same work directory adopts them (see `local::adopt`) and connects to the
//! same launcher. A launch creates no file of its own but its output files.
//!
//! Standard output and error of all processes of a component go to the request's files; the
//! processes start in the folder of the standard output file unless the request names a
//! working directory. The wall time is enforced by killing the process group. The "other
//! users" of the cluster are a background load of slots taken outside coalloc
//! ([`LocalCluster::set_background_slots`], or a varying load from [`BackgroundLoad`]).
//!
//! The cluster takes advance reservations (issue 31) on a calendar of its slots
//! (`local::calendar`); a launch submitted into one waits for its start, ahead of the queue.

mod adopt;
mod calendar;
pub mod launcher;
mod link;
mod process;

pub use link::LauncherCommand;

use crate::{Backend, BackendError, RemoteId, RemoteState, SiteLoad, SubmitRequest};
use link::Link;
use process::{Exits, Log, Running};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How often the reaper looks at running launches.
const REAP_EVERY: Duration = Duration::from_millis(5);

/// One virtual cluster.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// The site's name (for messages).
    pub name: String,
    /// Processor slots: the most the cluster ever has (a bigger component is rejected).
    pub slots: u32,
    /// Slots usable at start when fewer than `slots`: a cloud site whose VMs come and go
    /// ([`Backend::resize`]). `None`: all of them.
    pub initial_slots: Option<u32>,
    /// Where launch directories go (created if missing).
    pub work_dir: PathBuf,
    /// A varying background load; `None` for none (a fixed one can still be set).
    pub background: Option<BackgroundLoad>,
    /// The program of the cluster's long-lived launcher; `None`: every launch under a
    /// `/bin/sh` wrapper of its own (also the fallback when the launcher cannot be started).
    pub launcher: Option<LauncherCommand>,
}

/// "Other users": every `period` the slots they hold are drawn again, uniformly on
/// `[min, max]`, from a generator seeded with `seed` (so two runs see the same sequence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackgroundLoad {
    pub min: u32,
    pub max: u32,
    pub period: Duration,
    pub seed: u64,
}

#[derive(Debug)]
enum Phase {
    Queued,
    Running(Running),
    Done(RemoteState),
}

#[derive(Debug)]
struct Launch {
    request: SubmitRequest,
    phase: Phase,
}

#[derive(Debug, Default)]
struct Inner {
    /// Slots usable now (grows and shrinks with leased VMs).
    slots: u32,
    launches: BTreeMap<RemoteId, Launch>,
    queue: VecDeque<RemoteId>,
    busy: u32,
    background: u32,
    stopping: bool,
    /// Exit codes read from the `exits` file.
    exits: Exits,
    /// Ended launches the server discarded since the log was last compacted.
    discarded: usize,
    /// Advance reservations, by name.
    reservations: BTreeMap<String, calendar::Resv>,
}

#[derive(Debug)]
struct Shared {
    name: String,
    slots: u32,
    log: Log,
    /// The launcher, when the cluster has one (locked inside `inner`, never the other way).
    link: Option<Mutex<Link>>,
    inner: Mutex<Inner>,
    wake: Condvar,
}

/// A virtual cluster of processor slots on this machine.
#[derive(Debug)]
pub struct LocalCluster {
    shared: Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// The handle of launch `launch`.
pub fn remote_id(launch: u64) -> RemoteId {
    format!("L{launch}")
}

impl LocalCluster {
    /// Open the cluster on its work directory, adopting what a previous server left running.
    pub fn new(config: LocalConfig) -> Result<LocalCluster, BackendError> {
        std::fs::create_dir_all(&config.work_dir)?;
        let mut inner = Inner {
            slots: config
                .initial_slots
                .unwrap_or(config.slots)
                .min(config.slots),
            ..Inner::default()
        };
        let log = Log::open(&config.work_dir)?;
        adopt::adopt(&config.work_dir, &log, &mut inner);
        let link = config.launcher.clone().map(|command| {
            let mut link = Link::new(command, &config.work_dir);
            // Now rather than at the first launch; a failure is retried then.
            let _ = link.connect();
            Mutex::new(link)
        });
        let shared = Arc::new(Shared {
            name: config.name.clone(),
            slots: config.slots,
            log,
            link,
            inner: Mutex::new(inner),
            wake: Condvar::new(),
        });
        let mut threads = Vec::new();
        let s = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("local-{}", config.name))
                .spawn(move || reaper(&s))?,
        );
        if let Some(load) = config.background {
            let s = shared.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("background-{}", config.name))
                    .spawn(move || background(&s, load))?,
            );
        }
        {
            let mut inner = shared.lock();
            shared.start_queued(&mut inner);
        }
        Ok(LocalCluster { shared, threads })
    }

    /// Hold `slots` slots for the cluster's other users from now on (0 releases them). Running
    /// components are never killed for it; queued ones wait.
    pub fn set_background_slots(&self, slots: u32) {
        let mut inner = self.shared.lock();
        inner.background = slots.min(inner.slots);
        self.shared.start_queued(&mut inner);
    }

    /// Slots held by coalloc's components now.
    pub fn busy_slots(&self) -> u32 {
        self.shared.lock().busy
    }
}

/// Ended launches discarded before the launch log is compacted (at least; and at least as
/// many as the launches it keeps, so that a compaction's cost is amortized).
const COMPACT_AFTER: usize = 1_000;

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Refuse more processors than the cluster ever has.
    fn too_big(&self, count: u32) -> Result<(), BackendError> {
        if count > self.slots {
            return Err(BackendError::Rejected(format!(
                "{count} processors asked, cluster `{}` has {}",
                self.name, self.slots
            )));
        }
        Ok(())
    }

    /// Rewrite the launch log from the launches kept, and empty `exits` if none runs (its
    /// codes are all used then; see `process`).
    fn compact(&self, inner: &mut Inner) -> std::io::Result<()> {
        let mut records = calendar::records(inner);
        for launch in inner.launches.values() {
            let id = launch.request.launch;
            records.push(process::Record::Request(launch.request.clone()));
            match &launch.phase {
                Phase::Queued => {}
                Phase::Running(r) => records.extend(r.records(id)),
                Phase::Done(state) => {
                    if let Some(outcome) = process::Final::of(state) {
                        records.push(process::Record::Ended {
                            launch: id,
                            outcome,
                        });
                    }
                }
            }
        }
        self.log.rewrite(&records)?;
        let running = inner
            .launches
            .values()
            .any(|l| matches!(l.phase, Phase::Running(_)));
        if !running {
            inner.exits.clear(&self.log.exits)?;
        }
        inner.discarded = 0;
        Ok(())
    }

    /// Start queued launches: ordinary ones in FIFO order while the head fits (until its
    /// wall time ends, so that it does not run into a reservation's window), and those of
    /// reservations whose window has begun, ahead of the queue ([`calendar`]).
    fn start_queued(&self, inner: &mut Inner) {
        let now = process::now_ms();
        calendar::expire(inner, &self.log, now);
        // An ordinary launch waits: those behind it wait too (FIFO).
        let mut blocked = false;
        let mut i = 0;
        while let Some(id) = inner.queue.get(i).cloned() {
            let Some(launch) = inner.launches.get(&id) else {
                inner.queue.remove(i);
                continue;
            };
            let r = &launch.request;
            let count = r.count;
            let startable = match &r.reservation {
                None => {
                    let until = r.wall_time_ms.map(|w| now + w);
                    !blocked && calendar::fits(inner, now, count, now, until)
                }
                Some(name) => match inner.reservations.get(name) {
                    Some(resv) => {
                        now >= resv.start_ms
                            && count <= resv.count.saturating_sub(calendar::used_by(inner, name))
                    }
                    None => {
                        let why = format!("its reservation `{name}` is gone");
                        let state = RemoteState::Lost(why);
                        self.log.ended(r.launch, &state);
                        inner.launches.get_mut(&id).expect("looked up").phase = Phase::Done(state);
                        inner.queue.remove(i);
                        continue;
                    }
                },
            };
            if !startable {
                blocked |= r.reservation.is_none();
                i += 1;
                continue;
            }
            inner.queue.remove(i);
            let launch = inner.launches.get_mut(&id).expect("looked up above");
            match process::start(&launch.request, &self.log, self.link.as_ref()) {
                Ok(running) => {
                    launch.phase = Phase::Running(running);
                    inner.busy += count;
                    // The reaper sleeps long while nothing runs: wake it to watch this one.
                    self.wake.notify_all();
                }
                Err(e) => {
                    let state = RemoteState::Lost(format!("could not start: {e}"));
                    self.log.ended(launch.request.launch, &state);
                    launch.phase = Phase::Done(state);
                }
            }
        }
    }

    /// Collect ended launches, enforce wall times; true if anything changed.
    fn reap(&self, inner: &mut Inner) -> bool {
        let mut ended = Vec::new();
        for (id, launch) in inner.launches.iter_mut() {
            let Phase::Running(running) = &mut launch.phase else {
                continue;
            };
            if running.poll(&self.log, launch.request.launch) {
                ended.push(id.clone());
            }
        }
        if ended.is_empty() {
            return false;
        }
        // Every process of these launches is gone, so their exit codes are all written.
        inner.exits.refresh(&self.log.exits);
        for id in ended {
            let Some(launch) = inner.launches.get_mut(&id) else {
                continue;
            };
            let Phase::Running(running) = &launch.phase else {
                continue;
            };
            let r = &launch.request;
            let state = inner
                .exits
                .outcome(r.launch, r.processes, running.killed.as_deref());
            self.log.ended(r.launch, &state);
            inner.busy -= r.count;
            launch.phase = Phase::Done(state);
        }
        true
    }
}

fn reaper(shared: &Shared) {
    let mut inner = shared.lock();
    loop {
        if inner.stopping {
            return;
        }
        // With reservations, what may start changes with the time too.
        if shared.reap(&mut inner) || !inner.reservations.is_empty() {
            shared.start_queued(&mut inner);
        }
        let running = inner
            .launches
            .values()
            .any(|l| matches!(l.phase, Phase::Running(_)));
        let mut wait = if running {
            REAP_EVERY
        } else {
            Duration::from_secs(1)
        };
        // A reservation's window begins or ends: its launches start then, or the ordinary
        // ones it held back.
        let now = process::now_ms();
        if let Some(t) = calendar::next_change(&inner, now) {
            wait = wait.min(Duration::from_millis((t - now).max(1) as u64));
        }
        inner = shared
            .wake
            .wait_timeout(inner, wait)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

fn background(shared: &Shared, load: BackgroundLoad) {
    // SplitMix64: a tiny seeded generator; the draws need no statistical quality.
    let mut state = load.seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let (lo, hi) = (load.min.min(load.max), load.max.max(load.min));
    let mut inner = shared.lock();
    loop {
        if inner.stopping {
            return;
        }
        let span = u64::from(hi - lo) + 1;
        inner.background = (lo + (next() % span) as u32).min(inner.slots);
        shared.start_queued(&mut inner);
        inner = shared
            .wake
            .wait_timeout(inner, load.period)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

impl Backend for LocalCluster {
    fn discard(&self, ids: &[RemoteId]) {
        let mut inner = self.shared.lock();
        for id in ids {
            if matches!(inner.launches.get(id), Some(l) if matches!(l.phase, Phase::Done(_))) {
                inner.launches.remove(id);
                inner.discarded += 1;
            }
        }
        if inner.discarded >= COMPACT_AFTER.max(inner.launches.len()) {
            // A failure leaves the log as it was: longer, and as right.
            let _ = self.shared.compact(&mut inner);
        }
    }

    fn submit(&self, request: &SubmitRequest) -> Result<RemoteId, BackendError> {
        let shared = &self.shared;
        shared.too_big(request.count)?;
        if request.processes == 0 {
            return Err(BackendError::Rejected("no process to start".into()));
        }
        process::check_executable(request)?;
        let id = remote_id(request.launch);
        let mut inner = shared.lock();
        if inner.launches.contains_key(&id) {
            // The same launch sent again (a server that restarted before it heard back).
            return Ok(id);
        }
        shared
            .log
            .append(&process::Record::Request(request.clone()))?;
        inner.launches.insert(
            id.clone(),
            Launch {
                request: request.clone(),
                phase: Phase::Queued,
            },
        );
        inner.queue.push_back(id.clone());
        shared.start_queued(&mut inner);
        Ok(id)
    }

    fn query(&self, ids: &[RemoteId]) -> Result<Vec<RemoteState>, BackendError> {
        let inner = self.shared.lock();
        Ok(ids
            .iter()
            .map(|id| match inner.launches.get(id).map(|l| &l.phase) {
                Some(Phase::Queued) => RemoteState::Queued,
                Some(Phase::Running(_)) => RemoteState::Running,
                Some(Phase::Done(s)) => s.clone(),
                None => RemoteState::Unknown,
            })
            .collect())
    }

    fn cancel(&self, id: &RemoteId) -> Result<(), BackendError> {
        let shared = &self.shared;
        let mut inner = shared.lock();
        let Some(launch) = inner.launches.get_mut(id) else {
            return Ok(());
        };
        match &mut launch.phase {
            Phase::Queued => {
                let state = RemoteState::Failed("cancelled".into());
                shared.log.ended(launch.request.launch, &state);
                launch.phase = Phase::Done(state);
                inner.queue.retain(|q| q != id);
            }
            Phase::Running(running) => {
                running.kill(&shared.log, launch.request.launch, "cancelled");
                // Reap at once so that no process is left when cancel returns.
                if shared.reap(&mut inner) {
                    shared.start_queued(&mut inner);
                }
            }
            Phase::Done(_) => {}
        }
        Ok(())
    }

    fn cancel_unrecorded(
        &self,
        _job: u64,
        _component: usize,
        launch: u64,
    ) -> Result<(), BackendError> {
        // A launch's id is made from its number, and the launch log holds every launch this
        // cluster accepted, whether or not the server heard back.
        self.cancel(&remote_id(launch))
    }

    fn load(&self) -> Result<SiteLoad, BackendError> {
        let inner = self.shared.lock();
        let held = calendar::held_idle(&inner, process::now_ms());
        Ok(SiteLoad {
            idle: inner
                .slots
                .saturating_sub(inner.busy + inner.background + held),
            total: inner.slots,
            other: inner.background,
        })
    }

    /// The other users' load is preempted: up to `processors` of its slots are released
    /// (a varying load draws again at its next period, as other users come back).
    fn kill_local(&self, processors: u32) -> Result<u32, BackendError> {
        let mut inner = self.shared.lock();
        let freed = processors.min(inner.background);
        inner.background -= freed;
        self.shared.start_queued(&mut inner);
        Ok(freed)
    }

    /// Launches start one after another under the cluster's lock anyway.
    fn submits_in_parallel(&self) -> bool {
        false
    }

    fn may_reserve(&self) -> bool {
        true
    }

    fn reserve_earliest(
        &self,
        count: u32,
        duration_ms: i64,
        not_before_ms: i64,
    ) -> Result<i64, BackendError> {
        self.shared.too_big(count)?;
        let inner = self.shared.lock();
        let now = process::now_ms();
        calendar::earliest(&inner, now, count, duration_ms, not_before_ms).ok_or_else(|| {
            BackendError::Rejected(format!(
                "{count} slots of `{}` are never free for {duration_ms} ms (launches without \
                 a wall time hold them)",
                self.shared.name
            ))
        })
    }

    fn reserve(
        &self,
        name: &str,
        count: u32,
        start_ms: i64,
        duration_ms: i64,
    ) -> Result<(), BackendError> {
        self.shared.too_big(count)?;
        let shared = &self.shared;
        let mut inner = shared.lock();
        let now = process::now_ms();
        calendar::expire(&mut inner, &shared.log, now);
        let resv = calendar::Resv {
            count,
            start_ms,
            end_ms: start_ms + duration_ms.max(1),
        };
        if let Some(old) = inner.reservations.get(name) {
            // The same reservation asked for again (a server that restarted before it
            // heard back) is made already; another under its name is refused.
            return if *old == resv {
                Ok(())
            } else {
                Err(BackendError::Rejected(format!(
                    "a reservation `{name}` exists on `{}` already",
                    shared.name
                )))
            };
        }
        if resv.end_ms <= now {
            return Err(BackendError::Rejected(format!(
                "reservation `{name}` would end before now"
            )));
        }
        if !calendar::fits(&inner, now, count, start_ms.max(now), Some(resv.end_ms)) {
            return Err(BackendError::Rejected(format!(
                "{count} slots of `{}` are not free from {start_ms} for {duration_ms} ms",
                shared.name
            )));
        }
        shared.log.append(&process::Record::Reserved {
            name: name.to_owned(),
            count,
            start_ms,
            duration_ms: resv.end_ms - start_ms,
        })?;
        inner.reservations.insert(name.to_owned(), resv);
        shared.wake.notify_all();
        Ok(())
    }

    fn unreserve(&self, name: &str) -> Result<(), BackendError> {
        let mut inner = self.shared.lock();
        if calendar::remove(&mut inner, &self.shared.log, name) {
            self.shared.start_queued(&mut inner);
        }
        Ok(())
    }

    fn reservations(&self) -> Result<Vec<String>, BackendError> {
        let mut inner = self.shared.lock();
        calendar::expire(&mut inner, &self.shared.log, process::now_ms());
        Ok(inner
            .reservations
            .keys()
            .filter(|n| n.starts_with(crate::RESERVATION_PREFIX))
            .cloned()
            .collect())
    }

    fn resize(&self, processors: i64) {
        let mut inner = self.shared.lock();
        let slots = (i64::from(inner.slots) + processors).clamp(0, i64::from(self.shared.slots));
        inner.slots = slots as u32;
        self.shared.start_queued(&mut inner);
    }
}

impl Drop for LocalCluster {
    /// Stops the cluster's threads. Components keep running (a resource manager does not kill
    /// its jobs when a client goes away); a later `LocalCluster` on the same directory adopts
    /// them.
    fn drop(&mut self) {
        self.shared.lock().stopping = true;
        self.shared.wake.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The launches recorded in the log of `work_dir`, in the order they were accepted (for tests
/// and tools).
pub fn recorded_launches(work_dir: &Path) -> Vec<u64> {
    process::read_log(work_dir)
        .into_iter()
        .filter_map(|r| match r {
            process::Record::Request(r) => Some(r.launch),
            _ => None,
        })
        .collect()
}

/// The process group launch `launch` of `work_dir` was started in, if it was (for tests and
/// tools).
pub fn recorded_pgid(work_dir: &Path, launch: u64) -> Option<i32> {
    process::read_log(work_dir)
        .into_iter()
        .find_map(|r| match r {
            process::Record::Started {
                launch: l, pgid, ..
            } if l == launch => Some(pgid),
            _ => None,
        })
}
