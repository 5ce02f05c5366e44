//! Snapshots of the server's state and compaction of the journal (issue 23, item 4).
//!
//! Once `server.snapshot_every` entries have been committed since the last snapshot, the
//! driver, between two turns (every entry committed, every command carried out: a
//! consistent point), serializes what a replay of the journal up to its last entry `S`
//! would rebuild: the core's state ([`Scheduler::snapshot`]) and the driver's own
//! bookkeeping (launches and their handles, secrets, rendezvous values, aborts, VMs,
//! replicas, transfers, staging, arrays, jobs waiting to age out). A forked child
//! ([`super::forked`]) writes it ([`super::snapfile`]) to `snapshot.bin.tmp` and syncs it, so the
//! driver stops only for the fork; a thread waits for the child and hands the file to the
//! journal's [`SnapshotPlace`] (the state directory's: renamed to `snapshot.bin`, the
//! directory synced; PostgreSQL's: copied into the database in one transaction); then the
//! driver deletes the journal's entries before `S`. At a stop, or if forking fails, the driver streams the state to the file
//! itself (through a 1 MiB buffer, not one of the whole state) and a thread syncs it.
//!
//! A restart reads the place's newest snapshot, if there is one, and replays only the entries after
//! `S`. A kill at any moment loses nothing: until the rename, the previous snapshot and the
//! entries after it are all there (the journal is compacted only up to a snapshot already
//! on disk); after it, the new one is, and entries it covers that are still in the journal
//! are skipped by their number. `COALLOC_SNAPSHOT_PAUSE_MS` (tests only) makes the writer
//! stop that long part-way through the temporary file, so that a test can kill it there.

use super::clouds::VmInfo;
use super::secrets::Secrets;
use super::staging::Staging;
use super::transfers::TransferRun;
use super::{Driver, LaunchInfo, StartError};
use crate::catalog::Catalog;
use crate::journal::{FilePlace, SnapshotPlace};
use crate::logs::Abort;
use coalloc_core::model::Time;
use coalloc_core::scheduler::snapshot::{Snapshot, SnapshotRef};
use coalloc_core::scheduler::Scheduler;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Seek;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

/// The driver's snapshot bookkeeping.
pub(crate) struct Snapshots {
    /// `DIR/snapshot.bin`: the temporary file is this with `.tmp`.
    path: PathBuf,
    /// Where the snapshots are kept (the journal's, or `path`).
    place: Arc<dyn SnapshotPlace>,
    /// The journal entry the newest snapshot on disk covers up to (0: none).
    saved: Arc<AtomicI64>,
    /// A snapshot is being written.
    busy: Arc<AtomicBool>,
    /// The entry the last snapshot taken covers up to.
    taken: i64,
    /// The journal holds no entry before this one.
    compacted: i64,
    /// Forking failed once: the driver writes snapshots itself.
    no_fork: Arc<AtomicBool>,
    /// Written and synced within the turn (the simulation harness).
    inline: bool,
    /// The next snapshot written here is cut after its temporary file, as if the server
    /// died there (the simulation harness's fault, [`Driver::cut_next_snapshot`]).
    cut: bool,
}

impl Snapshots {
    pub(crate) fn new(
        state: &crate::state::StateDir,
        inline: bool,
        place: Option<Arc<dyn SnapshotPlace>>,
    ) -> Snapshots {
        let path = state.root.join("snapshot.bin");
        Snapshots {
            place: place.unwrap_or_else(|| Arc::new(FilePlace { path: path.clone() })),
            path,
            saved: Arc::new(AtomicI64::new(0)),
            busy: Arc::new(AtomicBool::new(false)),
            taken: 0,
            compacted: 0,
            no_fork: Arc::new(AtomicBool::new(false)),
            inline,
            cut: false,
        }
    }
}

/// A transfer as a replay leaves it: the run's progress and its thread are not kept (a
/// restart starts a transfer under way again).
#[derive(Debug, Serialize, Deserialize)]
struct SavedTransfer {
    job: u64,
    component: usize,
    from: usize,
    to: usize,
    file: String,
    size: u64,
    /// Done or failed; else it waits to be started (again).
    ended: Option<bool>,
    reason: Option<String>,
    /// The transfer of the same file to the same site that this one waits for.
    after: Option<u64>,
}

impl SavedTransfer {
    fn of(t: &TransferRun) -> SavedTransfer {
        SavedTransfer {
            job: t.job,
            component: t.component,
            from: t.from,
            to: t.to,
            file: t.file.clone(),
            size: t.size,
            ended: match t.state {
                "done" => Some(true),
                "failed" => Some(false),
                _ => None,
            },
            reason: t.reason.clone(),
            after: t.after,
        }
    }

    fn run(self) -> TransferRun {
        TransferRun {
            job: self.job,
            component: self.component,
            from: self.from,
            to: self.to,
            file: self.file,
            size: self.size,
            bytes: if self.ended == Some(true) {
                self.size
            } else {
                0
            },
            deadline: None,
            state: match self.ended {
                Some(true) => "done",
                Some(false) => "failed",
                None => "waiting",
            },
            reason: self.reason,
            cancel: Arc::new(AtomicBool::new(self.ended.is_some())),
            after: self.after,
        }
    }
}

/// What a replay up to entry `seq` rebuilds, borrowed to write: the head of the file
/// ([`super::snapfile`]), the core's job slots written after it from `slots`.
#[derive(Serialize)]
struct StateRef<'a> {
    seq: i64,
    now: Time,
    /// The core without its job slots ([`SnapshotRef::head`]).
    core: SnapshotRef<'a>,
    #[serde(skip)]
    slots: SnapshotRef<'a>,
    launches: &'a BTreeMap<u64, LaunchInfo>,
    secrets: &'a Secrets,
    kv: &'a BTreeMap<(u64, String), String>,
    abort_reasons: &'a BTreeMap<u64, String>,
    aborts: &'a BTreeMap<u64, Vec<Abort>>,
    committed: &'a BTreeSet<u64>,
    failed: &'a BTreeSet<u64>,
    ended_at: &'a VecDeque<(Time, u64)>,
    arrays: &'a BTreeMap<u64, (u32, u32)>,
    vms: &'a BTreeMap<u64, VmInfo>,
    catalog: &'a Catalog,
    transfers: BTreeMap<u64, SavedTransfer>,
    staging: &'a BTreeMap<u64, Staging>,
}

/// The same, read back.
#[derive(Deserialize)]
struct State {
    seq: i64,
    now: Time,
    core: Snapshot,
    launches: BTreeMap<u64, LaunchInfo>,
    secrets: Secrets,
    kv: BTreeMap<(u64, String), String>,
    abort_reasons: BTreeMap<u64, String>,
    aborts: BTreeMap<u64, Vec<Abort>>,
    committed: BTreeSet<u64>,
    failed: BTreeSet<u64>,
    ended_at: VecDeque<(Time, u64)>,
    arrays: BTreeMap<u64, (u32, u32)>,
    vms: BTreeMap<u64, VmInfo>,
    catalog: Catalog,
    transfers: BTreeMap<u64, SavedTransfer>,
    staging: BTreeMap<u64, Staging>,
}

impl Driver {
    /// The state to write, covering the journal up to its last entry; `None` if the queue
    /// policy cannot be saved.
    fn state_ref(&self) -> Option<StateRef<'_>> {
        let core = self.core.snapshot()?;
        Some(StateRef {
            seq: self.journal.last_seq(),
            now: self.now,
            core: core.head(),
            slots: core,
            launches: &self.launches,
            secrets: &self.rv.secrets,
            kv: &self.rv.kv,
            abort_reasons: &self.abort_reasons,
            aborts: &self.aborts,
            committed: &self.committed,
            failed: &self.failed,
            ended_at: &self.ended_at,
            arrays: &self.arrays,
            vms: &self.vms,
            catalog: &self.catalog,
            transfers: self
                .transfers
                .iter()
                .map(|(k, t)| (*k, SavedTransfer::of(t)))
                .collect(),
            staging: &self.staging,
        })
    }

    /// Write the state ([`Driver::state_ref`]) to `tmp` through a 1 MiB buffer (no buffer
    /// of the whole state, which the allocator would keep), flushed, not synced: the file
    /// and its size; `None` if the policy cannot be saved or the file cannot be written.
    fn write_snapshot(&self, tmp: &Path) -> Option<(std::fs::File, u64)> {
        let state = self.state_ref()?;
        let written = std::fs::File::create(tmp)
            .map_err(|e| e.to_string())
            .and_then(|f| {
                let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
                super::snapfile::write(&state, &state.slots, &mut w).map_err(|e| e.to_string())?;
                let mut f = w.into_inner().map_err(|e| e.to_string())?;
                let size = f.stream_position().map_err(|e| e.to_string())?;
                Ok((f, size))
            });
        match written {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!("no snapshot: {}: {e}", tmp.display());
                None
            }
        }
    }

    /// Between two turns: compact the journal up to the newest snapshot on disk, and take
    /// a new snapshot if `snapshot_every` entries came since the last one. Written by a
    /// forked child ([`super::forked`]) while the driver goes on; at a stop (`wait`), or
    /// where forking failed, serialized here and written by a thread (`wait`: before this
    /// returns).
    pub(crate) fn snapshot_if_due(&mut self, wait: bool) {
        let saved = self.snapshots.saved.load(Ordering::Acquire);
        if saved > self.snapshots.compacted {
            let t = std::time::Instant::now();
            match self.journal.compact_before(saved) {
                Ok(n) => {
                    let ms = t.elapsed().as_millis() as u64;
                    tracing::info!(entries = n, before = saved, ms, "journal compacted");
                    self.snapshots.compacted = saved;
                }
                Err(e) => tracing::warn!("compacting the journal: {e}"),
            }
        }
        let every = self.config.snapshot_every as i64;
        let last = self.journal.last_seq();
        let taken = self.snapshots.taken;
        if every == 0
            || last == taken
            || (!wait && last - taken < every)
            || self.snapshots.busy.load(Ordering::Acquire)
        {
            return;
        }
        // The snapshot covers the journal up to `last`: those entries are on disk first (a
        // snapshot ahead of the journal would cover the numbers a restart gives again).
        if !self.durable() {
            return;
        }
        let t = std::time::Instant::now();
        let pause = pause_ms();
        let (path, place, saved, busy) = (
            self.snapshots.path.clone(),
            self.snapshots.place.clone(),
            self.snapshots.saved.clone(),
            self.snapshots.busy.clone(),
        );
        let tmp = path.with_extension("bin.tmp");
        // How the file gets on disk, run by a thread (or here, at a stop): waiting for a
        // forked child, or syncing what the driver wrote.
        type Finish = Box<dyn FnOnce() -> Result<(), String> + Send>;
        let mut forked = false;
        let mut finish: Option<Finish> = None;
        let here = wait || self.snapshots.inline;
        if !here && !self.snapshots.no_fork.load(Ordering::Acquire) {
            let Some(state) = self.state_ref() else {
                return;
            };
            let write =
                |w: &mut dyn std::io::Write| super::snapfile::write(&state, &state.slots, w);
            match super::forked::fork_write(write, &tmp, pause) {
                Ok(pid) => {
                    tracing::info!(
                        seq = last,
                        pid,
                        ms = t.elapsed().as_millis() as u64,
                        "snapshot taken (forked)"
                    );
                    forked = true;
                    finish = Some(Box::new(move || super::forked::wait(pid)));
                }
                Err(e) => {
                    tracing::warn!("fork for a snapshot: {e}; the driver writes it");
                    self.snapshots.no_fork.store(true, Ordering::Release);
                }
            }
        }
        let finish = match finish {
            Some(f) => f,
            None => {
                let Some((file, bytes)) = self.write_snapshot(&tmp) else {
                    return;
                };
                if std::mem::take(&mut self.snapshots.cut) {
                    // Dead between the temporary file and its rename: the previous snapshot
                    // and the journal after it must still hold everything.
                    self.fatal = Some("the server died while writing a snapshot".into());
                    return;
                }
                tracing::info!(
                    seq = last,
                    bytes,
                    ms = t.elapsed().as_millis() as u64,
                    "snapshot taken"
                );
                Box::new(move || {
                    if let Some(ms) = pause {
                        std::thread::sleep(std::time::Duration::from_millis(ms));
                    }
                    file.sync_all().map_err(|e| e.to_string())
                })
            }
        };
        self.snapshots.taken = last;
        busy.store(true, Ordering::Release);
        let no_fork = self.snapshots.no_fork.clone();
        let write = move || {
            match finish().and_then(|()| place.publish(&tmp, last)) {
                Ok(()) => {
                    tracing::info!(
                        seq = last,
                        ms = t.elapsed().as_millis() as u64,
                        "snapshot written"
                    );
                    saved.store(last, Ordering::Release);
                }
                Err(e) if forked => {
                    tracing::warn!(
                        "a forked snapshot failed ({e}): snapshots are written by the driver from now on"
                    );
                    no_fork.store(true, Ordering::Release);
                }
                Err(e) => tracing::warn!("writing the snapshot {}: {e}", place.describe()),
            }
            busy.store(false, Ordering::Release);
        };
        if here {
            write();
            self.snapshot_if_due(false);
        } else {
            std::thread::spawn(write);
        }
    }

    /// Die in the next snapshot written within the turn, after its temporary file and before
    /// its rename ([`Parts::inline_snapshots`](super::Parts)): [`Driver::step`] then fails
    /// as if the journal could not be written. For the simulation harness's faults.
    pub fn cut_next_snapshot(&mut self) {
        self.snapshots.cut = true;
    }

    /// Restore the state of the snapshot on disk, if there is one; the journal entry it
    /// covers up to (0: none).
    pub(crate) fn restore_snapshot(&mut self) -> Result<i64, StartError> {
        let place = self.snapshots.place.clone();
        let bad = |m: String| StartError::Snapshot(place.describe(), m);
        let t = std::time::Instant::now();
        let Some(bytes) = place.load().map_err(bad)? else {
            return Ok(0);
        };
        let read_ms = t.elapsed().as_millis() as u64;
        let (s, runs): (State, _) =
            super::snapfile::read(&bytes).map_err(|e| bad(e.to_string()))?;
        drop(bytes);
        let decode_ms = t.elapsed().as_millis() as u64 - read_ms;
        let form = runs.form();
        let core = super::snapfile::join(s.core, runs);
        let (core, changes) =
            Scheduler::restore(self.config.scheduler.clone(), &self.config.sites, core)
                .map_err(|e| bad(e.to_string()))?;
        tracing::info!(
            read_ms,
            decode_ms,
            core_ms = t.elapsed().as_millis() as u64 - read_ms - decode_ms,
            form,
            "snapshot read"
        );
        if form != coalloc_core::scheduler::snapshot::SNAPSHOT_VERSION {
            tracing::warn!(
                "the snapshot is of an older form ({form}); read and converted, the next one is written in this build's"
            );
        }
        for c in &changes {
            tracing::warn!("the configuration changed since the snapshot: {c}");
        }
        self.core = core;
        self.now = s.now;
        self.launches = s.launches;
        self.rv.secrets = s.secrets;
        self.rv.kv = s.kv;
        self.abort_reasons = s.abort_reasons;
        self.aborts = s.aborts;
        self.committed = s.committed;
        self.failed = s.failed;
        self.ended_at = s.ended_at;
        self.arrays = s.arrays;
        self.catalog = s.catalog;
        self.transfers = s.transfers.into_iter().map(|(k, t)| (k, t.run())).collect();
        self.staging = s.staging;
        // A replay resizes a cloud site's backend at each lease and release: once for
        // every VM leased and not yet gone.
        for v in s.vms.values().filter(|v| v.node.is_some()) {
            self.backends[v.site].resize(self.vm_processors(v.site));
        }
        self.vms = s.vms;
        self.snapshots.saved.store(s.seq, Ordering::Release);
        self.snapshots.taken = s.seq;
        Ok(s.seq)
    }
}

/// `COALLOC_SNAPSHOT_PAUSE_MS` (tests only).
fn pause_ms() -> Option<u64> {
    std::env::var("COALLOC_SNAPSHOT_PAUSE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
}

impl Driver {
    /// The state a replay of the journal rebuilds, part by part as bytes to compare: the
    /// core and the driver's journaled bookkeeping (the simulation harness checks that a
    /// restart reaches the state of the run that wrote the journal). Each launch is taken
    /// without its `ended` mark, which the driver sets without an entry when the core has
    /// moved on (a restart's reconcile sets it again). `None` if the queue policy cannot be
    /// saved.
    pub fn digest(&self) -> Option<Vec<(&'static str, Vec<u8>)>> {
        let core = self.core.snapshot()?;
        let launches: Vec<_> = self
            .launches
            .iter()
            .map(|(k, l)| (*k, l.job, l.component, l.site, l.count, &l.remote))
            .collect();
        let bytes = |v: &dyn erased::Ser| v.bytes();
        Some(vec![
            ("core", bytes(&core)),
            ("launches", bytes(&launches)),
            ("secrets", bytes(&self.rv.secrets)),
            ("kv", bytes(&self.rv.kv)),
            ("committed", bytes(&self.committed)),
            ("failed", bytes(&self.failed)),
            ("arrays", bytes(&self.arrays)),
            ("catalog", bytes(&self.catalog)),
        ])
    }
}

/// Serializing values of different types through one function.
mod erased {
    pub trait Ser {
        fn bytes(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Ser for T {
        fn bytes(&self) -> Vec<u8> {
            postcard::to_allocvec(self).unwrap_or_default()
        }
    }
}

impl Driver {
    /// The core's state as text, to show how two states differ ([`Driver::digest`]).
    pub fn describe_core(&self) -> String {
        format!("{:#?}", self.core.snapshot())
    }
}
