//! The test kit: what tests share and nothing ships (DESIGN.md, "The server as a machine").
//!
//! - [`sim`]: the simulation harness. One server driver ([`coalloc_server::driver::Driver`],
//!   stepped, not run), fake resource managers and their sites' workers, the components'
//!   processes and a client, in one thread on virtual time; seeded workloads and faults
//!   (server crashes with restarts from the journal, commits cut short, resource managers
//!   down, refusing or losing launches, answers lost on the way, components that never
//!   check in); the invariants checked after every step. `coalloc-simtest` (this crate's
//!   binary) runs any number of seeds and replays one.
//! - [`server`]: a real `coalloc serve` process for end-to-end tests and the benchmarks, and
//!   the job shapes the tests submit to it; [`agent`]: `coalloc agent` processes beside it.
//! - [`rig`]: the real resource managers of scripts/ (Slurm clusters, Grid Engine cells,
//!   sites in network namespaces), skipped when not there; [`backend`]: what the backends'
//!   tests share whatever the resource manager.
//! - [`postgres`]: a throwaway PostgreSQL cluster for the PostgreSQL journal's tests.
//! - [`mpi`] and [`tools`]: the MPI test programs, and the outside programs (Prometheus, a
//!   browser) some tests drive.
//!
//! The real-process modules take the `coalloc` binary as a parameter: only the `coalloc`
//! package's own tests and examples can name it (`env!("CARGO_BIN_EXE_coalloc")`).
pub mod agent;
pub mod backend;
pub mod mpi;
pub mod postgres;
pub mod rig;
pub mod server;
pub mod sim;
pub mod tools;

use std::path::{Path, PathBuf};

/// The repository root (examples, scripts and traces are relative to it).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
