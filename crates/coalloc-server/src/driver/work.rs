//! The driver's file work, passed in as a small trait (issue 30 item 1): a transfer of an
//! input file between sites (`transfers.rs`), a launch's stage-in and stage-out
//! (`staging.rs`), a cached replica's removal, a file read at an agent's site for its
//! registration (`files.rs`). The driver describes each piece of work as a [`Work`] and
//! hands it to its [`Spawner`]; what comes of it comes back as a [`Report`] on the driver's
//! channel. `coalloc serve` runs each on a thread of its own ([`Threads`]); the simulation
//! harness plays them on its virtual clock (and cuts a transfer half-way).

use super::Msg;
use crate::msg::ApiError;
use crate::msg::{Reply, Report};
use crate::transfer::pump::{fetch, pull, Control, SiteFile};
use crate::transfer::{FileStat, TransferReport};
use crate::views::ReplicaView;
use coalloc_backends::files::{FileAnswer, FileOp};
use coalloc_backends::{Backend, SubmitRequest};
use coalloc_core::model::Time;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One piece of file work.
pub enum Work {
    /// Pull `size` bytes of checksum `sum` from `src` to `dest` within `timeout` ms, unless
    /// `cancel` is set: [`TransferReport::Progress`] on the way, [`TransferReport::Done`]
    /// at the end (the path written, or why not).
    Transfer {
        transfer: u64,
        /// Logical file `file` from site `from` to site `to` (the configuration's indexes).
        file: String,
        from: usize,
        to: usize,
        src: SiteFile,
        dest: SiteFile,
        size: u64,
        sum: String,
        timeout: Time,
        cancel: Arc<AtomicBool>,
    },
    /// Put the files `(SRC DEST)` of this machine into `dir` at the site, then
    /// [`Report::Staged`] with `request` (to submit, or to fail).
    StageIn {
        backend: Arc<dyn Backend>,
        base: PathBuf,
        dir: String,
        files: Vec<(String, String)>,
        request: Box<SubmitRequest>,
        timeout: Time,
    },
    /// Bring a launch's outputs back (site path, local path), then remove `clean_up` (site
    /// paths). Nothing is reported.
    StageOut {
        backend: Arc<dyn Backend>,
        base: PathBuf,
        job: u64,
        launch: u64,
        copies: Vec<(String, PathBuf)>,
        clean_up: Vec<String>,
    },
    /// Remove a file at a site (an evicted cached replica). Nothing is reported.
    Remove {
        backend: Arc<dyn Backend>,
        base: PathBuf,
        path: String,
    },
    /// Read a file at a site for its size and checksum: [`Report::Statted`].
    Stat {
        backend: Arc<dyn Backend>,
        base: PathBuf,
        site: String,
        name: String,
        path: String,
        reply: Reply<Result<ReplicaView, ApiError>>,
    },
}

/// Where the driver's file work runs; [`Spawner::spawn`] returns at once.
pub trait Spawner: Send {
    fn spawn(&self, work: Work);
}

/// Each piece of work on a thread of its own, reporting on the driver's channel.
pub struct Threads {
    pub tx: Sender<Msg>,
}

impl Spawner for Threads {
    fn spawn(&self, work: Work) {
        let tx = self.tx.clone();
        std::thread::spawn(move || run(work, &tx));
    }
}

/// Carry out one piece of work (blocking).
pub fn run(work: Work, tx: &Sender<Msg>) {
    let report = |r: Report| {
        let _ = tx.send(Msg::Site(r));
    };
    match work {
        Work::Transfer {
            transfer,
            src,
            file: _,
            from: _,
            to: _,
            dest,
            size,
            sum,
            timeout,
            cancel,
        } => {
            let begin = Instant::now();
            let ctl = Control {
                cancel: &cancel,
                deadline: begin + Duration::from_millis(timeout.max(0) as u64),
                retries: 5,
                backoff: Duration::from_millis(500),
            };
            let mut last = Instant::now() - Duration::from_secs(1);
            let mut progress = |bytes: u64| {
                if last.elapsed() >= Duration::from_millis(250) || bytes == size {
                    last = Instant::now();
                    report(Report::Transfer(TransferReport::Progress {
                        transfer,
                        bytes,
                    }));
                }
            };
            let (result, moved) = match pull(&src, &dest, size, &sum, &ctl, &mut progress) {
                Ok(p) => (Ok(p.path), p.moved),
                Err(e) => (Err(e), 0),
            };
            report(Report::Transfer(TransferReport::Done {
                transfer,
                result,
                moved,
                millis: begin.elapsed().as_millis() as u64,
            }));
        }
        Work::StageIn {
            backend,
            base,
            dir,
            files,
            request,
            timeout,
        } => {
            let cancel = AtomicBool::new(false);
            let ctl = Control {
                cancel: &cancel,
                deadline: Instant::now() + Duration::from_millis(timeout.max(0) as u64),
                retries: 3,
                backoff: Duration::from_millis(200),
            };
            let mut result = Ok(());
            for (src, dest) in &files {
                let stat = match crate::transfer::stat(Path::new(src)) {
                    Ok(s) => s,
                    Err(e) => {
                        result = Err(format!("file_stage_in: {src}: {e}"));
                        break;
                    }
                };
                let from = SiteFile {
                    backend: None,
                    base: base.clone(),
                    path: src.clone(),
                };
                let to = SiteFile {
                    backend: Some(backend.clone()),
                    base: base.clone(),
                    path: Path::new(&dir).join(dest).to_string_lossy().into_owned(),
                };
                if let Err(e) = pull(&from, &to, stat.size, &stat.blake3, &ctl, &mut |_| {}) {
                    result = Err(format!("file_stage_in: {src} -> {dest}: {e}"));
                    break;
                }
            }
            report(Report::Staged {
                launch: request.launch,
                request,
                result,
            });
        }
        Work::StageOut {
            backend,
            base,
            job,
            launch,
            copies,
            clean_up,
        } => {
            for (path, local) in copies {
                let src = SiteFile {
                    backend: Some(backend.clone()),
                    base: base.clone(),
                    path,
                };
                if let Err(e) = fetch(&src, &local) {
                    tracing::warn!(job, launch, "bringing an output back: {e}");
                }
            }
            for path in clean_up {
                if let Err(e) = backend.file(&base, FileOp::Remove { path }) {
                    tracing::warn!(job, launch, "file_clean_up: {e}");
                }
            }
        }
        Work::Remove {
            backend,
            base,
            path,
        } => {
            let _ = backend.file(&base, FileOp::Remove { path });
        }
        Work::Stat {
            backend,
            base,
            site,
            name,
            path,
            reply,
        } => {
            let op = FileOp::Stat { path: path.clone() };
            let result = match backend.file(&base, op) {
                Ok(FileAnswer::Stat { size, blake3 }) => Ok(FileStat { size, blake3 }),
                Ok(other) => Err(format!("the agent answered {other:?}")),
                Err(e) => Err(e.to_string()),
            };
            report(Report::Statted {
                site,
                name,
                path,
                result,
                reply,
            });
        }
    }
}
