//! Staging per component, as GRAM did with GASS (seed 003 §5.2: "All of the output files and
//! error files will be staged back to the submission hosts"): the files a component lists
//! in RSL `file_stage_in = (SRC DEST)...` (SRC a path on the server's host) are put in its
//! working directory before it is submitted; when it ends, the files of `file_stage_out =
//! (SRC DEST)...` come back to `DIR/output/JOB/DEST`, then `file_clean_up = F...` are
//! removed. A component that stages and names no `directory` runs in a folder of its own,
//! its `$(SCRATCH_DIRECTORY)` (under RSL's `scratch_dir` when given). A launch on an agent's site also has its standard output and
//! error brought back, so that `coalloc logs` shows them as it shows a local site's.
//!
//! Every copy goes through the site's backend (`Backend::file`): this machine's folders for
//! local sites, the agent for an agent's site. Stage-in runs as the driver's file work
//! (`super::work`) and reports back (`Report::Staged`); a stage-in that fails is the
//! launch's failure to start.
//! What a launch stages is kept in memory and not journaled: it is a function of the job's
//! component, the site and the launch's number, so after a restart of the server it is made
//! again for every launch adopted ([`Driver::restore_staging`]), and a launch that ends
//! after the restart has its listed outputs brought back too.

use super::work::Work;
use super::Driver;
use crate::entry::Entry;
use coalloc_backends::SubmitRequest;
use coalloc_core::model::{Component, Value};
use std::path::{Component as PathPart, Path};

/// What a launch stages, as the driver keeps it.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Staging {
    /// The working directory at the site, as the site's file operations name it.
    pub dir: String,
    pub stage_in: Vec<(String, String)>,
    pub stage_out: Vec<(String, String)>,
    pub clean_up: Vec<String>,
}

/// The (SRC DEST) pairs of a staging attribute.
fn pairs(c: &Component, name: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for a in c
        .attributes()
        .iter()
        .filter(|a| a.name.eq_ignore_ascii_case(name))
    {
        let mut push = |v: &[Value]| {
            if let [Value::Str(s), Value::Str(d)] = v {
                out.push((s.clone(), d.clone()));
            }
        };
        if a.values.iter().all(|v| matches!(v, Value::Str(_))) {
            push(&a.values);
        } else {
            for v in &a.values {
                if let Value::Seq(items) = v {
                    push(items);
                }
            }
        }
    }
    out
}

/// The plain values of an attribute.
fn words(c: &Component, name: &str) -> Vec<String> {
    c.attributes()
        .iter()
        .filter(|a| a.name.eq_ignore_ascii_case(name))
        .flat_map(|a| a.values.iter())
        .filter_map(|v| match v {
            Value::Str(s) => Some(s.clone()),
            Value::Seq(_) => None,
        })
        .collect()
}

/// A relative path that stays inside its folder.
fn inside(p: &str) -> bool {
    let p = Path::new(p);
    !p.as_os_str().is_empty() && p.components().all(|c| matches!(c, PathPart::Normal(_)))
}

impl Driver {
    /// What component `spec` of launch `req` stages; sets its working directory to its
    /// scratch folder when it stages and names none. `Err`: a staging it cannot do.
    pub(super) fn staging_of(
        &self,
        site: usize,
        spec: &Component,
        req: &mut SubmitRequest,
    ) -> Result<Option<Staging>, String> {
        let stage_in = pairs(spec, "file_stage_in");
        let stage_out = pairs(spec, "file_stage_out");
        let clean_up = words(spec, "file_clean_up");
        if stage_in.is_empty() && stage_out.is_empty() && clean_up.is_empty() {
            return Ok(None);
        }
        for (_, d) in &stage_in {
            if !inside(d) && !Path::new(d).is_absolute() {
                return Err(format!("file_stage_in: `{d}` leaves the working directory"));
            }
        }
        for (_, d) in &stage_out {
            if !inside(d) {
                return Err(format!(
                    "file_stage_out: `{d}` must be a relative path inside the job's output folder"
                ));
            }
        }
        let agent = self.at_agent(site);
        let scratch = format!("{}.{}.L{}", req.job, req.component, req.launch);
        let base = words(spec, "scratch_dir").pop();
        let dir = match &req.directory {
            Some(d) if d.to_string_lossy().contains("$(") && agent => {
                return Err("staging on an agent's site needs a directory without site variables (or none: the scratch folder)".into());
            }
            Some(d) => d.to_string_lossy().into_owned(),
            None => {
                req.directory = Some("$(SCRATCH_DIRECTORY)".into());
                if let Some(b) = base {
                    if agent && b.contains("$(") {
                        return Err(
                            "staging on an agent's site needs a scratch_dir without site variables"
                                .into(),
                        );
                    }
                    let home = std::env::var("HOME").unwrap_or_default();
                    Path::new(&b.replace("$(HOME)", &home))
                        .join(&scratch)
                        .to_string_lossy()
                        .into_owned()
                } else if agent {
                    format!("scratch/{scratch}")
                } else {
                    self.state
                        .root
                        .join("scratch")
                        .join(&scratch)
                        .to_string_lossy()
                        .into_owned()
                }
            }
        };
        Ok(Some(Staging {
            dir,
            stage_in,
            stage_out,
            clean_up,
        }))
    }

    /// After a restart: what adopted launch `launch` (`l`) stages out, made again from its
    /// component as [`Driver::staging_of`] made it at submission.
    pub(super) fn restore_staging(&mut self, launch: u64, l: &super::LaunchInfo) {
        let Some(spec) = self
            .core
            .job(l.job)
            .and_then(|j| j.job.components.get(l.component))
            .cloned()
        else {
            return;
        };
        let mut req = SubmitRequest {
            launch,
            job: l.job,
            component: l.component,
            directory: spec.directory().map(std::path::PathBuf::from),
            ..SubmitRequest::default()
        };
        if let Ok(Some(st)) = self.staging_of(l.site, &spec, &mut req) {
            self.staging.insert(launch, st);
        }
    }

    /// Put a launch's stage-in files at its site, then submit it (`Report::Staged`).
    pub(super) fn stage_in(&mut self, site: usize, req: SubmitRequest, st: &Staging) {
        self.work.spawn(Work::StageIn {
            backend: self.backends[site].clone(),
            base: self.state.root.clone(),
            dir: st.dir.clone(),
            files: st.stage_in.clone(),
            request: Box::new(req),
            timeout: self.config.files.transfer_timeout,
        });
    }

    /// A stage-in ended: submit the launch, or fail it.
    pub(super) fn staged(&mut self, launch: u64, req: SubmitRequest, result: Result<(), String>) {
        let Some(l) = self.launches.get(&launch).filter(|l| !l.ended) else {
            return;
        };
        if self.is_draining(launch) {
            // Cancelled during its stage-in after its run committed: it never reached the
            // manager.
            return self.drained(launch);
        }
        let site = l.site;
        match result {
            Ok(()) => self.workers[site].submit(req),
            // A copy that failed (a file or a link of the site's): the site's fault.
            Err(reason) => self.end_launch(
                launch,
                Entry::Failed {
                    launch,
                    reason,
                    fault: coalloc_core::scheduler::Fault::Site,
                },
            ),
        }
    }

    /// Bring a launch's outputs back when it ends: its stdout and stderr from an agent's
    /// site, its `file_stage_out` files from any site; then its `file_clean_up`.
    pub(super) fn stage_out(&mut self, site: usize, job: u64, component: usize, launch: u64) {
        if self.replaying {
            return;
        }
        let agent = self.at_agent(site);
        let st = self.staging.remove(&launch);
        if !agent && st.is_none() {
            return;
        }
        let (stdout, stderr) = self.state.output(job, component, launch);
        let out_dir = stdout.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut copies = Vec::new();
        if agent {
            for local in [stdout, stderr] {
                // The agent writes them under its state directory, same layout.
                if let Some(name) = local.file_name() {
                    let path = format!("output/{job}/{}", name.to_string_lossy());
                    copies.push((path, local.clone()));
                }
            }
        }
        let st = st.unwrap_or_default();
        let at = |f: &String| Path::new(&st.dir).join(f).to_string_lossy().into_owned();
        for (src, dest) in &st.stage_out {
            copies.push((at(src), out_dir.join(dest)));
        }
        self.work.spawn(Work::StageOut {
            backend: self.backends[site].clone(),
            base: self.state.root.clone(),
            job,
            launch,
            copies,
            clean_up: st.clean_up.iter().map(at).collect(),
        });
    }
}
