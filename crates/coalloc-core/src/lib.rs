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
//! - [`error`]: the one error type of job and site input, with line and column.

pub mod error;
pub mod model;
pub mod rsl;
pub mod spec;

pub use error::{Pos, SpecError};
