//! `coalloc watch`: a live view of the sites and jobs of a running server, redrawn every
//! interval until Ctrl-C (or, with `--until-done`, until no job is left unfinished).

use crate::client::{Client, StateArgs};
use crate::error::CliError;
use crate::jobs_cmd::{jobs_table, sites_table};
use clap::Args;
use std::time::Duration;

#[derive(Args)]
pub struct WatchArgs {
    /// Seconds between redraws.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Stop when every job has ended.
    #[arg(long)]
    pub until_done: bool,
    /// Draw once and stop (no screen clearing).
    #[arg(long)]
    pub once: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

/// One frame: the sites, then the jobs. Returns the frame and whether every job has ended.
pub fn frame(client: &Client) -> Result<(String, bool), CliError> {
    let sites = client.get("/v1/sites")?;
    let jobs = client.get("/v1/jobs")?;
    let done = jobs["jobs"].as_array().is_none_or(|js| {
        js.iter()
            .all(|j| matches!(j["state"].as_str(), Some("finished" | "failed")))
    });
    let text = format!(
        "coalloc at {}\n\n{}\n{}",
        client.place(),
        sites_table(&sites["sites"]),
        jobs_table(&jobs["jobs"])
    );
    Ok((text, done))
}

pub fn run(args: WatchArgs) -> Result<(), CliError> {
    if !(args.interval > 0.0 && args.interval.is_finite()) {
        return Err(CliError::bad(
            "--interval must be a positive number of seconds",
        ));
    }
    let client = Client::connect(&args.state)?;
    loop {
        let (text, done) = frame(&client)?;
        if args.once {
            print!("{text}");
            return Ok(());
        }
        // Clear the screen and go home, then draw.
        print!("\x1b[2J\x1b[H{text}");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        if args.until_done && done {
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs_f64(args.interval));
    }
}
