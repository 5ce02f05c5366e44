//! The test kit: what tests share and nothing ships (DESIGN.md, "The server as a machine").
//!
//! - [`sim`]: the simulation harness. One server driver ([`coalloc_server::driver::Driver`],
//!   stepped, not run), fake resource managers and their sites' workers, the components'
//!   processes and a client, in one thread on virtual time; seeded workloads and faults
//!   (server crashes with restarts from the journal, commits cut short, resource managers
//!   down, refusing or losing launches, answers lost on the way, components that never
//!   check in); the invariants checked after every step. `coalloc-simtest` (this crate's
//!   binary) runs any number of seeds and replays one.
pub mod sim;
