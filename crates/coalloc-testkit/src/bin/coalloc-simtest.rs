//! `coalloc-simtest`: run the simulation harness over many seeds, or replay one.
//!
//! ```sh
//! cargo run --release -p coalloc-testkit --bin coalloc-simtest -- --seeds 10000
//! cargo run --release -p coalloc-testkit --bin coalloc-simtest -- --minutes 60 --from 1000000
//! cargo run -p coalloc-testkit --bin coalloc-simtest -- --seed 4242 --trace
//! ```

use clap::Parser;
use std::time::{Duration, Instant};

/// Run the server, fake resource managers and seeded faults on virtual time, and check the
/// invariants after every step. Exits 1 if any seed breaks one; each failure is printed
/// with the command that replays it.
#[derive(Parser)]
#[command(name = "coalloc-simtest")]
struct Args {
    /// Replay this one seed.
    #[arg(long, conflicts_with_all = ["seeds", "minutes"])]
    seed: Option<u64>,
    /// How many seeds to run (from --from).
    #[arg(long, default_value_t = 500)]
    seeds: u64,
    /// Run seeds until this many minutes have passed instead.
    #[arg(long)]
    minutes: Option<u64>,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Print every event of the run (with --seed).
    #[arg(long)]
    trace: bool,
    /// One JSON line per seed instead of a summary.
    #[arg(long)]
    json: bool,
    /// The plans without agent sites, as before they came (the seeds of older reports).
    #[arg(long, conflicts_with = "files")]
    classic: bool,
    /// The plans with input files too (their transfers, cut half-way).
    #[arg(long)]
    files: bool,
    /// The plans with fail-overs to a standby (issue 32): the leader frozen or cut off, a
    /// second server taking over from the fenced journal.
    #[arg(long, conflicts_with_all = ["classic", "files"])]
    failover: bool,
    /// The plans under the other queue policies (conservative backfilling, KOALA's,
    /// HSDF, TAGS and the rest), one drawn per seed.
    #[arg(long, conflicts_with_all = ["classic", "files", "failover"])]
    policies: bool,
}

fn main() {
    let a = Args::parse();
    let run = if a.classic {
        coalloc_testkit::sim::run_classic
    } else if a.files {
        coalloc_testkit::sim::run_files
    } else if a.failover {
        coalloc_testkit::sim::run_failover
    } else if a.policies {
        coalloc_testkit::sim::run_policies
    } else {
        coalloc_testkit::sim::run
    };
    if let Some(seed) = a.seed {
        match run(seed, a.trace) {
            Ok(o) => {
                if a.json {
                    println!("{}", serde_json::to_string(&o).unwrap_or_default());
                } else {
                    println!("seed {seed}: ok: {o:?}");
                }
            }
            Err(v) => {
                eprintln!("{v}");
                std::process::exit(1);
            }
        }
        return;
    }
    let t = Instant::now();
    let until = a.minutes.map(|m| t + Duration::from_secs(m * 60));
    let (mut ran, mut failed, mut crashes, mut jobs) = (0u64, 0u64, 0u64, 0usize);
    let mut lost = 0u64;
    // The started-twice check's reach: programs started while it held for their job, and
    // runs in which it held for every start.
    let (mut whole, mut starts, mut checked) = (0u64, 0u64, 0u64);
    let mut seed = a.from;
    loop {
        match until {
            Some(u) if Instant::now() >= u => break,
            None if seed >= a.from + a.seeds => break,
            _ => {}
        }
        match run(seed, false) {
            Ok(o) => {
                crashes += u64::from(o.crashes);
                lost += u64::from(o.lost_tails);
                jobs += o.jobs;
                whole += u64::from(o.starts_checked == o.starts);
                starts += u64::from(o.starts);
                checked += u64::from(o.starts_checked);
                if a.json {
                    println!("{}", serde_json::to_string(&o).unwrap_or_default());
                }
            }
            Err(v) => {
                failed += 1;
                eprintln!("{v}");
            }
        }
        ran += 1;
        seed += 1;
    }
    eprintln!(
        "{ran} seeds ({}..{}), {failed} failed, {jobs} jobs, {crashes} server crashes ({lost} lost unsynced records), {:.1} s",
        a.from,
        seed,
        t.elapsed().as_secs_f64()
    );
    let share = |n: u64, of: u64| {
        if of == 0 {
            0.0
        } else {
            100.0 * n as f64 / of as f64
        }
    };
    let passed = ran - failed;
    eprintln!(
        "started-twice check: {checked} of {starts} program starts checked ({:.1}%), every start in {whole} of {passed} runs ({:.1}%)",
        share(checked, starts),
        share(whole, passed)
    );
    if failed > 0 {
        std::process::exit(1);
    }
}
