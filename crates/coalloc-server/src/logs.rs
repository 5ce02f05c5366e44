//! The server's logs, in JSON lines (seed 003 appendix A.5): the result log, one record per
//! job that ended (arrival, placement time, first and last job start time and the start
//! delay of seed 000 §3.2, claiming and placement tries, aborts with their reasons,
//! preemptions, limit kills, net and total run time), and the surveillance log, per-site
//! load over time (busy by coalloc, busy by other users, idle), written at every monitor
//! reading that changes a site's numbers and every sample interval while jobs are live.
//! `coalloc report` draws them.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One line of the result log. Times are milliseconds since the Unix epoch; fields added
/// after the first version default when an older log is read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    pub job: u64,
    pub name: Option<String>,
    /// `finished` or `failed`.
    pub outcome: String,
    pub reason: Option<String>,
    pub components: usize,
    pub processors: u64,
    /// The job's arrival (its submission).
    pub submit: i64,
    /// The last successful placement (KOALA's JPT), and its distance from the arrival
    /// (seed 000 §5's placement time).
    #[serde(default)]
    pub placed: Option<i64>,
    #[serde(default)]
    pub placement_ms: Option<i64>,
    /// The first job start time estimated and the one the job started at; the start delay
    /// is their difference (seed 000 §3.2).
    #[serde(default)]
    pub first_jst: Option<i64>,
    #[serde(default)]
    pub last_jst: Option<i64>,
    #[serde(default)]
    pub start_delay_ms: Option<i64>,
    pub barrier_release: Option<i64>,
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub wait_ms: Option<i64>,
    pub response_ms: Option<i64>,
    /// Net run time (seed 003 A.5; the service time): barrier release to end.
    pub run_ms: Option<i64>,
    /// Total run time (seed 003 A.5): the last placement, when the components were sent to
    /// their sites, to the end: start-up and the barrier wait included.
    #[serde(default)]
    pub total_run_ms: Option<i64>,
    pub sites: Vec<String>,
    pub placement_tries: u32,
    pub placement_failures: u32,
    pub submit_failures: u32,
    pub completion_failures: u32,
    #[serde(default)]
    pub claim_tries: u32,
    #[serde(default)]
    pub claim_failures: u32,
    #[serde(default)]
    pub preemptions: u32,
    /// Kills at a runtime limit (TAGS, seed 004).
    #[serde(default)]
    pub limit_kills: u32,
    /// Every run that was stopped, in order, with its reason.
    #[serde(default)]
    pub aborts: Vec<Abort>,
}

/// A stopped run of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Abort {
    pub time: i64,
    /// `before_commit` (an aborted start), `after_commit` (a failure after the barrier),
    /// or `preempted`.
    pub class: String,
    pub reason: String,
}

/// One line of the surveillance log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiteSample {
    pub time: i64,
    pub site: String,
    pub total: u32,
    pub idle: u32,
    /// Processors held by coalloc's components.
    pub coalloc: u32,
    /// Processors held by other users.
    pub other: u32,
    pub healthy: bool,
}

/// An append-only JSON-lines file.
pub struct JsonLines {
    path: PathBuf,
}

impl JsonLines {
    pub fn new(path: &Path) -> JsonLines {
        JsonLines {
            path: path.to_path_buf(),
        }
    }

    /// Append records; a failure to write a log is reported, never fatal.
    pub fn append<T: Serialize>(&self, records: &[T]) {
        if records.is_empty() {
            return;
        }
        let mut text = String::new();
        for r in records {
            text.push_str(&serde_json::to_string(r).expect("log records serialize"));
            text.push('\n');
        }
        let res = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = res {
            tracing::error!("cannot write {}: {e}", self.path.display());
        }
    }
}

/// Read a JSON-lines file; a line that does not parse is an error naming it.
pub fn read_lines<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}
