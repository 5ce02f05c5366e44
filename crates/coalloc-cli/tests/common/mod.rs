//! What only this package's tests can have: the `coalloc` binary's path, which they pass to
//! the shared wrappers of coalloc-testkit ([`coalloc_testkit::server`] and the rest), and
//! running it from the repository root.
#![allow(dead_code)] // each test file uses its own subset

pub use coalloc_testkit::repo;
use std::process::{Command, Output};

/// The `coalloc` binary of this build.
pub const COALLOC: &str = env!("CARGO_BIN_EXE_coalloc");

/// Run `coalloc ARGS...` in the repository root.
pub fn coalloc(args: &[&str]) -> Output {
    Command::new(COALLOC)
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
