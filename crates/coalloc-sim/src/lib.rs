//! coalloc's simulator side: replays workload traces against the scheduling core.
//!
//! - [`swf`] reads job logs in the Standard Workload Format of the Parallel Workloads Archive.
//! - [`replay`] drives the scheduling core on virtual time with a trace's jobs.
//! - [`workload`] generates synthetic workloads from seeded random streams.
//!
//! The discrete-event engine, simulated sites with local jobs and failures, the workloads of
//! seeds 000 and 003 and the experiments of the simulator issue are still to come.
pub mod replay;
pub mod swf;
pub mod workload;
