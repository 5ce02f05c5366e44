//! `coalloc config check`: read a configuration (`[[site]]` tables and a `[scheduler]`
//! table) and print what the scheduler would run with.

use crate::error::CliError;
use crate::load::locate;
use crate::table;
use clap::Subcommand;
use coalloc_core::scheduler::{Claiming, SchedulerConfig};
use coalloc_core::spec::scheduler::parse_config;
use coalloc_core::spec::units::format_duration;
use serde_json::json;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Check a configuration file and print the sites and the scheduler's policies.
    ///
    /// The file holds `[[site]]` tables and an optional `[scheduler]` table naming the queue
    /// policy, the fit, the flexible split and the claiming policy, with their parameters.
    /// Exits 2 with the field and the rule when something is wrong.
    Check {
        /// The configuration file (TOML).
        file: PathBuf,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: ConfigCommand) -> Result<(), CliError> {
    let ConfigCommand::Check { file, json } = cmd;
    let text = std::fs::read_to_string(&file)
        .map_err(|e| CliError::bad(format!("{}: cannot read: {e}", file.display())))?;
    let (sites, config) = parse_config(&text).map_err(|e| CliError::bad(locate(&file, &e)))?;
    let settings = settings(&config);
    if json {
        let sites: Vec<_> = sites
            .iter()
            .map(|s| json!({ "name": s.name, "kind": s.kind.name(), "processors": s.processors }))
            .collect();
        let scheduler: serde_json::Map<_, _> = settings
            .into_iter()
            .map(|(k, v)| (k.to_owned(), json!(v)))
            .collect();
        let v = json!({ "sites": sites, "scheduler": scheduler });
        let text =
            serde_json::to_string_pretty(&v).map_err(|e| CliError::Internal(e.to_string()))?;
        println!("{text}");
    } else {
        let rows: Vec<Vec<String>> = sites
            .iter()
            .map(|s| vec![s.name.clone(), s.kind.to_string(), s.processors.to_string()])
            .collect();
        print!("{}", table::render(&["site", "kind", "processors"], &rows));
        println!();
        let rows: Vec<Vec<String>> = settings
            .into_iter()
            .map(|(k, v)| vec![k.to_owned(), v])
            .collect();
        print!("{}", table::render(&["setting", "value"], &rows));
    }
    Ok(())
}

fn limit(v: Option<u32>) -> String {
    v.map_or_else(|| "none".to_owned(), |n| n.to_string())
}

fn timeout(v: Option<coalloc_core::model::Millis>) -> String {
    v.map_or_else(|| "none".to_owned(), format_duration)
}

/// The configuration as name/value pairs, in a stable order.
fn settings(c: &SchedulerConfig) -> Vec<(&'static str, String)> {
    let mut out = vec![
        ("policy", c.queue.build().name().to_owned()),
        ("policy parameters", format!("{:?}", c.queue)),
        ("fit", c.fit.name().to_owned()),
        ("flexible", c.flexible_fit.name().to_owned()),
    ];
    match c.claiming {
        Claiming::Immediate => out.push(("claiming", "immediate".to_owned())),
        Claiming::Icp(p) => {
            out.push(("claiming", "icp".to_owned()));
            out.push((
                "icp",
                format!(
                    "L {} (step {}, bound {}), T {}, claiming tries {}, preemption {}",
                    p.l,
                    p.l_step,
                    p.l_min,
                    p.t,
                    limit(p.max_claim_tries),
                    if p.preempt { "on" } else { "off" }
                ),
            ));
        }
        Claiming::Reserve(p) => {
            out.push(("claiming", "reserve".to_owned()));
            out.push((
                "reserve",
                format!(
                    "{} query rounds, answer timeout {}",
                    p.rounds,
                    p.answer_timeout.map_or(
                        "none".to_owned(),
                        coalloc_core::spec::units::format_duration
                    )
                ),
            ));
        }
    }
    out.extend([
        ("max_submit_failures", limit(c.max_submit_failures)),
        ("max_completion_failures", limit(c.max_completion_failures)),
        ("pending_timeout", timeout(c.pending_timeout)),
        ("barrier_timeout", timeout(c.barrier_timeout)),
        ("recancel_interval", timeout(c.recancel_interval)),
        ("retry_backoff", format_duration(c.retry_backoff)),
        ("retry_backoff_max", format_duration(c.retry_backoff_max)),
        (
            "max_queued",
            c.max_queued
                .map_or_else(|| "none".to_owned(), |n| n.to_string()),
        ),
        ("site_errors", c.site_faults.submit_errors.to_string()),
        (
            "completion_errors",
            c.site_faults.completion_errors.to_string(),
        ),
        (
            "interactive",
            format!("{:?}", c.interactive_default).to_lowercase(),
        ),
        ("default_estimate", format_duration(c.default_estimate)),
        ("record_try_times", c.record_try_times.to_string()),
    ]);
    out
}
