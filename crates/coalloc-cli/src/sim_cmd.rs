//! `coalloc sim EXPERIMENT.toml`: run a parameter study on the simulator and write its CSV
//! tables, per-job logs and plots.
//!
//! Outputs, in the output folder: `runs.csv` (one row per run: grid values, seed, every
//! metric), `summary.csv` (one row per grid point: the mean over its seeds and, when a point
//! has several, `METRIC_sem` columns, the standard error of the mean σ/√n of seed 004 §V-D,
//! also drawn as error bars in the plots), `jobs/RUN.jsonl`
//! (one line per job, when the file asks), `sites/RUN.jsonl` (load samples, when
//! `sim.sample_interval` is set) and `PLOT.svg` / `PLOT.png` for every `[[plot]]`.
//!
//! The runs go to this machine's cores, or, with `--slurm` or a `[cluster]` table, to a
//! Slurm cluster as one job array ([`crate::sim_slurm`]); both write the same files.

use crate::error::CliError;
use crate::sim_tables::{check_plot, draw_plot, runs_csv, summarize, summary_csv, summary_table};
use coalloc_sim::engine::{JobFate, Outcome};
use coalloc_sim::experiment::spec::label;
use coalloc_sim::experiment::{run_all, Experiment, Run};
use indicatif::{ProgressBar, ProgressStyle};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

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

/// One run's row of `runs.csv`: its metric columns, or why it failed.
pub struct Row {
    pub run: Run,
    pub cols: Result<Vec<(String, String)>, String>,
}

/// Write a run's per-job and load logs into `out/jobs/` and `out/sites/` (when the file
/// asks for them); returns what could not be written.
pub fn write_run_logs(
    exp: &Experiment,
    out: &Path,
    run: &Run,
    outcome: Option<&Outcome>,
) -> Vec<String> {
    let Some(o) = outcome else {
        return Vec::new();
    };
    let mut writes = Vec::new();
    if exp.doc.jobs_jsonl {
        writes.push((
            out.join("jobs").join(format!("{}.jsonl", run.name())),
            jobs_jsonl(o),
        ));
    }
    if exp.doc.sim.sample_interval.is_some() {
        writes.push((
            out.join("sites").join(format!("{}.jsonl", run.name())),
            samples_jsonl(o),
        ));
    }
    writes
        .into_iter()
        .filter_map(|(p, text)| {
            std::fs::write(&p, text)
                .err()
                .map(|e| format!("{}: {e}", p.display()))
        })
        .collect()
}

pub fn run(args: SimArgs) -> Result<(), CliError> {
    let path = &args.experiment;
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::bad(format!("{}: cannot read: {e}", path.display())))?;
    let mut exp = Experiment::parse(&text, path).map_err(CliError::bad)?;
    if let Some(n) = args.seeds {
        if n == 0 {
            return Err(CliError::bad("--seeds: give at least 1"));
        }
        exp.doc.seeds = Some(coalloc_sim::experiment::spec::Seeds::Count(n));
    }
    let mut runs = exp.runs().map_err(CliError::bad)?;
    if let Some(n) = args.max_jobs {
        if n == 0 {
            return Err(CliError::bad("--max-jobs: give at least 1"));
        }
        for r in &mut runs {
            r.limit_jobs(n);
        }
    }
    for plot in &exp.doc.plot {
        check_plot(plot, &exp).map_err(CliError::bad)?;
    }
    if args.dry_run {
        for r in &runs {
            let point: Vec<String> = r
                .point
                .iter()
                .map(|(k, v)| format!("{k}={}", label(v)))
                .collect();
            println!("{}  seed {}  {}", r.name(), r.seed, point.join(" "));
        }
        return Ok(());
    }
    let out = args.out.clone().unwrap_or_else(|| {
        exp.base
            .join(exp.doc.output.as_deref().unwrap_or("results"))
    });
    if let (Some(i), Some(row_out)) = (args.run_index, &args.row_out) {
        return crate::sim_slurm::task(&exp, &runs, i, &out, row_out);
    }
    let cluster = match (&exp.doc.cluster, args.slurm, args.local) {
        (_, _, true) => None,
        (c, true, _) => Some(c.clone().unwrap_or_default()),
        (c, false, false) => c.clone(),
    };
    if cluster.is_some() && args.max_jobs.is_some() {
        return Err(CliError::bad(
            "--max-jobs is for a quick run on this machine: add --local (a Slurm array's tasks run the whole file)",
        ));
    }
    let cluster = cluster.map(|mut c| {
        if let Some(p) = &args.partition {
            c.partition = Some(p.clone());
        }
        c
    });
    let jobs_dir = out.join("jobs");
    let sites_dir = out.join("sites");
    std::fs::create_dir_all(&out)
        .map_err(|e| CliError::bad(format!("{}: cannot create: {e}", out.display())))?;
    let mkdir = |d: &Path| {
        std::fs::create_dir_all(d).map_err(|e| CliError::Internal(format!("{}: {e}", d.display())))
    };
    if exp.doc.jobs_jsonl {
        mkdir(&jobs_dir)?;
    }
    let samples = exp.doc.sim.sample_interval.is_some();
    if samples {
        mkdir(&sites_dir)?;
    }
    let started = std::time::Instant::now();
    let (results, ran_on) = match cluster {
        Some(cluster) => {
            let abs = |p: &Path| {
                std::fs::canonicalize(p).map_err(|e| CliError::bad(format!("{}: {e}", p.display())))
            };
            let (rows, id) = crate::sim_slurm::run_array(&crate::sim_slurm::Submission {
                exp: &exp,
                runs: &runs,
                file: abs(path)?,
                out: abs(&out)?,
                seeds: args.seeds,
                cluster,
                quiet: args.quiet || args.json,
            })?;
            (rows, format!("as Slurm array job {id}"))
        }
        None => {
            let threads = args
                .threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let rows = run_local(&exp, &runs, &out, threads, args.quiet || args.json)?;
            (rows, format!("on {threads} threads"))
        }
    };
    let elapsed = started.elapsed();
    let axes: Vec<String> = exp.doc.grid.iter().map(|a| a.column().to_owned()).collect();
    let write = |name: &str, text: String| {
        let p = out.join(name);
        std::fs::write(&p, text).map_err(|e| CliError::Internal(format!("{}: {e}", p.display())))
    };
    write("runs.csv", runs_csv(&axes, &results))?;
    let summary = summarize(&results);
    write("summary.csv", summary_csv(&axes, &summary))?;
    let mut plots = Vec::new();
    for plot in &exp.doc.plot {
        let files = draw_plot(plot, &exp, &summary, &out).map_err(CliError::Internal)?;
        plots.extend(files);
    }
    let failed: Vec<&Row> = results.iter().filter(|r| r.cols.is_err()).collect();
    if args.json {
        let points: Vec<serde_json::Value> = summary
            .iter()
            .map(|p| {
                let mut m = serde_json::Map::new();
                for (k, v) in &p.point {
                    m.insert(k.clone(), serde_json::Value::String(label(v)));
                }
                m.insert("seeds".into(), p.seeds.into());
                for (k, v) in &p.means {
                    m.insert(k.clone(), (*v).into());
                }
                for (k, e) in p.sems.iter().filter(|(_, e)| !e.is_nan()) {
                    m.insert(format!("{k}_sem"), (*e).into());
                }
                serde_json::Value::Object(m)
            })
            .collect();
        println!("{}", serde_json::Value::Array(points));
    } else {
        print!("{}", summary_table(&axes, &summary));
        println!(
            "{} runs ({} failed) {ran_on} in {:.1} s; wrote {} (runs.csv, summary.csv{}{})",
            results.len(),
            failed.len(),
            elapsed.as_secs_f64(),
            out.display(),
            if exp.doc.jobs_jsonl { ", jobs/" } else { "" },
            if samples { ", sites/" } else { "" },
        );
        for p in &plots {
            println!("plot: {}", p.display());
        }
    }
    match failed.first() {
        Some(r) => Err(CliError::Internal(format!(
            "run {} failed: {}",
            r.run.name(),
            r.cols.as_ref().err().map_or("", String::as_str)
        ))),
        None => Ok(()),
    }
}

/// Simulate every run on this machine's `threads` workers, with a progress bar.
fn run_local(
    exp: &Experiment,
    runs: &[Run],
    out: &Path,
    threads: usize,
    quiet: bool,
) -> Result<Vec<Row>, CliError> {
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(runs.len() as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} runs, eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let write_errors = std::sync::Mutex::new(Vec::<String>::new());
    let done = |run: &Run, outcome: Option<&Outcome>| {
        let errors = write_run_logs(exp, out, run, outcome);
        if !errors.is_empty() {
            let mut w = write_errors.lock().unwrap_or_else(|e| e.into_inner());
            w.extend(errors);
        }
        bar.inc(1);
    };
    let results = run_all(runs, &exp.base, threads, &done);
    bar.finish_and_clear();
    let errors = write_errors.into_inner().unwrap_or_default();
    if let Some(e) = errors.first() {
        return Err(CliError::Internal(format!("cannot write {e}")));
    }
    Ok(results
        .into_iter()
        .map(|r| Row {
            cols: r
                .metrics
                .as_ref()
                .map(coalloc_sim::experiment::columns)
                .map_err(Clone::clone),
            run: r.run,
        })
        .collect())
}

/// One JSON line per job: its fate, its size and shape, and every time of its record.
fn jobs_jsonl(o: &Outcome) -> String {
    let mut out = String::new();
    for j in &o.jobs {
        let r = j.record.as_ref();
        let secs = |t: Option<i64>| t.map(|t| t as f64 / 1000.0);
        let fate = match &j.fate {
            JobFate::Finished => ("finished", None),
            JobFate::Failed(w) => ("failed", Some(w.as_str())),
            JobFate::Refused(w) => ("refused", Some(w.as_str())),
            JobFate::Unfinished => ("unfinished", None),
        };
        let line = serde_json::json!({
            "job": j.tag,
            "fate": fate.0,
            "reason": fate.1,
            "submit": j.submit as f64 / 1000.0,
            "deadline": secs(j.deadline),
            "components": j.components,
            "size": j.size,
            "priority": format!("{:?}", j.priority).to_lowercase(),
            "runtime": j.runtime as f64 / 1000.0,
            "placed": secs(r.and_then(|r| r.placed())),
            "start": secs(r.and_then(|r| r.start())),
            "end": secs(r.and_then(|r| r.end())),
            "start_delay": secs(r.and_then(|r| r.start_delay())),
            "placement_tries": r.map(|r| r.placement_tries),
            "claim_tries": r.map(|r| r.claim_tries),
            "submit_failures": r.map(|r| r.submit_failures),
            "completion_failures": r.map(|r| r.completion_failures),
            "preemptions": r.map(|r| r.preemptions),
            "sites": r.map(|r| r.sites().to_vec()),
        });
        let _ = writeln!(out, "{line}");
    }
    out
}

fn samples_jsonl(o: &Outcome) -> String {
    let mut out = String::new();
    for s in &o.samples {
        if let Ok(line) = serde_json::to_string(s) {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}
