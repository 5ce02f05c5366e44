//! Job and site specs as users write them: the native TOML / JSON job spec ([`native`]),
//! the site list ([`sites`]), the scheduler's policies and parameters ([`scheduler`]), DCS
//! batch files ([`batch`]), the job rules ([`validate`]), and the body of an edit to a held
//! job ([`edit`]).
//!
//! File conventions (seed 003 §5.1.3, appendix A.2): `.rsl` holds an ordered RSL job, `.uno`
//! an unordered RSL job, `.bat` a list of job files, `.toml` and `.json` the native spec.
//! Reading files is the caller's business: everything here takes text.

pub mod batch;
pub mod edit;
pub mod native;
pub mod scheduler;
pub mod sites;
pub mod units;
pub mod validate;

use crate::error::SpecError;
use crate::model::{Job, JobKind, Time};
use std::path::Path;

/// The format of a job file, chosen by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.rsl`: an ordered RSL job.
    Rsl,
    /// `.uno`: an unordered RSL job.
    Uno,
    /// `.toml`: the native spec.
    Toml,
    /// `.json`: the native spec.
    Json,
    /// `.bat`: one job file per line.
    Batch,
}

impl Format {
    pub const EXTENSIONS: &'static str = ".rsl, .uno, .bat, .toml, .json";

    /// The format for a path's extension (case-insensitive), if it is one of ours.
    pub fn of_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "rsl" => Format::Rsl,
            "uno" => Format::Uno,
            "toml" => Format::Toml,
            "json" => Format::Json,
            "bat" => Format::Batch,
            _ => return None,
        })
    }
}

/// Read one job from text in a job format (not [`Format::Batch`]).
pub fn parse_job(text: &str, format: Format) -> Result<Job, SpecError> {
    match format {
        Format::Rsl => crate::rsl::job_from_rsl(text, Some(JobKind::Ordered)),
        Format::Uno => crate::rsl::job_from_rsl(text, Some(JobKind::Unordered)),
        Format::Toml => native::from_toml(text),
        Format::Json => native::from_json(text),
        Format::Batch => Err(SpecError::invalid(
            "file",
            "a batch file lists job files; read it with spec::batch",
        )),
    }
}

/// Write a time on the job clock the way specs take it: whole seconds as an integer,
/// otherwise a duration string since the clock's origin.
pub fn format_time(t: Time) -> String {
    if t % 1000 == 0 {
        (t / 1000).to_string()
    } else {
        format!("{t}ms")
    }
}
