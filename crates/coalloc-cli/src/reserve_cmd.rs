//! `coalloc reservations`: the advance reservations of the active jobs (issue 31, reserve
//! claiming), one row per component: job, component, site, reservation name, where it
//! stands and the common start promised, read from the jobs' views.

use crate::client::{Client, StateArgs};
use crate::error::CliError;
use crate::table;
use clap::Args;
use serde_json::{json, Value};

#[derive(Args)]
pub struct ReservationsArgs {
    /// Print JSON: an array of the reservations.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

/// The reservations of these jobs' components (job views as the API gives them).
pub fn reservations_of(jobs: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for j in jobs {
        for c in j["components"].as_array().into_iter().flatten() {
            let Some(name) = c["reservation"].as_str() else {
                continue;
            };
            out.push(json!({
                "job": j["id"], "component": c["index"], "site": c["site"],
                "reservation": name, "state": c["reservation_state"],
                "promised_start": c["promised_start"], "count": c["count"],
            }));
        }
    }
    out
}

pub fn reservations(args: ReservationsArgs) -> Result<(), CliError> {
    let client = Client::connect(&args.state)?;
    let mut all = Vec::new();
    client.pages("/v1/jobs", &[("state", "active".to_owned())], |jobs| {
        all.extend(reservations_of(jobs));
        Ok(())
    })?;
    if args.json {
        println!("{}", Value::from(all));
        return Ok(());
    }
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    };
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|r| {
            [
                "job",
                "component",
                "site",
                "count",
                "reservation",
                "state",
                "promised_start",
            ]
            .iter()
            .map(|k| text(&r[*k]))
            .collect()
        })
        .collect();
    print!(
        "{}",
        table::render(
            &[
                "job",
                "comp",
                "site",
                "count",
                "reservation",
                "state",
                "start (ms)"
            ],
            &rows
        )
    );
    Ok(())
}
