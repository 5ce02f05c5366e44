//! Carrying out the core's `StartTransfer` (seed 000 §2.5) for real: the input file is
//! pulled from the replica's site to the execution site (`crate::transfer`), and the core
//! hears `TransferDone` only when the bytes are there with the right checksum — first a
//! `ReplicaAdded` (cached) entry for the new replica, then `TransferDone { ok: true }`.
//! A transfer that fails, or outlives `server.transfer_timeout`, is `TransferDone { ok:
//! false }`: the core counts it against the file's site and re-sources it from another
//! replica (a new `StartTransfer` to the same site, which resumes from the part file the
//! failed one left), or, with no other replica, places the component again
//! (`coalloc_core::scheduler` transfers.rs).
//!
//! A restart finds the transfers the journal started and did not end, and starts them
//! again; each resumes from the part file its cut predecessor left.

use super::work::Work;
use super::Driver;
use crate::entry::Entry;
use crate::transfer::pump::SiteFile;
use crate::transfer::TransferReport;
use crate::views::TransferView;
use coalloc_core::model::Time;
use coalloc_core::scheduler::jobs::Phase;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One transfer the driver carries out.
#[derive(Debug, Clone)]
pub(crate) struct TransferRun {
    pub job: u64,
    pub component: usize,
    pub from: usize,
    pub to: usize,
    pub file: String,
    pub size: u64,
    pub bytes: u64,
    /// When it is failed if not done.
    pub deadline: Option<Time>,
    pub state: &'static str,
    pub reason: Option<String>,
    pub cancel: Arc<AtomicBool>,
    /// The running transfer of the same file to the same site that this one waits for (two
    /// components of a job on one site need the file once).
    pub after: Option<u64>,
}

impl Driver {
    /// The core asked for a transfer; during replay it is only booked.
    pub(super) fn start_transfer(
        &mut self,
        transfer: u64,
        job: u64,
        component: usize,
        from: usize,
        to: usize,
    ) {
        let file = self
            .core
            .job(job)
            .and_then(|j| j.job.extra().input_file.clone());
        let (file, size) = file.map(|f| (f.name, f.size)).unwrap_or_default();
        self.transfers.insert(
            transfer,
            TransferRun {
                job,
                component,
                from,
                to,
                file,
                size,
                bytes: 0,
                deadline: None,
                state: "waiting",
                reason: None,
                cancel: Arc::new(AtomicBool::new(false)),
                after: None,
            },
        );
        if !self.replaying {
            self.metrics.transfers.inc();
            self.run_transfer(transfer);
        }
    }

    /// Journal entries that end transfers, booked on replay and live.
    pub(super) fn transfer_effect(&mut self, e: &Entry) {
        if let Entry::TransferDone { transfer, ok } = e {
            if let Some(t) = self.transfers.get_mut(transfer) {
                // A component that came to the barrier after its job committed waits
                // for its file: its held check-ins look again ([`Driver::barrier_state`]).
                let job = t.job;
                self.rv.touch(job);
                let t = self.transfers.get_mut(transfer).expect("just found");
                t.cancel.store(true, Ordering::Relaxed);
                t.deadline = None;
                if *ok {
                    t.state = "done";
                    t.bytes = t.size;
                } else {
                    t.state = "failed";
                }
            }
        }
    }

    /// After replay: start again what the journal left under way.
    pub(super) fn resume_transfers(&mut self) {
        let open: Vec<u64> = self
            .transfers
            .iter()
            .filter(|(_, t)| t.state == "waiting")
            .map(|(k, _)| *k)
            .collect();
        for t in open {
            self.run_transfer(t);
        }
    }

    fn fail_transfer(&mut self, transfer: u64, reason: String) {
        let Some(t) = self.transfers.get_mut(&transfer) else {
            return;
        };
        t.cancel.store(true, Ordering::Relaxed);
        t.state = "failed";
        t.reason = Some(reason.clone());
        let v = json!({"event": "transfer_failed", "job": t.job, "component": t.component,
            "transfer": transfer, "file": t.file, "reason": reason});
        tracing::warn!(transfer, %reason, "transfer failed");
        self.emit(v);
        self.internal.push_back(Entry::TransferDone {
            transfer,
            ok: false,
        });
        // Those that waited for it start on their own (the first runs, the others wait
        // for that one).
        for w in self.waiting_for(transfer) {
            if let Some(run) = self.transfers.get_mut(&w) {
                run.after = None;
            }
            self.run_transfer(w);
        }
    }

    /// Job `job` ended: its transfers stop, and those of other jobs that waited for one of
    /// them start on their own.
    pub(super) fn drop_transfers_of(&mut self, job: u64) {
        let gone: Vec<u64> = self
            .transfers
            .iter()
            .filter(|(_, t)| t.job == job)
            .map(|(k, _)| *k)
            .collect();
        for k in &gone {
            if let Some(t) = self.transfers.remove(k) {
                t.cancel.store(true, Ordering::Relaxed);
            }
        }
        for k in gone {
            for w in self.waiting_for(k) {
                if let Some(run) = self.transfers.get_mut(&w) {
                    run.after = None;
                }
                self.run_transfer(w);
            }
        }
    }

    /// The transfers waiting for `transfer` to bring their file.
    fn waiting_for(&self, transfer: u64) -> Vec<u64> {
        self.transfers
            .iter()
            .filter(|(_, t)| t.after == Some(transfer) && t.state == "running")
            .map(|(k, _)| *k)
            .collect()
    }

    fn run_transfer(&mut self, transfer: u64) {
        let Some(t) = self.transfers.get(&transfer).cloned() else {
            return;
        };
        let names = (
            self.config.sites[t.from].name.clone(),
            self.config.sites[t.to].name.clone(),
        );
        if t.file.is_empty() {
            return self.fail_transfer(transfer, "the job has no input file".into());
        }
        let Some(src) = self.catalog.get(&t.file, t.from).cloned() else {
            return self.fail_transfer(
                transfer,
                format!("no replica of `{}` on `{}` any more", t.file, names.0),
            );
        };
        let (Some(path), Some(sum)) = (src.path.clone(), src.blake3.clone()) else {
            return self.fail_transfer(
                transfer,
                format!(
                    "the replica of `{}` on `{}` is declared in the site configuration without a path: register it (`coalloc file register {} {} PATH`) to send it",
                    t.file, names.0, names.0, t.file
                ),
            );
        };
        // An agent's site keeps its files under the agent's state directory; a site on this
        // machine under the server's.
        let dest = if self.at_agent(t.to) {
            format!("files/{}", t.file)
        } else {
            self.state
                .files(&names.1)
                .join(&t.file)
                .to_string_lossy()
                .into_owned()
        };
        let timeout = self.config.files.transfer_timeout;
        // The same file already on its way to the same site: wait for it.
        let first = self.transfers.iter().find(|(k, o)| {
            **k != transfer
                && o.to == t.to
                && o.file == t.file
                && o.state == "running"
                && o.after.is_none()
        });
        if let Some(first) = first.map(|(k, _)| *k) {
            let run = self.transfers.get_mut(&transfer).expect("cloned above");
            run.state = "running";
            run.size = src.size;
            run.after = Some(first);
            run.deadline = Some(self.now + timeout);
            self.emit(json!({"event": "transfer_started", "job": t.job, "component": t.component,
                "transfer": transfer, "file": t.file, "from": names.0, "to": names.1, "size": src.size}));
            return;
        }
        let pinned = self.pinned_files();
        let evict =
            match self
                .catalog
                .make_room(t.to, src.size, self.config.files.cache_limit, &pinned)
            {
                Ok(e) => e,
                Err(e) => return self.fail_transfer(transfer, format!("site `{}`: {e}", names.1)),
            };
        for name in evict {
            if let Some(path) = self.catalog.get(&name, t.to).and_then(|r| r.path.clone()) {
                self.work.spawn(Work::Remove {
                    backend: self.backends[t.to].clone(),
                    base: self.state.root.clone(),
                    path,
                });
            }
            let _ = self.apply(Entry::ReplicaRemoved { site: t.to, name });
        }
        let run = self.transfers.get_mut(&transfer).expect("cloned above");
        run.state = "running";
        run.size = src.size;
        run.deadline = Some(self.now + timeout);
        self.emit(json!({"event": "transfer_started", "job": t.job, "component": t.component,
            "transfer": transfer, "file": t.file, "from": names.0, "to": names.1, "size": src.size}));
        let end = |site: usize, path: String| SiteFile {
            backend: Some(self.backends[site].clone()),
            base: self.state.root.clone(),
            path,
        };
        let work = Work::Transfer {
            transfer,
            file: t.file.clone(),
            from: t.from,
            to: t.to,
            src: end(t.from, path),
            dest: end(t.to, dest),
            size: src.size,
            sum,
            timeout,
            cancel: t.cancel.clone(),
        };
        self.work.spawn(work);
    }

    /// Where a transfer puts logical file `name` on `site`: an agent's site keeps its files
    /// under the agent's state directory (a relative path, resolved there), a site on this
    /// machine under the server's.
    pub(super) fn cache_path(&self, site: usize, name: &str) -> String {
        if self.at_agent(site) {
            format!("files/{name}")
        } else {
            let dir = self.state.files(&self.config.sites[site].name);
            dir.join(name).to_string_lossy().into_owned()
        }
    }

    /// Input files of jobs that are placed and not over: not to be evicted.
    fn pinned_files(&self) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = self
            .transfers
            .values()
            .filter(|t| matches!(t.state, "waiting" | "running"))
            .map(|t| t.file.clone())
            .collect();
        for j in self.core.jobs() {
            if !matches!(j.phase, Phase::Queued) && !j.ended() {
                if let Some(f) = &j.job.extra().input_file {
                    out.insert(f.name.clone());
                }
            }
        }
        out
    }

    pub(super) fn transfer_report(&mut self, r: TransferReport) {
        match r {
            TransferReport::Progress { transfer, bytes } => {
                let Some(t) = self.transfers.get_mut(&transfer) else {
                    return;
                };
                t.bytes = bytes;
                let v = json!({"event": "transfer_progress", "job": t.job, "component": t.component,
                    "transfer": transfer, "file": t.file, "bytes": bytes, "size": t.size});
                self.emit(v);
            }
            TransferReport::Done {
                transfer,
                result,
                moved,
                millis,
            } => {
                let Some(t) = self.transfers.get(&transfer).cloned() else {
                    return;
                };
                if t.state != "running" {
                    return;
                }
                let path = match result {
                    Ok(p) => p,
                    Err(e) => return self.fail_transfer(transfer, e),
                };
                let sum = self
                    .catalog
                    .get(&t.file, t.from)
                    .and_then(|r| r.blake3.clone())
                    .unwrap_or_default();
                if moved > 0 {
                    self.internal.push_back(Entry::TransferMeasured {
                        from: t.from,
                        to: t.to,
                        bytes: moved,
                        millis,
                    });
                }
                self.emit(
                    json!({"event": "transfer_done", "job": t.job, "component": t.component,
                    "transfer": transfer, "file": t.file, "bytes": t.size, "moved": moved,
                    "ms": millis}),
                );
                self.internal.push_back(Entry::ReplicaAdded {
                    site: t.to,
                    name: t.file.clone(),
                    path,
                    size: t.size,
                    blake3: sum,
                    cached: true,
                });
                self.internal
                    .push_back(Entry::TransferDone { transfer, ok: true });
                // The file is there for those that waited for it too.
                for w in self.waiting_for(transfer) {
                    let Some(o) = self.transfers.get(&w).cloned() else {
                        continue;
                    };
                    self.emit(
                        json!({"event": "transfer_done", "job": o.job, "component": o.component,
                        "transfer": w, "file": o.file, "bytes": o.size, "moved": 0, "ms": 0}),
                    );
                    self.internal.push_back(Entry::TransferDone {
                        transfer: w,
                        ok: true,
                    });
                }
            }
        }
    }

    /// Fail the transfers past their deadline (one that never reports would hold its job
    /// for ever).
    pub(super) fn transfer_timeouts(&mut self) {
        let late: Vec<u64> = self
            .transfers
            .iter()
            .filter(|(_, t)| t.state == "running" && t.deadline.is_some_and(|d| d <= self.now))
            .map(|(k, _)| *k)
            .collect();
        for t in late {
            let ms = self.config.files.transfer_timeout;
            self.fail_transfer(t, format!("timed out after {ms} ms"));
        }
    }

    /// The earliest transfer deadline, for the driver's wake-up.
    pub(super) fn next_transfer_deadline(&self) -> Option<Time> {
        self.transfers.values().filter_map(|t| t.deadline).min()
    }

    pub(super) fn transfer_views(&self, job: u64) -> Vec<TransferView> {
        self.transfers
            .iter()
            .filter(|(_, t)| t.job == job)
            .map(|(k, t)| TransferView {
                transfer: *k,
                component: t.component,
                file: t.file.clone(),
                from: self.config.sites[t.from].name.clone(),
                to: self.config.sites[t.to].name.clone(),
                bytes: t.bytes,
                size: t.size,
                state: t.state.into(),
                reason: t.reason.clone(),
            })
            .collect()
    }
}
