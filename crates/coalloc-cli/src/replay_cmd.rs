//! `coalloc replay`: one run of the scheduling core on a workload trace, through the
//! simulator's engine on ideal sites ([`coalloc_sim::replay`]).

use crate::error::CliError;
use crate::load::locate;
use crate::table;
use clap::Args;
use coalloc_core::scheduler::QueueConfig;
use coalloc_core::spec::scheduler::parse_config;
use coalloc_sim::replay::{read_trace_jobs, replay, replay_file, FileReplayError};
use coalloc_sim::swf;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct ReplayArgs {
    /// The trace (SWF, gzipped or not).
    trace: PathBuf,
    /// The sites (`[[site]]` tables; a `[scheduler]` table there sets the defaults).
    #[arg(long, value_name = "SITES.toml")]
    sites: PathBuf,
    /// The queue policy (fcfs, fpfs, easy, conservative, koala, rpp, ff, rr, sjf, sjf-ideal,
    /// hsdf, tags-chain, tags-sets). [default: the file's `[scheduler] policy`, else fcfs]
    #[arg(long)]
    policy: Option<String>,
    /// Only the first N jobs of the trace.
    #[arg(long, value_name = "N")]
    first: Option<usize>,
    /// Leave out jobs with more processors than this.
    #[arg(long, value_name = "N")]
    max_procs: Option<u32>,
    /// Write `job_id,submit,start,end` per job (SWF job number, seconds on the trace's clock).
    #[arg(long, value_name = "FILE.csv")]
    schedule: Option<PathBuf>,
    /// Print the metrics as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Run the replay N times on the parsed trace and report the fastest run's time (for
    /// benchmarks: the runs give the same schedule). With 1, the trace is read while the
    /// replay runs, and the time counts from the start of the reading.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
}

pub fn run(args: ReplayArgs) -> Result<(), CliError> {
    let text = std::fs::read_to_string(&args.sites)
        .map_err(|e| CliError::bad(format!("{}: cannot read: {e}", args.sites.display())))?;
    let (sites, mut config) =
        parse_config(&text).map_err(|e| CliError::bad(locate(&args.sites, &e)))?;
    if let Some(name) = &args.policy {
        config.queue =
            QueueConfig::from_name(name).map_err(|e| CliError::bad(format!("--policy: {e}")))?;
    }
    let filter = swf::Filter {
        max_processors: args.max_procs.map(i64::from),
        first: args.first,
        ..swf::Filter::default()
    };
    let name = args.trace.display().to_string();
    let processors: u64 = sites.iter().map(|s| u64::from(s.processors)).sum();
    let policy = config.queue.build().name();
    let bad_trace = |e: swf::SwfError| CliError::bad(e.with_file(&name));
    let (result, elapsed) = if args.repeat == 1 {
        // One run, on the trace as it is read (a thread of its own reads it): timed from the
        // start of the reading until the schedule is known.
        let started = std::time::Instant::now();
        let run = replay_file(&args.trace, &filter, sites, config).map_err(|e| match e {
            FileReplayError::Trace(e) => bad_trace(e),
            FileReplayError::Replay(e) => CliError::Internal(e.to_string()),
        })?;
        (run, started.elapsed())
    } else {
        let jobs = read_trace_jobs(&args.trace, &filter).map_err(bad_trace)?;
        let mut fastest = None;
        let mut result = None;
        for _ in 0..args.repeat {
            // Timed: the run on the engine until the schedule is known.
            let started = std::time::Instant::now();
            let run = replay(&jobs, sites.clone(), config.clone())
                .map_err(|e| CliError::Internal(e.to_string()))?;
            let elapsed = started.elapsed();
            fastest = Some(fastest.map_or(elapsed, |f: std::time::Duration| f.min(elapsed)));
            result = Some(run);
        }
        let (Some(result), Some(elapsed)) = (result, fastest) else {
            return Err(CliError::Internal("no replay ran".to_owned()));
        };
        (result, elapsed)
    };
    let summary = result.summary(processors);
    if let Some(path) = &args.schedule {
        let mut csv = String::from("job_id,submit,start,end\n");
        for j in &result.jobs {
            let opt = |x: Option<i64>| x.map(|v| v.to_string()).unwrap_or_default();
            csv.push_str(&format!(
                "{},{},{},{}\n",
                j.number,
                j.submit,
                opt(j.start),
                opt(j.end)
            ));
        }
        std::fs::write(path, csv)
            .map_err(|e| CliError::bad(format!("{}: cannot write: {e}", path.display())))?;
    }
    let mut out = std::io::stdout().lock();
    let text = if args.json {
        let mut v =
            serde_json::to_value(&summary).map_err(|e| CliError::Internal(e.to_string()))?;
        v["policy"] = serde_json::json!(policy);
        v["trace"] = serde_json::json!(name);
        v["seconds"] = serde_json::json!(elapsed.as_secs_f64());
        serde_json::to_string_pretty(&v).map_err(|e| CliError::Internal(e.to_string()))? + "\n"
    } else {
        let rows = vec![
            vec!["trace".into(), name.clone()],
            vec!["policy".into(), policy.to_owned()],
            vec!["jobs".into(), summary.jobs.to_string()],
            vec!["completed".into(), summary.completed.to_string()],
            vec!["refused".into(), summary.refused.to_string()],
            vec!["makespan (s)".into(), summary.makespan.to_string()],
            vec!["mean wait (s)".into(), format!("{:.1}", summary.mean_wait)],
            vec![
                "mean response (s)".into(),
                format!("{:.1}", summary.mean_response),
            ],
            vec![
                "mean bounded slowdown (10 s)".into(),
                format!("{:.2}", summary.mean_bounded_slowdown),
            ],
            vec!["utilization".into(), format!("{:.3}", summary.utilization)],
            vec![
                "replay time (s)".into(),
                format!("{:.3}", elapsed.as_secs_f64()),
            ],
        ];
        table::render(&["metric", "value"], &rows)
    };
    out.write_all(text.as_bytes())
        .map_err(|e| CliError::Internal(format!("cannot write: {e}")))?;
    Ok(())
}
