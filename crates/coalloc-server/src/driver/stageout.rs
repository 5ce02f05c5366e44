//! Outputs brought back (seed 003 §5.2: DCS's GASS server stages "all of the output files
//! and error files ... back to the submission hosts"): when a launch on an agent's site
//! ends, its standard output and error are copied from the agent's state directory into
//! this server's (`DIR/output/JOB/`), where `coalloc logs` reads them as it reads a local
//! site's. The copy runs on a thread of its own after the launch's end is known; a copy
//! that fails is logged and leaves the agent's files where they are.

use super::Driver;
use crate::config::BackendKind;
use crate::transfer::pump::{fetch, SiteFile};

impl Driver {
    /// Bring a finished launch's outputs back from its agent's site (nothing to do for a
    /// site on this machine: its outputs are written here).
    pub(super) fn stage_out(&self, site: usize, job: u64, component: usize, launch: u64) {
        if self.replaying || !matches!(self.config.backends[site], BackendKind::Agent { .. }) {
            return;
        }
        let (stdout, stderr) = self.state.output(job, component, launch);
        let backend = self.backends[site].clone();
        let base = self.state.root.clone();
        std::thread::spawn(move || {
            for local in [stdout, stderr] {
                let Some(name) = local.file_name() else {
                    continue;
                };
                // The agent writes them under its state directory, same layout.
                let src = SiteFile {
                    backend: backend.clone(),
                    base: base.clone(),
                    path: format!("output/{job}/{}", name.to_string_lossy()),
                };
                if let Err(e) = fetch(&src, &local) {
                    tracing::warn!(job, launch, "bringing an output back: {e}");
                }
            }
        });
    }
}
