//! coalloc's simulator side: replays workload traces against the scheduling core.
//!
//! - [`swf`] reads job logs in the Standard Workload Format of the Parallel Workloads Archive.
//! - [`replay`] runs a trace's jobs on the engine's ideal sites (`coalloc replay`).
//! - [`workload`] generates synthetic workloads from seeded random streams.
//! - [`experiment`] expands experiment files into runs over a grid and seeds, in parallel.
//! - [`metrics`] computes DESIGN.md's metrics from a run.
//! - [`engine`] is the discrete-event simulator: the core against simulated sites with local
//!   jobs, start latency, failures and file transfers.
pub mod engine;
pub mod experiment;
pub mod metrics;
pub mod replay;
pub mod swf;
pub mod workload;
