//! `coalloc events`: the server's event stream (`GET /v1/events`, server-sent events) in the
//! terminal, one line per job, component, site or VM change as it happens; `--json` prints
//! each event's JSON as the server sent it, one per line, for programs.

use crate::client::{Client, StateArgs};
use crate::error::CliError;
use clap::Args;
use serde_json::Value;
use std::io::{BufRead, Write};

#[derive(Args)]
pub struct EventsArgs {
    /// One JSON object per line, as the server sends them.
    #[arg(long)]
    pub json: bool,
    /// Only this job's events.
    #[arg(long, value_name = "JOB")]
    pub job: Option<u64>,
    /// Stop after this many events.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    #[command(flatten)]
    pub state: StateArgs,
}

/// Milliseconds since the Unix epoch as a UTC time of day, `HH:MM:SS.mmm`.
pub fn time_of_day(ms: i64) -> String {
    let d = ms.rem_euclid(86_400_000);
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        d / 3_600_000,
        d / 60_000 % 60,
        d / 1000 % 60,
        d % 1000
    )
}

/// One event as a line for people.
pub fn line(e: &Value) -> String {
    let mut out = format!(
        "{}  {:<20}",
        e["time"].as_i64().map_or("-".into(), time_of_day),
        e["event"].as_str().unwrap_or("?")
    );
    let field = |k: &str| match &e[k] {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        v => Some(v.to_string()),
    };
    for (k, label) in [
        ("job", "job"),
        ("component", "component"),
        ("launch", "launch"),
        ("site", "site"),
        ("vm", "vm"),
        ("node", "node"),
        ("by", "for job"),
        ("file", "file"),
        ("from", "from"),
        ("to", "to"),
        ("bytes", "bytes"),
        ("size", "of"),
    ] {
        if let Some(v) = field(k) {
            out += &format!(" {label} {v}");
        }
    }
    if let Some(sites) = e["sites"].as_array() {
        let names: Vec<&str> = sites.iter().map(|s| s.as_str().unwrap_or("-")).collect();
        out += &format!(" on {}", names.join(","));
    }
    if let Some(r) = field("reason") {
        out += &format!(": {r}");
    }
    out
}

pub fn run(args: EventsArgs) -> Result<(), CliError> {
    let client = Client::connect(&args.state)?;
    let reader = client.stream("/v1/events")?;
    let mut seen = 0u64;
    let stdout = std::io::stdout();
    for l in reader.lines() {
        let l = l.map_err(|e| CliError::Internal(format!("the event stream broke: {e}")))?;
        let Some(data) = l.strip_prefix("data:") else {
            continue;
        };
        let Ok(e) = serde_json::from_str::<Value>(data.trim()) else {
            // A `lagged` notice: events were missed.
            eprintln!("coalloc events: {}", data.trim());
            continue;
        };
        if args.job.is_some_and(|j| e["job"].as_u64() != Some(j)) {
            continue;
        }
        let text = if args.json { e.to_string() } else { line(&e) };
        let mut out = stdout.lock();
        // A closed pipe (`| head`) ends the command quietly.
        if writeln!(out, "{text}").and_then(|_| out.flush()).is_err() {
            return Ok(());
        }
        seen += 1;
        if args.count.is_some_and(|n| seen >= n) {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_reads_as_a_line() {
        let e = serde_json::json!({"event": "placed", "time": 1764078000123_i64, "job": 3,
            "sites": ["alpha", null]});
        assert_eq!(
            line(&e),
            "13:40:00.123  placed               job 3 on alpha,-"
        );
        let e = serde_json::json!({"event": "component_failed", "time": 0, "job": 1,
            "component": 0, "launch": 2, "reason": "exit 1"});
        assert_eq!(
            line(&e),
            "00:00:00.000  component_failed     job 1 component 0 launch 2: exit 1"
        );
    }
}
