//! The Grid Engine rig of scripts/gridengine/ for end-to-end tests of `coalloc serve` with
//! Grid Engine sites: the backend tests' view of the rig (`gerig`, shared by path, not
//! copied), a lock per scenario, and the clean-up on exit (a crashed execd started again,
//! every job deleted, every cell empty), even after a failed assertion.

#[path = "../../../coalloc-backends/tests/gerig/mod.rs"]
mod gerig;

pub use gerig::GeRig;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

static RIG_LOCK: Mutex<()> = Mutex::new(());

/// One scenario's hold on the cells.
pub struct GeScenario {
    pub rig: GeRig,
    _lock: MutexGuard<'static, ()>,
}

impl GeScenario {
    /// The rig, locked; `None` (skipped) when `COALLOC_GE_RIG` is unset (a failure with
    /// `COALLOC_REQUIRE_GE=1`).
    pub fn begin(test: &str) -> Option<GeScenario> {
        let rig = GeRig::get(test)?;
        let lock = RIG_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        rig.restore();
        rig.delete_all();
        for i in 0..rig.cells.len() {
            rig.until_empty(i, Duration::from_secs(20));
        }
        Some(GeScenario { rig, _lock: lock })
    }
}

impl Drop for GeScenario {
    fn drop(&mut self) {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.rig.restore();
            self.rig.delete_all();
            for i in 0..self.rig.cells.len() {
                self.rig.until_empty(i, Duration::from_secs(30));
            }
        }));
        if r.is_err() && !std::thread::panicking() {
            panic!("restoring the Grid Engine rig failed");
        }
    }
}

impl GeRig {
    /// The `[[site]]` table of cell `i`, with `extra` manager keys (`, pe = "x"`).
    pub fn site(&self, i: usize, extra: &str) -> String {
        let c = &self.cells[i];
        format!(
            "[[site]]\nname = \"{}\"\nprocessors = {}\nmanager = {{ type = \"gridengine\", settings = \"{}\", queue = \"{}\", pe = \"{}\"{extra} }}\n",
            c.name,
            c.slots,
            c.settings.display(),
            c.queue,
            c.pe
        )
    }

    /// A server configuration with one site per cell, then `scheduler`.
    pub fn config(&self, scheduler: &str) -> String {
        let mut s = String::from(SERVER);
        for i in 0..self.cells.len() {
            s += &self.site(i, "");
        }
        s + "[scheduler]\n" + scheduler + "\n"
    }
}

/// The `[server]` table of the rig scenarios (as for Slurm).
pub const SERVER: &str =
    "[server]\nmonitor_interval = \"100ms\"\nsample_interval = \"500ms\"\nbarrier_hold = \"2s\"\n";
