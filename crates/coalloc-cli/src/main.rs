//! The `coalloc` command line: parses arguments and hands each subcommand to its module.
//!
//! Exit codes: 0 success, 2 bad input (a malformed or invalid file, a bad argument),
//! 1 an internal error, 3 (`place`) the job does not fit.

mod agent_cmd;
mod client;
mod config_cmd;
mod demo_cmd;
mod error;
mod events_cmd;
mod file_cmd;
mod job_cmd;
mod jobs_cmd;
mod list_args;
mod load;
mod login_cmd;
mod man_cmd;
mod place_cmd;
mod replay_cmd;
mod report_cmd;
mod reserve_cmd;
mod runtime_cmd;
mod serve_cmd;
mod sim_cmd;
mod table;
mod tls_http;
mod trace_cmd;
mod txn_cmd;
mod unix_http;
mod user_cmd;
mod watch_cmd;
mod whatif_cmd;

use clap::{CommandFactory, Parser, Subcommand};
use error::CliError;
use std::process::ExitCode;

/// The allocator: the simulator's replays allocate and free a great many small objects
/// (about a third of a trace replay's time went to glibc's malloc and free; see the replay
/// section of bench/RESULTS.md). Wrapped so that the server's forked snapshot writer cannot
/// allocate (`coalloc_server::driver::forked`).
#[global_allocator]
static ALLOCATOR: coalloc_server::driver::forked::ForkSafe<mimalloc::MiMalloc> =
    coalloc_server::driver::forked::ForkSafe(mimalloc::MiMalloc);

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
    /// The embedded default end to end: a server with three local clusters, the co-allocated
    /// Poisson solver and a small batch, their progress, the answer and the report.
    Demo(demo_cmd::DemoArgs),
    /// Run the server: it drives the scheduler with the wall clock, runs components on the
    /// configured sites, and serves the HTTP API, the barrier and the rendezvous store.
    ///
    /// Every accepted input is journaled in SQLite (STATE_DIR/journal.sqlite), or in
    /// PostgreSQL with `[server] journal = "postgres://..."`, before it takes effect; a restart replays the journal and adopts the components that still run. The
    /// address and a bearer token (mode 0600) are written to the state directory, where the
    /// client commands find them. Stops on Ctrl-C or SIGTERM.
    ///
    /// On PostgreSQL, several servers may share one database: one leads by a lease on the
    /// journal (`[server] lease`, 3 s); the others wait as standbys, answering 503 with the
    /// leader's address, and one takes over when the leader's lease runs out.
    Serve(serve_cmd::ServeArgs),
    /// Submit job files to the running server (RSL, .uno, .bat, TOML, JSON).
    Submit(jobs_cmd::SubmitArgs),
    /// Jobs of the running server, as a table like squeue's: the active ones (pending and
    /// running) unless `--state` says otherwise; with a job number, that job's components,
    /// sites, launches and times.
    ///
    /// The server answers a page at a time and each page is printed as it comes, however
    /// many jobs are queued. Ended jobs leave the server's memory after its `min_job_age`:
    /// `coalloc history` finds them.
    #[command(visible_alias = "jobs")]
    Status(jobs_cmd::StatusArgs),
    /// Ended jobs that have left the server's memory (older than its `min_job_age`), like
    /// sacct: the same table and filters as `status`, read from the history table a page at
    /// a time.
    History(jobs_cmd::HistoryArgs),
    /// Cancel jobs: every started component is killed.
    Cancel(jobs_cmd::CancelArgs),
    /// Edit a job before its commit (seed 002 §3.2): add, delete or substitute a component.
    Edit(txn_cmd::EditArgs),
    /// Commit a job held at the barrier (`hold_at_barrier = true`): it is released once
    /// every required component is there.
    Commit(txn_cmd::CommitArgs),
    /// Sites of the running server: processors in all, idle, held by coalloc and by other
    /// users, state and error counts.
    Sites(jobs_cmd::SitesArgs),
    /// Advance reservations of the active jobs (`--reserve`, issue 31): each component's
    /// site, reservation, where it stands and the common start promised.
    Reservations(reserve_cmd::ReservationsArgs),
    /// Standard output (or error) of a job's components, every launch; `--follow` as it is
    /// written.
    ///
    /// Read over the server's API (`GET /v1/jobs/ID/output`), so a user on another host, with
    /// COALLOC_URL and COALLOC_TOKEN, sees their own jobs' output; another user's job is
    /// refused.
    Logs(jobs_cmd::LogsArgs),
    /// The replica catalog: where jobs' input files are (`register`, `ls`, `rm`).
    #[command(subcommand)]
    File(file_cmd::FileCommand),
    /// Manage the server's sites: `coalloc site add NAME` enrols an agent site's agent;
    /// `coalloc site drain|down|resume NAME --reason TEXT` takes one out or puts it back.
    #[command(subcommand)]
    Site(agent_cmd::SiteCommand),
    /// Manage users (the admin): `coalloc user add NAME [--admin]` issues a token, `ls`
    /// lists them, `rm NAME` takes one back. Local users need none: the CLI talks over the
    /// server's Unix socket and the server knows them by their uid.
    #[command(subcommand)]
    User(user_cmd::UserCommand),
    /// Pin an HTTPS server's certificate: `coalloc login https://HOST:PORT` shows its
    /// fingerprint and asks to trust it (`--fingerprint HEX` or `--yes` without asking);
    /// later calls to that URL refuse any other certificate.
    Login(login_cmd::LoginArgs),
    /// Run a site agent on a site's login node: it runs the site's resource manager's
    /// commands for the server, which it reaches over one outbound TLS link, and relays its
    /// components' barrier and rendezvous calls. The site opens no inbound port.
    ///
    /// On the server: `coalloc site add NAME > NAME.token`; on the login node:
    /// `coalloc agent --token-file NAME.token --config NAME.toml`. The agent reconnects by
    /// itself when the link breaks, and stops (exit 2) when the server refuses its
    /// credential or presents another certificate than the one its token pins.
    Agent(agent_cmd::AgentArgs),
    /// A live view of sites and jobs, redrawn every second.
    Watch(watch_cmd::WatchArgs),
    /// The server's events as they happen (jobs, components, sites, VMs), one per line;
    /// `--json` for programs.
    Events(events_cmd::EventsArgs),
    /// Plots and a summary from the server's result and surveillance logs: utilization over
    /// time and the load of each site (SVG and PNG).
    Report(report_cmd::ReportArgs),
    /// Replay the server's own history (its journal and logs) on the simulator under another
    /// policy, fit or configuration, beside what happened: wait, response, slowdown,
    /// placement tries and utilization per site, per job and in the mean, with plots.
    ///
    /// Replayed: every job that ended, as submitted and when (the journal): a finished job
    /// runs for its observed net run time (barrier release to end, the result log); a
    /// cancelled job is cancelled the same time after its submission; a job that failed
    /// after it ran fails, as its own program's failure, after its observed net run time
    /// (the configuration's limits decide about retries); a job that failed without ever
    /// running is ended the same time after its submission. Each job's line says how it
    /// was treated. Also replayed: the sites' other users' load and unhealthy readings (the
    /// surveillance log); the start latency (the median of placement to barrier release).
    /// Approximated: a job's components all run for the job's net run time (per-component
    /// ends are not compared); the other users' load is known only at readings (monitor
    /// changes and sample intervals) and is replayed as local jobs (a rise starts one, a
    /// fall ends the latest), which queue FCFS on the simulated site if coalloc holds their
    /// processors; an unhealthy reading is an outage that kills what runs there. Not
    /// replayed: jobs still live when the logs end, edits, commits of interactive jobs,
    /// transfers and cloud VMs. The means and plots compare the jobs that finished. A
    /// policy given with --policy takes its parameters from the configuration's
    /// `[scheduler]` tables; TAGS-chain and TAGS-sets need chains or sets and runtime
    /// limits (`[scheduler.tags]`, or --tags-chains / --tags-sets and --tags-limits). With
    /// the server's own configuration every job's replayed wait and response are expected
    /// within 1 s + 10% of its observed response.
    Whatif(whatif_cmd::WhatifArgs),
    /// Inside a component: check in at the job's start barrier and wait until the job commits
    /// (exit 0) or is aborted (exit 1). `--fail` reports a failed start-up instead.
    ///
    /// Reads the component's COALLOC_* environment, which coalloc sets for every process.
    Barrier(runtime_cmd::BarrierArgs),
    /// Inside a component: the job's rendezvous store, so that components find each other
    /// (put an address, get a peer's).
    #[command(subcommand)]
    Kv(runtime_cmd::KvCommand),
    /// Inside an `mpi` component (the server starts it there): serve MPICH's PMI-1 to the
    /// component's COALLOC_PROCESSES MPI processes of PROGRAM, with job-wide ranks, the
    /// job's rendezvous store as their KVS and their first PMI barrier as the start barrier.
    PmiProxy {
        /// The MPI program and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// The co-allocated Poisson solver of the demo (examples/poisson), built in.
    #[command(hide = true, disable_help_flag = true)]
    Poisson {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// A local cluster's long-lived launcher, started by the server on the cluster's work
    /// directory: it starts the cluster's components and writes their exit codes.
    #[command(hide = true)]
    LocalLauncher {
        /// The cluster's work directory.
        dir: std::path::PathBuf,
    },
    /// Write the manual pages (`coalloc(1)` and one per command, e.g. `coalloc-submit(1)`),
    /// generated from these very definitions, into a directory.
    ///
    /// `coalloc man --dir ~/.local/share/man/man1` and then `man coalloc-submit` (that
    /// directory's parent is on `manpath` by default); or `man -M DIR/.. coalloc-submit`.
    Man(man_cmd::ManArgs),
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
        Command::Demo(args) => demo_cmd::run(args),
        Command::Serve(args) => serve_cmd::run(args),
        Command::Submit(args) => jobs_cmd::submit(args),
        Command::Status(args) => jobs_cmd::status(args),
        Command::History(args) => jobs_cmd::history(args),
        Command::Cancel(args) => jobs_cmd::cancel(args),
        Command::Edit(args) => txn_cmd::edit(args),
        Command::Commit(args) => txn_cmd::commit(args),
        Command::Sites(args) => jobs_cmd::sites(args),
        Command::Reservations(args) => reserve_cmd::reservations(args),
        Command::Logs(args) => jobs_cmd::logs(args),
        Command::File(cmd) => file_cmd::run(cmd),
        Command::Site(cmd) => agent_cmd::site(cmd),
        Command::User(cmd) => user_cmd::run(cmd),
        Command::Login(args) => login_cmd::run(args),
        Command::Agent(args) => agent_cmd::agent(args),
        Command::Watch(args) => watch_cmd::run(args),
        Command::Events(args) => events_cmd::run(args),
        Command::Report(args) => report_cmd::run(args),
        Command::Whatif(args) => whatif_cmd::run(args),
        Command::Barrier(args) => runtime_cmd::run_barrier(args),
        Command::Kv(cmd) => runtime_cmd::run_kv(cmd),
        Command::PmiProxy { command } => runtime_cmd::run_pmi_proxy(&command),
        Command::Poisson { args } => std::process::exit(coalloc_poisson::run(&args)),
        Command::LocalLauncher { dir } => coalloc_backends::local::launcher::run(&dir)
            .map_err(|e| CliError::Internal(format!("local launcher: {e}"))),
        Command::Man(args) => man_cmd::run(args, Cli::command()),
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "coalloc", &mut std::io::stdout());
            Ok(())
        }
    }
}

/// Whether the command only prints for a reader (a client or an offline tool): a closed pipe
/// ends it quietly. The long-running ones (the server, agents, launchers, the PMI proxy and
/// the demo that runs a server) keep Rust's ignored SIGPIPE and see the error instead.
fn prints_for_a_reader(c: &Command) -> bool {
    !matches!(
        c,
        Command::Serve(_)
            | Command::Agent(_)
            | Command::LocalLauncher { .. }
            | Command::PmiProxy { .. }
            | Command::Demo(_)
            | Command::Poisson { .. }
    )
}

/// Let SIGPIPE end the process, as it does `ls` or `grep`: `coalloc status --json | head`
/// must not panic on the closed pipe (Rust ignores SIGPIPE, and `println!` panics on the
/// write error that follows).
fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to its default at start-up, before any thread
    // is spawned, has no memory-safety effect.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if prints_for_a_reader(&cli.command) {
        default_sigpipe();
    }
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

    #[test]
    fn a_manual_page_per_visible_command() {
        let dir = std::env::temp_dir().join(format!("coalloc-man-{}", std::process::id()));
        let pages = man_cmd::write_pages(&dir, Cli::command()).unwrap();
        let names: Vec<String> = pages
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for want in [
            "coalloc.1",
            "coalloc-submit.1",
            "coalloc-logs.1",
            "coalloc-site-add.1",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
        }
        assert!(
            !names.iter().any(|n| n.contains("local-launcher")),
            "{names:?}"
        );
        let submit = std::fs::read_to_string(dir.join("coalloc-submit.1")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(submit.contains(".TH coalloc-submit 1"), "{submit}");
        assert!(submit.contains("Submit job files"), "{submit}");
    }
}
