//! `coalloc trace stats`: read a workload trace in the Standard Workload Format (SWF, plain
//! or gzip) and print how many jobs it keeps and their run-time statistics — the columns of
//! seed 004's Table II.

use crate::error::CliError;
use crate::table;
use clap::Subcommand;
use coalloc_sim::swf::{self, Filter, RuntimeStats, Trace};
use serde_json::{json, Value};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum TraceCommand {
    /// Job counts and run-time statistics of an SWF trace (seed 004's Table II).
    ///
    /// Reads a job log in the Standard Workload Format of the Parallel Workloads Archive,
    /// plain or gzip-compressed (recognised by its magic bytes). Jobs with an unknown run time
    /// (-1) are skipped and counted; a run time of 0 is kept. Jobs whose processors (field 5,
    /// else field 8) are unknown are skipped and counted too. `--max-procs` then drops larger
    /// jobs; the kept jobs are given as a count and as a percentage of the jobs read with a
    /// known run time.
    ///
    /// Run times are in minutes: the mean, and the 25th, 50th, 75th and 99th percentiles by
    /// the nearest-rank method — the p-th percentile of n sorted run times is the one at rank
    /// ceil(p * n / 100), the smallest run time that at least p % of the jobs do not exceed
    /// (no interpolation). Exits 2 with `file:line:col: message` for a malformed trace.
    Stats {
        /// The trace (`.swf` or `.swf.gz`).
        file: PathBuf,
        /// Drop jobs with more than N processors (seed 004 keeps jobs of at most 32).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
        max_procs: Option<i64>,
        /// Read only the first N jobs of the file (before any other rule; seed 004 uses the
        /// first 50,000 jobs of the grid traces).
        #[arg(long, value_name = "N")]
        first: Option<usize>,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: TraceCommand) -> Result<(), CliError> {
    let TraceCommand::Stats {
        file,
        max_procs,
        first,
        json,
    } = cmd;
    let filter = Filter {
        max_processors: max_procs,
        first,
        ..Filter::default()
    };
    let name = file.display().to_string();
    let trace = swf::read(&file, &filter).map_err(|e| CliError::bad(e.with_file(&name)))?;
    let stats = RuntimeStats::of(&trace.jobs);
    if json {
        let v = json_report(&name, &filter, &trace, stats.as_ref());
        let text =
            serde_json::to_string_pretty(&v).map_err(|e| CliError::Internal(e.to_string()))?;
        println!("{text}");
    } else {
        print!("{}", text_report(&name, &filter, &trace, stats.as_ref()));
    }
    Ok(())
}

/// Minutes with two decimals.
fn min2(v: f64) -> String {
    format!("{v:.2}")
}

fn text_report(name: &str, filter: &Filter, t: &Trace, stats: Option<&RuntimeStats>) -> String {
    let c = &t.counts;
    let mut out = format!("trace: {name}\n");
    let mut rules = Vec::new();
    if let Some(n) = filter.first {
        rules.push(format!("first {n} jobs"));
    }
    if let Some(n) = filter.max_processors {
        rules.push(format!("at most {n} processors"));
    }
    if !rules.is_empty() {
        out.push_str(&format!("filter: {}\n", rules.join(", ")));
    }
    out.push('\n');
    let percent = c
        .kept_percent()
        .map_or_else(String::new, |p| format!("{p:.2}"));
    let mut rows = vec![
        vec!["read".to_owned(), c.read.to_string(), String::new()],
        vec![
            "skipped: unknown submit time".to_owned(),
            c.unknown_submit_time.to_string(),
            String::new(),
        ],
        vec![
            "skipped: unknown run time".to_owned(),
            c.unknown_run_time.to_string(),
            String::new(),
        ],
        vec![
            "skipped: unknown processors".to_owned(),
            c.unknown_processors.to_string(),
            String::new(),
        ],
    ];
    if let Some(n) = filter.max_processors {
        rows.push(vec![
            format!("dropped: more than {n} processors"),
            c.too_many_processors.to_string(),
            String::new(),
        ]);
    }
    rows.push(vec!["kept".to_owned(), c.kept.to_string(), percent.clone()]);
    out.push_str(&table::render(
        &["jobs", "count", "% of known run time"],
        &rows,
    ));
    out.push('\n');
    match stats {
        None => out.push_str("run time: no jobs kept\n"),
        Some(s) => {
            let m = s.minutes();
            let count = if percent.is_empty() {
                c.kept.to_string()
            } else {
                format!("{} ({percent}%)", c.kept)
            };
            let mut row = vec![count];
            row.extend(m.iter().map(|&v| min2(v)));
            out.push_str(&table::render(
                &[
                    "count (%)",
                    "mean [min]",
                    "25% [min]",
                    "50% [min]",
                    "75% [min]",
                    "99% [min]",
                ],
                &[row],
            ));
            out.push_str("percentiles: nearest rank\n");
        }
    }
    out
}

fn json_report(name: &str, filter: &Filter, t: &Trace, stats: Option<&RuntimeStats>) -> Value {
    let c = &t.counts;
    let h = &t.header;
    let run_time = stats.map(|s| {
        let m = s.minutes();
        json!({
            "percentile_method": "nearest-rank",
            "jobs": s.jobs,
            "minutes": { "mean": m[0], "p25": m[1], "p50": m[2], "p75": m[3], "p99": m[4] },
            "seconds": { "mean": s.mean, "p25": s.p25, "p50": s.p50, "p75": s.p75, "p99": s.p99 },
        })
    });
    json!({
        "file": name,
        "filter": { "max_procs": filter.max_processors, "first": filter.first },
        "header": {
            "max_jobs": h.max_jobs,
            "max_records": h.max_records,
            "max_nodes": h.max_nodes,
            "max_procs": h.max_procs,
            "unix_start_time": h.unix_start_time,
        },
        "jobs": {
            "read": c.read,
            "skipped": {
                "unknown_submit_time": c.unknown_submit_time,
                "unknown_run_time": c.unknown_run_time,
                "unknown_processors": c.unknown_processors,
            },
            "dropped": { "too_many_processors": c.too_many_processors },
            "known_run_time": c.known_run_time(),
            "kept": c.kept,
            "kept_percent": c.kept_percent(),
        },
        "run_time": run_time,
    })
}
