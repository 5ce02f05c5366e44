//! `coalloc report`: the server's logs as pictures and a summary (seed 003 appendix A.5),
//! printed. The plots and the summary are [`coalloc_lab::report`]'s; this command parses its
//! arguments and prints the summary as a table (or JSON) and the files written.

use crate::client::StateArgs;
use crate::error::CliError;
use crate::table;
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct ReportArgs {
    /// Where the plots go [default: STATE_DIR/report].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

pub fn run(args: ReportArgs) -> Result<(), CliError> {
    let summary = coalloc_lab::report::report(&args.state.dir(), args.out)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&summary).unwrap_or_default()
        );
        return Ok(());
    }
    let f = |v: &serde_json::Value| v.as_f64().map_or("-".into(), |x| format!("{x:.2}"));
    let share = summary["coallocated_share"]
        .as_f64()
        .map_or("-".into(), |s| format!("{:.0}%", 100.0 * s));
    let rows = vec![
        vec!["jobs ended".into(), summary["jobs"].to_string()],
        vec![
            "finished / failed".into(),
            format!("{} / {}", summary["finished"], summary["failed"]),
        ],
        vec![
            "co-allocated (several sites)".into(),
            format!("{} ({share})", summary["coallocated"]),
        ],
        vec![
            "mean placement time (s)".into(),
            f(&summary["mean_placement_s"]),
        ],
        vec![
            "mean start delay (s)".into(),
            f(&summary["mean_start_delay_s"]),
        ],
        vec!["mean wait (s)".into(), f(&summary["mean_wait_s"])],
        vec!["mean run (s)".into(), f(&summary["mean_run_s"])],
        vec!["mean response (s)".into(), f(&summary["mean_response_s"])],
        vec![
            "aborted runs / jobs that finished after one".into(),
            format!(
                "{} / {}",
                summary["aborts"], summary["finished_after_aborts"]
            ),
        ],
        vec!["logged span (s)".into(), f(&summary["duration_s"])],
    ];
    print!("{}", table::render(&["", "value"], &rows));
    let lines = |k: &str| {
        let v: Vec<String> = summary[k]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| n.as_str().unwrap_or("").to_owned())
            .collect();
        v
    };
    for n in lines("notes") {
        println!("note: {n}");
    }
    for p in lines("plots") {
        println!("wrote {p}");
    }
    Ok(())
}
