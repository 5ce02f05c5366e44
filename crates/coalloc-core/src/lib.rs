//! The sans-IO core of coalloc.
//!
//! This crate owns every scheduling decision and the data it decides on. It reads no clock,
//! does no I/O, spawns nothing and uses no async: drivers (the simulator, the server) feed it
//! text and events and carry out what it returns. See `../shared/DESIGN.md` for the
//! architecture.
//!
//! - [`model`]: jobs, components and sites — the vocabulary every other part uses.
//! - [`spec`]: the native job spec (TOML / JSON), the site list, batch files, and the rules a
//!   valid job obeys.
//! - [`rsl`]: the Globus Resource Specification Language (seed 003 §2.2.4): parser, printer,
//!   variable substitution, and the mapping onto the model.
//! - [`placement`]: choosing sites (and file sites) for a job's components: the modified
//!   worst-fit / best-fit and ordered fit of seed 003 §4.3.3, first-fit, seed 001's Worst Fit,
//!   Close-to-Files (seed 000 §2.6), cluster filling and load balancing (seed 003 §3.2.1).
//! - [`scheduler`]: the state machine drivers run — `handle(now, event)`, `poll_command()`,
//!   `next_wakeup()` — with the co-allocation transaction (seed 002 §3.2) and fault handling
//!   (seed 000 §3.4, seed 003 §4.3.4–4.3.5).
//! - [`queue`]: queue policies, each in a module named after it.
//! - [`provisioning`]: cloud sites' leased VMs, their bill, and the On-Demand provisioning
//!   policy (seed 004 §III-A, §III-B).
//! - [`predictor`]: job runtime prediction (the mean of the user's last two runtimes) and the
//!   wait-time estimate, for SJF and HSDF (seed 004 §III-B).
//! - [`error`]: the one error type of job and site input, with line and column.

pub mod error;
pub mod model;
pub mod paged;
pub mod placement;
pub mod predictor;
pub mod provisioning;
pub mod queue;
pub mod rsl;
pub mod scheduler;
pub mod spec;

pub use error::{Pos, SpecError};
