//! Input files in the harness (issue 30 item 4): the files of the plan ([`super::plan::
//! FilePlan`]) are at their sites from the start and registered by the client; the
//! driver's file work ([`Work`], handed out through its `Spawner`) is played on the virtual
//! clock:
//!
//! - a transfer moves the bytes its destination lacks at 50 to 500 MB/s (drawn per
//!   transfer), reports its progress half-way and its end; while a
//!   [`Fault::CutTransfers`](super::plan::Fault::CutTransfers) lasts, a transfer that
//!   starts is cut half-way (it fails; the bytes that came stay in the part file, so the
//!   next transfer of the file to that site sends only the rest, as `transfer::pump::pull`
//!   resumes). A transfer dies with the server that started it.
//! - a stage-in succeeds (the plans stage nothing in); a read of a file at an agent's site
//!   fails; outputs and removals report nothing.
//!
//! The invariant ([`World::files_released`]): a process passes the barrier only when the
//! job's input file is at its site, and at the site of every component the commit waited
//! for (every started component but an optional one not at the barrier: that one passes
//! later, once its own file is there).

use super::{Ev, Violation, World, RETRY};
use coalloc_core::model::{StartType, Time};
use coalloc_core::scheduler::jobs::CompPhase;
use coalloc_server::driver::work::Work;
use coalloc_server::msg::{ApiError, Msg, Report, Request};
use coalloc_server::transfer::{FileStat, TransferReport};
use coalloc_server::views::ReplicaView;
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use tokio::sync::oneshot;

/// A step of the file work.
#[derive(Debug)]
pub enum Step {
    /// The client registers planned file `f`'s replica at a site.
    Register(usize, usize),
    /// A transfer's bytes reached `bytes` at site `to`; `end`: it ends now (whole, or cut).
    Transfer {
        transfer: u64,
        file: String,
        to: usize,
        size: u64,
        bytes: u64,
        end: Option<bool>,
        moved: u64,
        millis: u64,
    },
}

/// A registration's answer.
type Registered = oneshot::Receiver<Result<ReplicaView, ApiError>>;

/// What the harness knows of the files.
#[derive(Default)]
pub struct Files {
    /// (file, site): the whole file is there.
    present: BTreeSet<(String, usize)>,
    /// (file, site): bytes in its part file.
    partial: BTreeMap<(String, usize), u64>,
    /// Transfers started before then are cut half-way.
    pub(super) cut_until: Time,
    /// Registrations waiting for their answer: (file, site).
    waiting: Vec<(usize, usize, Registered)>,
    /// Planned jobs refused for want of a usable replica of their file.
    pub(super) refused: BTreeSet<usize>,
    pub(super) transfers: u32,
    pub(super) cut: u32,
}

impl World {
    /// The files are at their sites from the start; the client registers them.
    pub(super) fn files_start(&mut self) {
        for (f, file) in self.plan.files.clone().into_iter().enumerate() {
            for s in file.sites.clone() {
                self.files.present.insert((file.name.clone(), s));
                self.at(self.now, Ev::Work(0, Step::Register(f, s)));
            }
        }
    }

    /// Play one piece of the driver's file work.
    pub(super) fn play(&mut self, w: Work) {
        let (now, epoch) = (self.now, self.epoch);
        match w {
            Work::Transfer {
                transfer,
                file,
                to,
                size,
                ..
            } => {
                self.files.transfers += 1;
                let key = (file.clone(), to);
                let have = self.files.partial.get(&key).copied().unwrap_or(0).min(size);
                let rest = size - have;
                let per_ms = self.rng.random_range(50_000..500_000u64);
                let ms = (rest / per_ms) as Time + self.rng.random_range(10..200);
                let cut = now < self.files.cut_until;
                self.log(|| {
                    format!("transfer {transfer} of {file} to s{to}: {rest} of {size} bytes in {ms} ms{}", if cut { ", cut half-way" } else { "" })
                });
                let step =
                    |bytes: u64, end: Option<bool>, moved: u64, millis: Time| Step::Transfer {
                        transfer,
                        file: file.clone(),
                        to,
                        size,
                        bytes,
                        end,
                        moved,
                        millis: millis as u64,
                    };
                let half = step(have + rest / 2, cut.then_some(false), rest / 2, ms / 2);
                self.at(now + ms / 2, Ev::Work(epoch, half));
                if cut {
                    self.files.cut += 1;
                } else {
                    self.at(now + ms, Ev::Work(epoch, step(size, Some(true), rest, ms)));
                }
            }
            Work::StageIn { request, .. } => {
                let r = Report::Staged {
                    launch: request.launch,
                    request,
                    result: Ok(()),
                };
                self.at(now + 10, Ev::Report(epoch, r));
            }
            Work::Stat {
                site,
                name,
                path,
                reply,
                ..
            } => {
                let result = Err("no agent reads files in the simulation".into());
                let r = Report::Statted {
                    site,
                    name,
                    path,
                    result,
                    reply,
                };
                self.at(now + 10, Ev::Report(epoch, r));
            }
            // Outputs and removals: nothing to report, nothing the invariants see.
            Work::StageOut { .. } | Work::Remove { .. } => {}
        }
    }

    pub(super) fn files_event(&mut self, epoch: u64, step: Step, inputs: &mut Vec<Msg>) {
        match step {
            Step::Register(f, s) if self.server.is_none() => {
                self.at(self.now + RETRY, Ev::Work(0, Step::Register(f, s)));
            }
            Step::Register(f, s) => {
                let file = &self.plan.files[f];
                let (reply, rx) = oneshot::channel();
                inputs.push(Msg::Api(Request::FileRegister {
                    site: self.plan.sites[s].name.clone(),
                    name: file.name.clone(),
                    path: format!("/sim/{}", file.name),
                    stat: Some(FileStat {
                        size: file.size,
                        blake3: "5e".repeat(32),
                    }),
                    read_here: false,
                    reply,
                }));
                self.files.waiting.push((f, s, rx));
            }
            Step::Transfer {
                transfer,
                file,
                to,
                size,
                bytes,
                end,
                moved,
                millis,
            } => {
                // The transfer's thread died with its server.
                if epoch != self.epoch || self.server.is_none() {
                    return;
                }
                let key = (file, to);
                let part = self.files.partial.entry(key.clone()).or_insert(0);
                *part = (*part).max(bytes);
                let r = match end {
                    None => TransferReport::Progress { transfer, bytes },
                    Some(ok) => {
                        let result = if ok {
                            self.files.present.insert(key.clone());
                            Ok(format!("/sim/s{to}/{}", key.0))
                        } else {
                            Err(format!("connection reset after {bytes} of {size} bytes"))
                        };
                        TransferReport::Done {
                            transfer,
                            result,
                            moved,
                            millis,
                        }
                    }
                };
                inputs.push(Msg::Site(Report::Transfer(r)));
            }
        }
    }

    /// The answers to the registrations (after a step).
    pub(super) fn files_after_step(&mut self) -> Result<(), Violation> {
        use oneshot::error::TryRecvError;
        for (f, s, mut rx) in std::mem::take(&mut self.files.waiting) {
            match rx.try_recv() {
                Ok(Ok(v)) => self
                    .log(|| format!("file {} registered at s{s}: {v:?}", self.plan.files[f].name)),
                Ok(Err(e)) => {
                    return Err(self.violation(format!(
                        "registering file {} at s{s} refused: {}",
                        self.plan.files[f].name, e.message
                    )))
                }
                Err(TryRecvError::Empty) => self.files.waiting.push((f, s, rx)),
                Err(TryRecvError::Closed) => {
                    self.at(self.now + RETRY, Ev::Work(0, Step::Register(f, s)));
                }
            }
        }
        Ok(())
    }

    /// Planned job `i` was refused with `e`: rightly when no usable site holds its input
    /// file (they may all be out at the time).
    pub(super) fn files_refusal(&mut self, i: usize, e: &str) -> bool {
        let right = self.plan.jobs[i].input.is_some() && e.contains("holds a replica");
        if right {
            self.log(|| format!("j{i} refused: {e}"));
            self.files.refused.insert(i);
        }
        right
    }

    /// A process of launch `id` at `site` heard `released`: the job's input file is at the
    /// site of each of its started components.
    pub(super) fn files_released(&self, site: usize, id: u64) -> Result<(), Violation> {
        let l = &self.rms[site].launches[&id];
        let Some(f) = self
            .acked
            .get(&l.job)
            .and_then(|i| self.plan.jobs[*i].input)
        else {
            return Ok(());
        };
        let name = &self.plan.files[f].name;
        let Some(job) = self
            .server
            .as_ref()
            .and_then(|s| s.driver.core().job(l.job))
        else {
            return Ok(());
        };
        if !self.files.present.contains(&(name.clone(), site)) {
            return Err(self.violation(format!(
                "launch {id} of job {} at s{site} released before its input file {name} was there",
                l.job
            )));
        }
        // The components the commit waited for: each has its file. An optional one that
        // was not at the barrier then passes it later, when its own file is there (above).
        for (i, (c, spec)) in job.comps.iter().zip(&job.job.components).enumerate() {
            let (Some(at), Some(_)) = (c.site, c.launch) else {
                continue;
            };
            let waited = match c.phase {
                CompPhase::Deleted | CompPhase::Failed => false,
                CompPhase::Ready | CompPhase::Finished => true,
                _ => spec.start_type != StartType::Optional,
            };
            if waited && !self.files.present.contains(&(name.clone(), at)) {
                return Err(self.violation(format!(
                    "job {} released with component {i} at s{at} before its input file {name} was there",
                    l.job
                )));
            }
        }
        Ok(())
    }
}
