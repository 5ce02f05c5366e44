//! Helpers the CLI test files share: run the `coalloc` binary from the repository root.
#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (examples and traces are relative to it).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Run `coalloc ARGS...` in the repository root.
pub fn coalloc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coalloc"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap()
}

/// Standard output of a run that must have succeeded.
pub fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}
pub mod agent_rig;
pub mod agents;
pub mod gridengine;
pub mod mpi;
pub mod server;
pub mod slurm;
pub mod tools;
