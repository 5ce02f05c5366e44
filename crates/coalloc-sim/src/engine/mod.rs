//! The discrete-event simulator: the production scheduling core driven on virtual integer
//! time (milliseconds) against simulated sites (issue "Simulator", parts 1–2).
//!
//! Events wait in a heap ordered by time, then by a sequence number, so equal times keep the
//! order they were made in. All events of one instant are handed to the core together
//! ([`Scheduler::handle_all_into`](coalloc_core::scheduler::Scheduler::handle_all_into)), the ends and site reports before the arrivals; the core's
//! commands are then carried out, and whatever they cause at the same instant (a component
//! that starts at once, a new site reading) goes back to the core until the instant is
//! quiet. [`crate::replay`] is this engine on ideal sites (issue 22, item 2). A run can also
//! take a trace's jobs while another thread reads them ([`simulate_fed`]): the jobs come
//! in file order, and the run takes more whenever it needs the next arrival.
//!
//! The sites ([`site`]) run local jobs FCFS and hold coalloc's components. Faults
//! ([`params::Failures`]) and transfers draw from their own seeded streams
//! ([`crate::workload::stream_of`]), so changing one parameter leaves the other draws alone.

pub mod calendar;
mod params;
mod run;
pub mod site;

pub use params::{
    Failures, Jobs, LinkLoss, Outage, Scripted, SimJob, SimParams, TraceJobs, TraceWork, Workload,
};
pub use run::{
    simulate, simulate_fed, BillRow, CloudUsage, FedJobs, JobFate, JobOutcome, Outcome, SimError,
    SiteSample,
};
