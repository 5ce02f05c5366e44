//! The `coalloc` command line: parses arguments and hands each subcommand to its module.
//!
//! Exit codes: 0 success, 2 bad input (a malformed or invalid file, a bad argument),
//! 1 an internal error, 3 (`place`) the job does not fit.

mod config_cmd;
mod error;
mod job_cmd;
mod load;
mod place_cmd;
mod plot;
mod replay_cmd;
mod sim_cmd;
mod table;
mod trace_cmd;

use clap::{CommandFactory, Parser, Subcommand};
use error::CliError;
use std::process::ExitCode;

/// coalloc — a co-allocating meta-scheduler for multicluster and multicloud systems.
///
/// A job is made of components. coalloc picks a site for each component, starts them all at
/// once on independent clusters or clouds, holds them at a start barrier until every required
/// one runs, and then commits the job — or aborts, re-places and retries it when a site fails.
#[derive(Parser)]
#[command(
    name = "coalloc",
    version,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check and convert job files (RSL `.rsl` / `.uno`, batch `.bat`, native `.toml` / `.json`).
    #[command(subcommand)]
    Job(job_cmd::JobCommand),
    /// Place a job on a site list (a dry run): the site, file site and transfer estimate of
    /// each component, and the idle processors before and after.
    ///
    /// Ordered jobs use the named sites; unordered and total jobs the chosen fit; flexible
    /// jobs are split by cluster filling or load balancing. Exits 0 when the job fits, 3 when
    /// it does not (the reason is printed), 2 for a bad sites file or job file.
    Place(place_cmd::PlaceArgs),
    /// Check a configuration: the site list and the scheduler's policies.
    #[command(subcommand)]
    Config(config_cmd::ConfigCommand),
    /// Workload traces in the Standard Workload Format (SWF): statistics.
    #[command(subcommand)]
    Trace(trace_cmd::TraceCommand),
    /// Replay a workload trace (SWF) on the scheduling core: one run, with its metrics.
    ///
    /// Every trace job is a one-component job submitted at its SWF submit time that runs for
    /// its SWF runtime; its requested time is only the estimate backfilling sees, and no job
    /// is killed at it. Ends at an instant are seen before submissions, submissions keep
    /// their file order.
    Replay(replay_cmd::ReplayArgs),
    /// Run a parameter study on the simulator: every grid point × seed of an experiment
    /// file, in parallel, with a progress bar; writes runs.csv, summary.csv, per-job JSON
    /// lines and SVG/PNG plots.
    ///
    /// The simulator drives the production scheduling core on virtual time against simulated
    /// sites (local FCFS jobs, start latency, injected failures and outages, file transfers).
    /// Examples: `experiments/*/`.
    Sim(sim_cmd::SimArgs),
    /// Print a shell completion script, e.g. `coalloc completions bash > /etc/bash_completion.d/coalloc`.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
}

fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Job(cmd) => job_cmd::run(cmd),
        Command::Config(cmd) => config_cmd::run(cmd),
        Command::Place(args) => place_cmd::run(args),
        Command::Trace(cmd) => trace_cmd::run(cmd),
        Command::Replay(args) => replay_cmd::run(args),
        Command::Sim(args) => sim_cmd::run(args),
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "coalloc", &mut std::io::stdout());
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            e.report();
            e.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
