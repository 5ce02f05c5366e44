//! coalloc as an MPI job's process manager (seed 002 §4.3, seed 003 §3.1.1: the MPI
//! library's start-up is the co-allocation barrier): MPICH's PMI-1 simple protocol served
//! to a component's MPI processes, with job-wide ranks and the job's rendezvous store as
//! the KVS.
//!
//! - [`wire`]: the protocol's lines, parsed and written;
//! - [`session`]: the sans-IO server of one component (`handle`, `poll_transmit`,
//!   `poll_event`);
//! - [`proxy`]: the pump, `coalloc pmi-proxy`, which starts the processes and makes the
//!   session's calls;
//! - [`spread`]: the ranks over every node of a multi-node Slurm allocation (`srun`, PMI
//!   over TCP).

pub mod proxy;
pub mod session;
pub mod spread;
pub mod wire;
