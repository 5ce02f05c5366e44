//! coalloc's lab: the studies run on the simulator and on a server's history, everything the
//! `coalloc sim`, `coalloc whatif` and `coalloc report` commands compute and write, so that
//! the CLI only parses their arguments and prints their results.
//!
//! - [`study`] runs an experiment file's grid (on this machine's cores or as a Slurm job
//!   array) and writes its tables, per-job logs and plots (`coalloc sim`).
//! - [`whatif`] replays a server's history on the simulation engine under another
//!   configuration and compares it with what happened (`coalloc whatif`).
//! - [`report`] turns a server's logs into plots and a summary (`coalloc report`).
//! - [`plot`] draws the line charts all three write, as SVG and PNG.
pub mod plot;
pub mod report;
pub mod study;
pub mod whatif;

/// What went wrong in a study, said once: the user's input (the CLI exits 2) or something
/// that is not the user's fault (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The input is wrong: a file, a flag, a setting. A full message.
    #[error("{0}")]
    Input(String),
    /// Something broke that is not the user's fault.
    #[error("{0}")]
    Internal(String),
}

impl LabError {
    pub fn bad(msg: impl Into<String>) -> Self {
        LabError::Input(msg.into())
    }
}

/// How a long study reports its progress (the CLI draws a bar): `start` with the number of
/// runs, then `set_position`/`inc` and `set_message` as they end, and `finish` (or `abandon`,
/// leaving what was drawn, when the wait is given up).
pub trait Progress: Sync {
    fn start(&self, _len: u64) {}
    fn inc(&self) {}
    fn set_position(&self, _pos: u64) {}
    fn set_message(&self, _msg: String) {}
    fn finish(&self) {}
    fn abandon(&self) {}
}

/// No progress shown.
pub struct Quiet;

impl Progress for Quiet {}
