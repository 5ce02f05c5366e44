//! The server's logs, in JSON lines (seed 003 appendix A.5): the result log, one record per
//! job that ended (submit, placement tries, barrier release, start, end, response and run
//! times, sites, failures), and the surveillance log, per-site load over time (busy by
//! coalloc, busy by other users, idle). `coalloc report` draws them.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One line of the result log. Times are milliseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    pub job: u64,
    pub name: Option<String>,
    /// `finished` or `failed`.
    pub outcome: String,
    pub reason: Option<String>,
    pub components: usize,
    pub processors: u64,
    pub submit: i64,
    pub barrier_release: Option<i64>,
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub wait_ms: Option<i64>,
    pub response_ms: Option<i64>,
    pub run_ms: Option<i64>,
    pub sites: Vec<String>,
    pub placement_tries: u32,
    pub placement_failures: u32,
    pub submit_failures: u32,
    pub completion_failures: u32,
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
