//! Workload traces in the Standard Workload Format (SWF) of the Parallel Workloads Archive.
//!
//! An SWF file is text: `;` comment lines form the [`Header`] (`; Key: value`), and every
//! other non-blank line is one job of 18 whitespace-separated numbers (the fields are listed
//! on [`Job`]; `../shared/traces/README.md` describes them). Files compressed with gzip are
//! recognised by their magic bytes (`1f 8b`) and decompressed transparently, whatever their
//! name.
//!
//! ```no_run
//! use coalloc_sim::swf::{self, Filter};
//! let trace = swf::read("traces/KTH-SP2-1996-2.1-cln.swf.gz", &Filter::max_processors(32))?;
//! let stats = swf::RuntimeStats::of(&trace.jobs).unwrap();
//! println!("{} jobs, median run time {} s", trace.counts.kept, stats.p50);
//! # Ok::<(), swf::SwfError>(())
//! ```
//!
//! # Reading
//!
//! [`read`] and [`parse`] read the (decompressed) text a line at a time, never holding it whole,
//! and split each line into fields without regular expressions or per-field allocation; only
//! comment lines allocate. Gzip is inflated by zlib-rs (through `flate2`), on a second
//! thread ahead of the parser (`ahead.rs`).
//! Every error names the line and column ([`SwfError`]); no input makes them panic.
//!
//! A field is unknown when it is negative (the archive writes `-1`). [`Job`] keeps the 18
//! fields as written, in public fields; a method of the same name returns the field as an
//! `Option`, `None` when unknown (`job.run_time` is the raw `i64`, `job.run_time()` an
//! `Option<i64>`). Field 6, the average CPU time, is an `f64`: the archive's logs write it
//! with decimals (SDSC-BLUE in 162,491 of its lines). Every other field must be a whole
//! number.
//!
//! # Which jobs are kept
//!
//! The rules apply in this order, and [`Counts`] counts every job each of them removes:
//!
//! 1. [`Filter::first`]: only the first N job lines of the file are read; reading stops
//!    there (later lines are not even checked).
//! 2. Unknown submit time (field 2 negative): skipped, counted in
//!    [`Counts::unknown_submit_time`] — a job without a submit time cannot be replayed.
//! 3. [`Filter::submit_window`]: jobs submitted outside `[start, end)` are not part of the
//!    selection; they are counted in [`Counts::outside_window`] and not in [`Counts::read`].
//! 4. Unknown run time (field 4 negative): skipped, counted in [`Counts::unknown_run_time`].
//!    A simulator cannot replay a job whose length it does not know, and inventing one
//!    (clamping to 0 or to the requested time) would change the workload. SDSC-SP2 has
//!    5,671 such jobs and SDSC-BLUE 10,744. A run time of **0 is kept**: such jobs did run
//!    (most logs have a few; LCG has 521).
//! 5. Unknown processors ([`Job::processors`]: field 5, else field 8, both negative):
//!    skipped, counted in [`Counts::unknown_processors`] (one job in KTH-SP2).
//! 6. [`Filter::max_processors`]: jobs with more processors than N are dropped, counted in
//!    [`Counts::too_many_processors`] — seed 004 keeps jobs of at most 32 nodes.
//!
//! What is left is [`Trace::jobs`], in file order.
//!
//! # Statistics
//!
//! [`RuntimeStats`] gives the mean run time and the 25th, 50th, 75th and 99th percentiles —
//! the runtime columns of seed 004's Table II. Percentiles use the **nearest-rank** method:
//! the p-th percentile of n sorted values is the value at rank ⌈p·n/100⌉ (1-based), the
//! smallest value that at least p % of the values do not exceed. It is always one of the
//! values, with no interpolation.

mod ahead;
mod error;
mod header;
mod parse;
mod stats;

pub use error::SwfError;
pub use header::{Header, HeaderEntry};
pub use parse::{
    decompress, job_capacity, parse, parse_each, parse_map, parse_text, read, read_map,
};
pub use stats::{nearest_rank, RuntimeStats};

use std::fmt::Write as _;
use std::ops::Range;

/// The names of the 18 fields, in order (field `i` is `FIELD_NAMES[i - 1]`).
pub const FIELD_NAMES: [&str; 18] = [
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average CPU time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user ID",
    "group ID",
    "executable number",
    "queue number",
    "partition number",
    "preceding job number",
    "think time",
];

/// One job: the 18 SWF fields as written in the file, negative (`-1`) when unknown.
///
/// Times are seconds, memory is KB per processor. Each field has a method of the same name
/// that returns it as an `Option` (`None` when negative).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Job {
    /// 1. Job number, counted from 1.
    pub job_number: i64,
    /// 2. Submit time, seconds from the start of the log.
    pub submit_time: i64,
    /// 3. Wait time in the queue.
    pub wait_time: i64,
    /// 4. Run time (wall clock).
    pub run_time: i64,
    /// 5. Number of processors the job was given.
    pub allocated_processors: i64,
    /// 6. Average CPU time used per processor (the only field with decimals).
    pub average_cpu_time: f64,
    /// 7. Memory used per processor, KB.
    pub used_memory: i64,
    /// 8. Number of processors requested.
    pub requested_processors: i64,
    /// 9. Requested (estimated) run time: the user's wall-time limit.
    pub requested_time: i64,
    /// 10. Memory requested per processor, KB.
    pub requested_memory: i64,
    /// 11. Status: 1 completed, 0 failed, 5 cancelled; 2, 3, 4 partial executions.
    pub status: i64,
    /// 12. User ID.
    pub user_id: i64,
    /// 13. Group ID.
    pub group_id: i64,
    /// 14. Executable (application) number.
    pub executable_number: i64,
    /// 15. Queue number.
    pub queue_number: i64,
    /// 16. Partition number.
    pub partition_number: i64,
    /// 17. The job number of a preceding job this job depends on.
    pub preceding_job_number: i64,
    /// 18. Think time between the preceding job's end and this job's submission.
    pub think_time: i64,
}

fn known(v: i64) -> Option<i64> {
    (v >= 0).then_some(v)
}

macro_rules! accessors {
    ($($field:ident),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($field), "`, or `None` when unknown (negative).")]
            pub fn $field(&self) -> Option<i64> {
                known(self.$field)
            }
        )*
    };
}

impl Job {
    /// A job with every field unknown (`-1`).
    pub const UNKNOWN: Job = Job {
        job_number: -1,
        submit_time: -1,
        wait_time: -1,
        run_time: -1,
        allocated_processors: -1,
        average_cpu_time: -1.0,
        used_memory: -1,
        requested_processors: -1,
        requested_time: -1,
        requested_memory: -1,
        status: -1,
        user_id: -1,
        group_id: -1,
        executable_number: -1,
        queue_number: -1,
        partition_number: -1,
        preceding_job_number: -1,
        think_time: -1,
    };

    accessors!(
        job_number,
        submit_time,
        wait_time,
        run_time,
        allocated_processors,
        used_memory,
        requested_processors,
        requested_time,
        requested_memory,
        status,
        user_id,
        group_id,
        executable_number,
        queue_number,
        partition_number,
        preceding_job_number,
        think_time,
    );

    /// `average_cpu_time`, or `None` when unknown (negative).
    pub fn average_cpu_time(&self) -> Option<f64> {
        (self.average_cpu_time >= 0.0).then_some(self.average_cpu_time)
    }

    /// The job's size: the processors it was given (field 5), or, when that is unknown, the
    /// processors it requested (field 8). `None` when both are unknown.
    pub fn processors(&self) -> Option<i64> {
        self.allocated_processors()
            .or_else(|| self.requested_processors())
    }

    /// The user's estimate: the requested time (field 9), or, when that is unknown, the run
    /// time (field 4) — a perfect estimate. `None` when both are unknown.
    pub fn requested_time_or_run_time(&self) -> Option<i64> {
        self.requested_time().or_else(|| self.run_time())
    }

    /// Start time: submit time plus wait time, when both are known.
    pub fn start_time(&self) -> Option<i64> {
        self.submit_time()?.checked_add(self.wait_time()?)
    }

    /// The 17 whole-number fields in field order (every field but 6).
    fn int_fields(&self) -> [i64; 17] {
        [
            self.job_number,
            self.submit_time,
            self.wait_time,
            self.run_time,
            self.allocated_processors,
            self.used_memory,
            self.requested_processors,
            self.requested_time,
            self.requested_memory,
            self.status,
            self.user_id,
            self.group_id,
            self.executable_number,
            self.queue_number,
            self.partition_number,
            self.preceding_job_number,
            self.think_time,
        ]
    }

    /// Append the job as one SWF line (no line end): the fields separated by one space,
    /// field 6 in Rust's shortest round-trip form (`-1`, `142`, `0.03`). Parsing the line
    /// gives the job back.
    pub fn write_swf(&self, out: &mut String) {
        for (k, v) in self.int_fields().iter().enumerate() {
            if k > 0 {
                out.push(' ');
            }
            let _ = write!(out, "{v}");
            if k == 4 {
                let _ = write!(out, " {}", self.average_cpu_time);
            }
        }
    }

    /// The job as one SWF line (no line end); see [`Job::write_swf`].
    pub fn to_swf_line(&self) -> String {
        let mut s = String::new();
        self.write_swf(&mut s);
        s
    }
}

/// Which jobs to keep (see the module documentation for the order the rules apply in).
/// The default keeps every job with a known submit time, run time and size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Drop jobs with more processors ([`Job::processors`]) than this.
    pub max_processors: Option<i64>,
    /// Read only the first N job lines of the file.
    pub first: Option<usize>,
    /// Keep only jobs submitted in `[start, end)` (seconds from the start of the log).
    pub submit_window: Option<Range<i64>>,
}

impl Filter {
    /// Keep jobs of at most `n` processors.
    pub fn max_processors(n: i64) -> Filter {
        Filter {
            max_processors: Some(n),
            ..Filter::default()
        }
    }
}

/// What happened to the job lines read: how many were kept and why the others were not.
///
/// `read == unknown_submit_time + unknown_run_time + unknown_processors +
/// too_many_processors + kept`; jobs outside the submit window are not part of `read`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Job lines read (within [`Filter::first`]) and inside the submit window.
    pub read: usize,
    /// Job lines read but submitted outside [`Filter::submit_window`].
    pub outside_window: usize,
    /// Skipped: submit time unknown.
    pub unknown_submit_time: usize,
    /// Skipped: run time unknown.
    pub unknown_run_time: usize,
    /// Skipped: neither allocated nor requested processors known.
    pub unknown_processors: usize,
    /// Dropped: more processors than [`Filter::max_processors`].
    pub too_many_processors: usize,
    /// Kept: the jobs of [`Trace::jobs`].
    pub kept: usize,
}

impl Counts {
    /// Jobs read with a known submit time and run time (every archive log knows the submit
    /// time): the base of [`Counts::kept_percent`].
    pub fn known_run_time(&self) -> usize {
        self.read
            .saturating_sub(self.unknown_submit_time)
            .saturating_sub(self.unknown_run_time)
    }

    /// Kept jobs as a percentage of [`Counts::known_run_time`] (seed 004's "Count (%)");
    /// `None` when that is 0.
    pub fn kept_percent(&self) -> Option<f64> {
        let base = self.known_run_time();
        (base > 0).then(|| 100.0 * self.kept as f64 / base as f64)
    }
}

/// A trace read from SWF: the header, the kept jobs and the counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    pub header: Header,
    /// The kept jobs, in file order.
    pub jobs: Vec<Job>,
    pub counts: Counts,
}
