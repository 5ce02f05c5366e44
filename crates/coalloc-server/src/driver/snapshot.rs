//! Snapshots of the server's state and compaction of the journal (issue 23, item 4).
//!
//! Once `server.snapshot_every` entries have been committed since the last snapshot, the
//! driver, between two turns (every entry committed, every command carried out: a
//! consistent point), serializes what a replay of the journal up to its last entry `S`
//! would rebuild: the core's state ([`Scheduler::snapshot`]) and the driver's own
//! bookkeeping (launches and their handles, secrets, rendezvous values, aborts, VMs,
//! replicas, transfers, staging, arrays, jobs waiting to age out), streaming the bytes
//! ([`super::codec`]) to `snapshot.bin.tmp` as they are made (no buffer of the whole state,
//! which the allocator would keep: issue 23, item 1). A thread then syncs that file, renames
//! it to `snapshot.bin` and syncs the directory; then the driver deletes the journal's
//! entries before `S`.
//!
//! A restart reads `snapshot.bin`, if there is one, and replays only the entries after
//! `S`. A kill at any moment loses nothing: until the rename, the previous snapshot and the
//! entries after it are all there (the journal is compacted only up to a snapshot already
//! on disk); after it, the new one is, and entries it covers that are still in the journal
//! are skipped by their number. `COALLOC_SNAPSHOT_PAUSE_MS` (tests only) makes the writing
//! thread stop that long before it syncs and renames the temporary file, so that a test can
//! kill the server there.

use super::clouds::VmInfo;
use super::secrets::Secrets;
use super::staging::Staging;
use super::transfers::TransferRun;
use super::{Driver, LaunchInfo, StartError};
use crate::catalog::Catalog;
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
    /// `DIR/snapshot.bin`.
    path: PathBuf,
    /// The journal entry the newest snapshot on disk covers up to (0: none).
    saved: Arc<AtomicI64>,
    /// A snapshot is being written.
    busy: Arc<AtomicBool>,
    /// The entry the last snapshot taken covers up to.
    taken: i64,
    /// The journal holds no entry before this one.
    compacted: i64,
}

impl Snapshots {
    pub(crate) fn new(state: &crate::state::StateDir) -> Snapshots {
        Snapshots {
            path: state.root.join("snapshot.bin"),
            saved: Arc::new(AtomicI64::new(0)),
            busy: Arc::new(AtomicBool::new(false)),
            taken: 0,
            compacted: 0,
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

/// What a replay up to entry `seq` rebuilds, borrowed to write.
#[derive(Serialize)]
struct StateRef<'a> {
    seq: i64,
    now: Time,
    core: SnapshotRef<'a>,
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
    /// Write the state, covering the journal up to its last entry, to `tmp` (flushed, not
    /// synced): the file and its size; `None` if the queue policy cannot be saved or the
    /// file cannot be written.
    fn write_snapshot(&self, tmp: &Path) -> Option<(std::fs::File, u64)> {
        let state = StateRef {
            seq: self.journal.last_seq(),
            now: self.now,
            core: self.core.snapshot()?,
            launches: &self.launches,
            secrets: &self.secrets,
            kv: &self.kv,
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
        };
        let written = std::fs::File::create(tmp)
            .map_err(|e| e.to_string())
            .and_then(|f| {
                let w = std::io::BufWriter::with_capacity(1 << 20, f);
                let w = super::codec::to_writer(&state, w).map_err(|e| e.to_string())?;
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
    /// a new snapshot if `snapshot_every` entries came since the last one (`wait`: write it
    /// before returning, as at a stop; otherwise a thread writes it).
    pub(crate) fn snapshot_if_due(&mut self, wait: bool) {
        let saved = self.snapshots.saved.load(Ordering::Acquire);
        if saved > self.snapshots.compacted {
            match self.journal.compact_before(saved) {
                Ok(n) => {
                    tracing::info!(entries = n, before = saved, "journal compacted");
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
        let t = std::time::Instant::now();
        let tmp = self.snapshots.path.with_extension("bin.tmp");
        let Some((file, bytes)) = self.write_snapshot(&tmp) else {
            return;
        };
        tracing::info!(
            seq = last,
            bytes,
            ms = t.elapsed().as_millis() as u64,
            "snapshot taken"
        );
        self.snapshots.taken = last;
        self.snapshots.busy.store(true, Ordering::Release);
        let (path, saved, busy) = (
            self.snapshots.path.clone(),
            self.snapshots.saved.clone(),
            self.snapshots.busy.clone(),
        );
        let write = move || {
            match put_in_place(file, &tmp, &path) {
                Ok(()) => saved.store(last, Ordering::Release),
                Err(e) => tracing::warn!("writing the snapshot {}: {e}", path.display()),
            }
            busy.store(false, Ordering::Release);
        };
        if wait {
            write();
            self.snapshot_if_due(false);
        } else {
            std::thread::spawn(write);
        }
    }

    /// Restore the state of the snapshot on disk, if there is one; the journal entry it
    /// covers up to (0: none).
    pub(crate) fn restore_snapshot(&mut self) -> Result<i64, StartError> {
        let path = self.snapshots.path.clone();
        let bad = |m: String| StartError::Snapshot(path.display().to_string(), m);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(bad(e.to_string())),
        };
        let s: State = super::codec::from_bytes(&bytes).map_err(|e| bad(e.to_string()))?;
        drop(bytes);
        self.core = Scheduler::restore(self.config.scheduler.clone(), &self.config.sites, s.core)
            .map_err(|e| bad(e.to_string()))?;
        self.now = s.now;
        self.launches = s.launches;
        self.secrets = s.secrets;
        self.kv = s.kv;
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

/// Sync `file`, written at `tmp`, and rename it to `path`, so that `path` holds either its
/// old content or all of the new, on disk when this returns.
fn put_in_place(file: std::fs::File, tmp: &Path, path: &Path) -> std::io::Result<()> {
    if let Some(ms) = std::env::var("COALLOC_SNAPSHOT_PAUSE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    file.sync_all()?;
    drop(file);
    std::fs::rename(tmp, path)?;
    std::fs::File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()
}
