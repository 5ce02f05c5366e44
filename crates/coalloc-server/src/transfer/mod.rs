//! Moving a job's input file to its execution site before the job starts (seed 000 §2.5:
//! "KOALA first initiates the third-party file transfers from the selected file sites to the
//! execution sites"): the destination pulls the file from the replica's site in ranges,
//! hashing what it receives; only a file whose BLAKE3 checksum matches the catalog's becomes
//! a replica there, and only then does the core hear `TransferDone` (its JST accounting,
//! seed 000 §3.2, waits for it).
//!
//! - [`session`]: the sans-IO pull ([`session::Pull`]): which range to ask for next, what
//!   arrived, whether the whole is right. A cut transfer resumes from the bytes already at
//!   the destination (a `.part` file), re-hashed, not re-sent.
//! - [`pump`]: the pump: ranges read at the replica's site and appended at the
//!   destination, both through their backends (`Backend::file`), so that local sites and
//!   agent sites (relayed by the server) move files the same way.
//!
//! The driver (`driver/transfers.rs`) decides nothing here beyond carrying out the core's
//! `StartTransfer`: it finds the replica in the catalog, makes room in the destination's
//! cache, runs the pump on a thread, reports progress on the event stream, and fails a
//! transfer that outlives the configured `transfer_timeout`.

pub mod pump;
pub mod session;

use std::path::Path;

/// A file's size and BLAKE3 checksum (hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStat {
    pub size: u64,
    pub blake3: String,
}

/// Read a whole file for its size and checksum.
pub fn stat(path: &Path) -> std::io::Result<FileStat> {
    let (size, blake3) = coalloc_backends::files::stat(path)?;
    Ok(FileStat { size, blake3 })
}

/// The driver's report of one transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferReport {
    /// This many bytes are at the destination.
    Progress { transfer: u64, bytes: u64 },
    /// It ended: the file is at its destination (this path) with the right checksum, or
    /// why not.
    Done {
        transfer: u64,
        result: Result<String, String>,
        /// Bytes moved by this attempt (not counting a resumed prefix).
        moved: u64,
        millis: u64,
    },
}
