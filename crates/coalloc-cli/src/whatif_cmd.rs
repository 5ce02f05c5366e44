//! `coalloc whatif`: the server's own history replayed on the simulation engine under another
//! scheduler configuration, printed beside what happened. The replay and the comparison are
//! [`coalloc_lab::whatif`]'s; this command parses its arguments and prints the comparison.

use crate::client::StateArgs;
use crate::error::CliError;
use crate::table;
use clap::Args;
use coalloc_lab::whatif::config::Overrides;
use coalloc_lab::whatif::{self, START_SLACK_MS, TOLERANCE_MS, TOLERANCE_SHARE};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct WhatifArgs {
    /// The queue policy to replay under (fcfs, fpfs, easy, conservative, koala, rpp, ff, rr,
    /// sjf, sjf-ideal, hsdf, tags-chain, tags-sets) [default: the configuration's].
    #[arg(long)]
    pub policy: Option<String>,
    /// The placement fit (worst, best, first, worst-plain, ctf) [default: the configuration's].
    #[arg(long)]
    pub fit: Option<String>,
    /// The configuration to replay under: its sites and `[scheduler]` [default: the one the
    /// server last ran with, which every server (`coalloc serve`, `coalloc demo`) keeps as
    /// STATE_DIR/served-config.toml, else the embedded default].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// TAGS-chain's chains of sites, `a1,a2;b1,b2` (chains separated by `;`) [default: the
    /// configuration's `[scheduler.tags] chains`].
    #[arg(long, value_name = "CHAINS")]
    pub tags_chains: Option<String>,
    /// TAGS-sets' decreasing sets of sites, `fs0,fs1,fs2;fs1,fs2;fs2` [default: the
    /// configuration's `[scheduler.tags] sets`].
    #[arg(long, value_name = "SETS")]
    pub tags_sets: Option<String>,
    /// The TAGS runtime limits, increasing, one fewer than the levels: `10m,1h` [default: the
    /// configuration's `[scheduler.tags] limits`].
    #[arg(long, value_name = "LIMITS")]
    pub tags_limits: Option<String>,
    /// Where the plots go [default: STATE_DIR/whatif].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the comparison (summary, sites, every job) as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

pub fn run(args: WhatifArgs) -> Result<(), CliError> {
    let dir = args.state.dir();
    let config_path = whatif::config_path(&dir, args.config.clone());
    let out = args.out.clone().unwrap_or_else(|| dir.join("whatif"));
    let report = whatif::replay(
        &dir,
        config_path.as_deref(),
        &Overrides {
            policy: args.policy.as_deref(),
            fit: args.fit.as_deref(),
            tags_chains: args.tags_chains.as_deref(),
            tags_sets: args.tags_sets.as_deref(),
            tags_limits: args.tags_limits.as_deref(),
        },
        &out,
        &crate::load::locate,
    )?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print_report(&report, &args, config_path.as_deref());
    }
    Ok(())
}

fn print_report(r: &serde_json::Value, args: &WhatifArgs, config: Option<&Path>) {
    let f = |v: &serde_json::Value| v.as_f64().map_or("-".into(), |x| format!("{x:.2}"));
    let pc = |v: &serde_json::Value| {
        v.as_f64()
            .map_or("-".into(), |x| format!("{:.1}%", 100.0 * x))
    };
    let by = &r["replayed_by_history"];
    let n = |k: &str| by[k].as_u64().unwrap_or(0);
    println!(
        "replayed {} job(s) of {} under {} / {} fit, configuration {}",
        r["jobs_replayed"],
        r["jobs_replayed"].as_u64().unwrap_or(0) + r["jobs_not_replayed"].as_u64().unwrap_or(0),
        args.policy.as_deref().unwrap_or("the configured policy"),
        args.fit.as_deref().unwrap_or("the configured"),
        config.map_or("embedded default".into(), |p| p.display().to_string()),
    );
    println!(
        "  {} finished: each runs for its observed net run time (the means and plots compare these)",
        n("finished")
    );
    println!(
        "  {} cancelled: each cancelled the same time after its submission",
        n("cancelled")
    );
    println!(
        "  {} failed after running: each fails, as its own program, after its observed net run time",
        n("failed running")
    );
    println!(
        "  {} failed before running: each ended the same time after its submission",
        n("failed before running")
    );
    println!(
        "  {} not replayed: no line in the result log (still live when the logs end)",
        r["jobs_not_replayed"]
    );
    let (h, w) = (&r["happened"], &r["would_have"]);
    let mut rows: Vec<Vec<String>> = [
        ("mean wait (s)", "mean_wait_s"),
        ("mean response (s)", "mean_response_s"),
        ("mean slowdown", "mean_slowdown"),
        ("mean placement tries", "mean_placement_tries"),
    ]
    .iter()
    .map(|(label, k)| vec![label.to_string(), f(&h[k]), f(&w[k])])
    .collect();
    for s in r["sites"].as_array().into_iter().flatten() {
        rows.push(vec![
            format!("utilization of {}", s["site"].as_str().unwrap_or("?")),
            pc(&s["happened_utilization"]),
            pc(&s["would_have_utilization"]),
        ]);
    }
    print!("{}", table::render(&["", "happened", "would have"], &rows));
    let jobs: Vec<Vec<String>> = r["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| {
            let (a, b) = (&j["happened"], &j["would_have"]);
            vec![
                j["job"].to_string(),
                format!("{} / {}", f(&a["wait_s"]), f(&b["wait_s"])),
                format!("{} / {}", f(&a["response_s"]), f(&b["response_s"])),
                format!("{} / {}", a["placement_tries"], b["placement_tries"]),
                j["history"].as_str().unwrap_or("").to_string(),
                j["replayed_fate"].as_str().unwrap_or("").to_string(),
            ]
        })
        .collect();
    let header = [
        "job",
        "wait (s)",
        "response (s)",
        "tries",
        "history",
        "replayed",
    ];
    print!("{}", table::render(&header, &jobs));
    println!(
        "{} of {} job(s) within {} ms + {:.0}% of the observed response (the reproduction check, meaningful under the server's own configuration)",
        r["within_tolerance"],
        r["jobs_replayed"],
        TOLERANCE_MS,
        100.0 * TOLERANCE_SHARE
    );
    let late = r["started_late_at_site"].as_u64().unwrap_or(0);
    if late > 0 {
        println!(
            "{late} job(s) started late at a site in the history (placed, then waited more than {} ms beyond the start latency for processors counted as free), which the replay does not reproduce; {} of the other {} within the tolerance",
            START_SLACK_MS,
            r["within_tolerance_of_the_others"],
            r["jobs_replayed"].as_u64().unwrap_or(0).saturating_sub(late),
        );
    }
    let aborted = r["aborted_starts_replayed"].as_u64().unwrap_or(0);
    if aborted > 0 {
        println!("{aborted} aborted start(s) of the history replayed (with the configuration's back-off)");
    }
    for p in r["plots"].as_array().into_iter().flatten() {
        println!("wrote {}", p.as_str().unwrap_or(""));
    }
}
