//! `coalloc report`: the server's logs as pictures and a summary (seed 003 appendix A.5):
//! utilization over time, the load of every site (busy by coalloc, busy by other users,
//! idle), and the jobs' wait, run and response times from the result log.

use crate::client::StateArgs;
use crate::error::CliError;
use crate::plot::{line_chart, Chart, Series};
use crate::table;
use clap::Args;
use coalloc_server::logs::{read_lines, ResultRecord, SiteSample};
use serde_json::json;
use std::collections::BTreeMap;
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

fn mean(v: &[i64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<i64>() as f64 / v.len() as f64 / 1000.0)
}

pub fn run(args: ReportArgs) -> Result<(), CliError> {
    let dir = args.state.dir();
    let results: Vec<ResultRecord> =
        read_lines(&dir.join("logs/result.jsonl")).map_err(CliError::bad)?;
    let samples: Vec<SiteSample> =
        read_lines(&dir.join("logs/surveillance.jsonl")).map_err(CliError::bad)?;
    if results.is_empty() && samples.is_empty() {
        return Err(CliError::bad(format!(
            "no logs in {}: run a server with this state directory first",
            dir.join("logs").display()
        )));
    }
    let out = args.out.unwrap_or_else(|| dir.join("report"));
    std::fs::create_dir_all(&out).map_err(|e| CliError::bad(format!("{}: {e}", out.display())))?;
    let t0 = samples.first().map_or(0, |s| s.time);
    let x = |t: i64| (t - t0) as f64 / 1000.0;
    let mut by_site: BTreeMap<&str, Vec<&SiteSample>> = BTreeMap::new();
    let mut by_time: BTreeMap<i64, (u64, u64, u64)> = BTreeMap::new();
    for s in &samples {
        by_site.entry(&s.site).or_default().push(s);
        let e = by_time.entry(s.time).or_default();
        e.0 += u64::from(s.coalloc);
        e.1 += u64::from(s.other);
        e.2 += u64::from(s.total);
    }
    let mut files = Vec::new();
    let pct = |a: u64, t: u64| {
        if t == 0 {
            0.0
        } else {
            100.0 * a as f64 / t as f64
        }
    };
    if !samples.is_empty() {
        let series = vec![
            Series {
                name: "coalloc".into(),
                points: by_time
                    .iter()
                    .map(|(t, v)| (x(*t), pct(v.0, v.2)))
                    .collect(),
            },
            Series {
                name: "coalloc + other users".into(),
                points: by_time
                    .iter()
                    .map(|(t, v)| (x(*t), pct(v.0 + v.1, v.2)))
                    .collect(),
            },
        ];
        let chart = Chart {
            title: "Utilization of all sites".into(),
            x_label: "time (s)".into(),
            y_label: "busy processors (%)".into(),
            ..Chart::default()
        };
        files.extend(
            line_chart(&out.join("utilization"), &chart, &series).map_err(CliError::Internal)?,
        );
        let series: Vec<Series> = by_site
            .iter()
            .map(|(name, ss)| Series {
                name: name.to_string(),
                points: ss
                    .iter()
                    .map(|s| {
                        (
                            x(s.time),
                            pct(u64::from(s.coalloc + s.other), u64::from(s.total)),
                        )
                    })
                    .collect(),
            })
            .collect();
        let chart = Chart {
            title: "Load per site".into(),
            x_label: "time (s)".into(),
            y_label: "busy processors (%)".into(),
            ..Chart::default()
        };
        files.extend(
            line_chart(&out.join("site-load"), &chart, &series).map_err(CliError::Internal)?,
        );
        for (name, ss) in &by_site {
            let line = |label: &str, f: &dyn Fn(&SiteSample) -> u32| Series {
                name: label.into(),
                points: ss.iter().map(|s| (x(s.time), f64::from(f(s)))).collect(),
            };
            let series = vec![
                line("coalloc", &|s| s.coalloc),
                line("other users", &|s| s.other),
                line("idle", &|s| s.idle),
            ];
            let chart = Chart {
                title: format!("Site {name}"),
                x_label: "time (s)".into(),
                y_label: "processors".into(),
                ..Chart::default()
            };
            files.extend(
                line_chart(&out.join(format!("site-{name}")), &chart, &series)
                    .map_err(CliError::Internal)?,
            );
        }
    }
    let finished: Vec<&ResultRecord> = results.iter().filter(|r| r.outcome == "finished").collect();
    let col = |f: &dyn Fn(&ResultRecord) -> Option<i64>| -> Vec<i64> {
        finished.iter().filter_map(|r| f(r)).collect()
    };
    let summary = json!({
        "jobs": results.len(),
        "finished": finished.len(),
        "failed": results.len() - finished.len(),
        "mean_wait_s": mean(&col(&|r| r.wait_ms)),
        "mean_run_s": mean(&col(&|r| r.run_ms)),
        "mean_response_s": mean(&col(&|r| r.response_ms)),
        "aborts": results.iter().map(|r| u64::from(r.submit_failures)).sum::<u64>(),
        "site_samples": samples.len(),
        "plots": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
    });
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&summary).unwrap_or_default()
        );
        return Ok(());
    }
    let f = |v: &serde_json::Value| v.as_f64().map_or("-".into(), |x| format!("{x:.2}"));
    let rows = vec![
        vec!["jobs ended".into(), summary["jobs"].to_string()],
        vec![
            "finished / failed".into(),
            format!("{} / {}", summary["finished"], summary["failed"]),
        ],
        vec!["mean wait (s)".into(), f(&summary["mean_wait_s"])],
        vec!["mean run (s)".into(), f(&summary["mean_run_s"])],
        vec!["mean response (s)".into(), f(&summary["mean_response_s"])],
        vec!["aborted starts".into(), summary["aborts"].to_string()],
    ];
    print!("{}", table::render(&["", "value"], &rows));
    for p in files {
        println!("wrote {}", p.display());
    }
    Ok(())
}
