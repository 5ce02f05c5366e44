//! `coalloc sim EXPERIMENT.toml`: run a parameter study on the simulator and write its CSV
//! tables, per-job logs and plots. The study itself (the runs, locally or as a Slurm job
//! array, and the files written) is [`coalloc_lab::study`]'s; this command parses its
//! arguments, draws its progress and prints its summary.

use crate::error::CliError;
use crate::table;
use coalloc_lab::study::tables::Point;
use coalloc_lab::study::{self, slurm};
use coalloc_lab::Progress;
use coalloc_sim::experiment::spec::label;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[derive(clap::Args)]
#[command(after_help = "\
Running the grid on a Slurm cluster: with --slurm, or a [cluster] table in the experiment \
file, every run (grid point and seed) becomes one task of a Slurm job array; the tasks run \
this coalloc binary on the experiment file and write into the output folder at the same \
absolute paths, so these must be shared with the compute nodes. Progress goes to standard \
error; the files written are those of a local run. The cluster is the environment's \
(SLURM_CONF) unless the table says otherwise:

  [cluster]
  partition = \"main\"              # sbatch --partition
  slurm_conf = \"/etc/slurm/x.conf\" # SLURM_CONF of every Slurm command
  time_limit = \"30\"               # sbatch --time
  sbatch_args = [\"--qos=low\"]     # more sbatch options
  task_prefix = [\"nice\"]          # each task runs coalloc under this command
  poll = \"2s\"                     # how often to ask squeue

Bookkeeping (the batch script, each task's stdout/stderr, the rows) goes to OUT/.slurm/. \
sbatch refuses a grid of more runs than the cluster's MaxArraySize (1001 by default).")]
pub struct SimArgs {
    /// The experiment file (TOML: sites, scheduler, workload, sim, grid, plots, cluster).
    /// See `experiments/*/` for examples and `coalloc_sim::experiment::spec` for every key.
    experiment: PathBuf,
    /// Output folder (default: the file's `output`, else `results` beside the file).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Worker threads (default: every core).
    #[arg(long, short = 'j')]
    threads: Option<usize>,
    /// Run seeds 1..=N instead of the file's seeds.
    #[arg(long)]
    seeds: Option<u64>,
    /// Run at most N global jobs per run (a trace's first N): a quick check that the
    /// experiment still runs end to end, not a result.
    #[arg(long, value_name = "N")]
    max_jobs: Option<usize>,
    /// Check the file and list the runs without simulating.
    #[arg(long)]
    dry_run: bool,
    /// No progress bar.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Print the summary (one object per grid point) as JSON.
    #[arg(long)]
    json: bool,
    /// Run the grid as a Slurm job array (settings from the file's `[cluster]` table, if
    /// any; see below).
    #[arg(long, conflicts_with = "local")]
    slurm: bool,
    /// Run on this machine even when the file has a `[cluster]` table.
    #[arg(long)]
    local: bool,
    /// The Slurm partition (overrides `[cluster] partition`).
    #[arg(long)]
    partition: Option<String>,
    /// An array task's part: simulate run N alone (needs --row-out).
    #[arg(long, hide = true, requires = "row_out")]
    run_index: Option<usize>,
    /// An array task's part: where run N's row goes.
    #[arg(long, hide = true, requires = "run_index")]
    row_out: Option<PathBuf>,
}

pub fn run(args: SimArgs) -> Result<(), CliError> {
    let path = &args.experiment;
    let (exp, runs) = study::load(path, args.seeds, args.max_jobs)?;
    if args.dry_run {
        for r in &runs {
            let point = study::point_words(r);
            println!("{}  seed {}  {}", r.name(), r.seed, point.join(" "));
        }
        return Ok(());
    }
    let out = study::output_dir(&exp, args.out.clone());
    if let (Some(i), Some(row_out)) = (args.run_index, &args.row_out) {
        return Ok(slurm::task(&exp, &runs, i, &out, row_out)?);
    }
    let cluster = study::cluster(
        &exp,
        args.slurm,
        args.local,
        args.partition.as_deref(),
        args.max_jobs,
    )?;
    study::create_out(&exp, &out)?;
    let quiet = args.quiet || args.json;
    let started = std::time::Instant::now();
    let (results, ran_on) = match cluster {
        Some(cluster) => {
            let abs = |p: &Path| {
                std::fs::canonicalize(p).map_err(|e| CliError::bad(format!("{}: {e}", p.display())))
            };
            let submitted = |n: usize, id: &str, logs: &Path| {
                if !quiet {
                    eprintln!(
                        "submitted {n} runs as Slurm array job {id} (logs: {})",
                        logs.display()
                    );
                }
            };
            let bar = Bar::new(
                "{elapsed_precise} [{bar:40}] {pos}/{len} runs on Slurm, {msg}",
                quiet,
            );
            let (rows, id) = slurm::run_array(
                &slurm::Submission {
                    exp: &exp,
                    runs: &runs,
                    file: abs(path)?,
                    out: abs(&out)?,
                    seeds: args.seeds,
                    cluster,
                },
                &submitted,
                &bar,
            )?;
            (rows, format!("as Slurm array job {id}"))
        }
        None => {
            let threads = args
                .threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let bar = Bar::new(
                "{elapsed_precise} [{bar:40}] {pos}/{len} runs, eta {eta}",
                quiet,
            );
            let rows = study::run_local(&exp, &runs, &out, threads, &bar)?;
            (rows, format!("on {threads} threads"))
        }
    };
    let elapsed = started.elapsed();
    let (summary, plots) = study::write_tables(&exp, &out, &results)?;
    let failed = results.iter().filter(|r| r.cols.is_err()).count();
    if args.json {
        println!("{}", study::summary_json(&summary));
    } else {
        print!("{}", summary_table(&study::axes(&exp), &summary));
        println!(
            "{} runs ({failed} failed) {ran_on} in {:.1} s; wrote {} (runs.csv, summary.csv{}{})",
            results.len(),
            elapsed.as_secs_f64(),
            out.display(),
            if exp.doc.jobs_jsonl { ", jobs/" } else { "" },
            if exp.doc.sim.sample_interval.is_some() {
                ", sites/"
            } else {
                ""
            },
        );
        for p in &plots {
            println!("plot: {}", p.display());
        }
    }
    Ok(study::first_failure(&results)?)
}

/// The study's progress as a bar on standard error (hidden when `quiet`), made when the
/// study starts.
struct Bar {
    template: &'static str,
    quiet: bool,
    bar: OnceLock<ProgressBar>,
}

impl Bar {
    fn new(template: &'static str, quiet: bool) -> Self {
        Bar {
            template,
            quiet,
            bar: OnceLock::new(),
        }
    }

    fn with(&self, f: impl FnOnce(&ProgressBar)) {
        if let Some(b) = self.bar.get() {
            f(b);
        }
    }
}

impl Progress for Bar {
    fn start(&self, len: u64) {
        let bar = if self.quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(len)
        };
        bar.set_style(
            ProgressStyle::with_template(self.template)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        let _ = self.bar.set(bar);
    }

    fn inc(&self) {
        self.with(|b| b.inc(1));
    }

    fn set_position(&self, pos: u64) {
        self.with(|b| b.set_position(pos));
    }

    fn set_message(&self, msg: String) {
        self.with(|b| b.set_message(msg));
    }

    fn finish(&self) {
        self.with(ProgressBar::finish_and_clear);
    }

    fn abandon(&self) {
        self.with(ProgressBar::abandon);
    }
}

/// The summary as a table: each grid point's values, seeds and the main metrics' means.
fn summary_table(axes: &[String], points: &[Point]) -> String {
    const SHOWN: [&str; 6] = [
        "finished",
        "success_rate",
        "mean_wait",
        "mean_bounded_slowdown",
        "total_load",
        "local_kill_rate",
    ];
    let mut header: Vec<&str> = axes.iter().map(String::as_str).collect();
    header.push("seeds");
    header.extend(SHOWN);
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            let mut row: Vec<String> = p.point.iter().map(|(_, v)| label(v)).collect();
            row.push(p.seeds.to_string());
            for name in SHOWN {
                let v = p
                    .means
                    .iter()
                    .find(|(k, _)| k == name)
                    .map_or(0.0, |(_, v)| *v);
                row.push(format!("{v:.3}"));
            }
            row
        })
        .collect();
    table::render(&header, &rows)
}
