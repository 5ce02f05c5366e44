//! A parameter study on the simulator (`coalloc sim EXPERIMENT.toml`): the experiment file
//! read into its runs, the runs simulated, and their CSV tables, per-job logs and plots
//! written.
//!
//! Outputs, in the output folder: `runs.csv` (one row per run: grid values, seed, every
//! metric), `summary.csv` (one row per grid point: the mean over its seeds and, when a point
//! has several, `METRIC_sem` columns, the standard error of the mean σ/√n of seed 004 §V-D,
//! also drawn as error bars in the plots), `jobs/RUN.jsonl`
//! (one line per job, when the file asks), `sites/RUN.jsonl` (load samples, when
//! `sim.sample_interval` is set) and `PLOT.svg` / `PLOT.png` for every `[[plot]]`.
//!
//! The runs go to this machine's cores ([`run_local`]), or to a Slurm cluster as one job
//! array ([`slurm`]); both write the same files.

pub mod slurm;
pub mod tables;

use crate::{LabError, Progress};
use coalloc_sim::engine::{JobFate, Outcome};
use coalloc_sim::experiment::spec::{label, ClusterDoc, Seeds};
use coalloc_sim::experiment::{run_all, Experiment, Run};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use tables::{check_plot, draw_plot, runs_csv, summarize, summary_csv, Point};

/// One run's row of `runs.csv`: its metric columns, or why it failed.
pub struct Row {
    pub run: Run,
    pub cols: Result<Vec<(String, String)>, String>,
}

/// Read the experiment file at `path` into its experiment and runs: `seeds` runs seeds
/// 1..=N instead of the file's, `max_jobs` keeps each run's first N global jobs; every
/// `[[plot]]` is checked.
pub fn load(
    path: &Path,
    seeds: Option<u64>,
    max_jobs: Option<usize>,
) -> Result<(Experiment, Vec<Run>), LabError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| LabError::bad(format!("{}: cannot read: {e}", path.display())))?;
    let mut exp = Experiment::parse(&text, path).map_err(LabError::bad)?;
    if let Some(n) = seeds {
        if n == 0 {
            return Err(LabError::bad("--seeds: give at least 1"));
        }
        exp.doc.seeds = Some(Seeds::Count(n));
    }
    let mut runs = exp.runs().map_err(LabError::bad)?;
    if let Some(n) = max_jobs {
        if n == 0 {
            return Err(LabError::bad("--max-jobs: give at least 1"));
        }
        for r in &mut runs {
            r.limit_jobs(n);
        }
    }
    for plot in &exp.doc.plot {
        check_plot(plot, &exp).map_err(LabError::bad)?;
    }
    Ok((exp, runs))
}

/// A run's grid point as `key=value` words.
pub fn point_words(r: &Run) -> Vec<String> {
    r.point
        .iter()
        .map(|(k, v)| format!("{k}={}", label(v)))
        .collect()
}

/// The output folder: `out`, else the file's `output`, else `results` beside the file.
pub fn output_dir(exp: &Experiment, out: Option<PathBuf>) -> PathBuf {
    out.unwrap_or_else(|| {
        exp.base
            .join(exp.doc.output.as_deref().unwrap_or("results"))
    })
}

/// Where the runs go: `None` for this machine, else the Slurm cluster (`--slurm`, or the
/// file's `[cluster]` table unless `--local`), with `partition` overriding its own.
pub fn cluster(
    exp: &Experiment,
    slurm: bool,
    local: bool,
    partition: Option<&str>,
    max_jobs: Option<usize>,
) -> Result<Option<ClusterDoc>, LabError> {
    let cluster = match (&exp.doc.cluster, slurm, local) {
        (_, _, true) => None,
        (c, true, _) => Some(c.clone().unwrap_or_default()),
        (c, false, false) => c.clone(),
    };
    if cluster.is_some() && max_jobs.is_some() {
        return Err(LabError::bad(
            "--max-jobs is for a quick run on this machine: add --local (a Slurm array's tasks run the whole file)",
        ));
    }
    Ok(cluster.map(|mut c| {
        if let Some(p) = partition {
            c.partition = Some(p.to_owned());
        }
        c
    }))
}

/// Create the output folder and the `jobs/` and `sites/` folders the file asks for.
pub fn create_out(exp: &Experiment, out: &Path) -> Result<(), LabError> {
    std::fs::create_dir_all(out)
        .map_err(|e| LabError::bad(format!("{}: cannot create: {e}", out.display())))?;
    let mkdir = |d: &Path| {
        std::fs::create_dir_all(d).map_err(|e| LabError::Internal(format!("{}: {e}", d.display())))
    };
    if exp.doc.jobs_jsonl {
        mkdir(&out.join("jobs"))?;
    }
    if exp.doc.sim.sample_interval.is_some() {
        mkdir(&out.join("sites"))?;
    }
    Ok(())
}

/// Write `runs.csv`, `summary.csv` and every `[[plot]]` into `out`; returns the grid
/// points' means and the plots written.
pub fn write_tables(
    exp: &Experiment,
    out: &Path,
    results: &[Row],
) -> Result<(Vec<Point>, Vec<PathBuf>), LabError> {
    let axes = axes(exp);
    let write = |name: &str, text: String| {
        let p = out.join(name);
        std::fs::write(&p, text).map_err(|e| LabError::Internal(format!("{}: {e}", p.display())))
    };
    write("runs.csv", runs_csv(&axes, results))?;
    let summary = summarize(results);
    write("summary.csv", summary_csv(&axes, &summary))?;
    let mut plots = Vec::new();
    for plot in &exp.doc.plot {
        let files = draw_plot(plot, exp, &summary, out).map_err(LabError::Internal)?;
        plots.extend(files);
    }
    Ok((summary, plots))
}

/// The grid's axes, as the tables' column names.
pub fn axes(exp: &Experiment) -> Vec<String> {
    exp.doc.grid.iter().map(|a| a.column().to_owned()).collect()
}

/// The summary as JSON: one object per grid point (its values, seeds, means and the
/// standard errors there are).
pub fn summary_json(summary: &[Point]) -> serde_json::Value {
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
    serde_json::Value::Array(points)
}

/// The first failed run's error, as the command ends with it.
pub fn first_failure(results: &[Row]) -> Result<(), LabError> {
    match results.iter().find(|r| r.cols.is_err()) {
        Some(r) => Err(LabError::Internal(format!(
            "run {} failed: {}",
            r.run.name(),
            r.cols.as_ref().err().map_or("", String::as_str)
        ))),
        None => Ok(()),
    }
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

/// Simulate every run on this machine's `threads` workers, counting each that ends on
/// `progress`.
pub fn run_local(
    exp: &Experiment,
    runs: &[Run],
    out: &Path,
    threads: usize,
    progress: &dyn Progress,
) -> Result<Vec<Row>, LabError> {
    progress.start(runs.len() as u64);
    let write_errors = std::sync::Mutex::new(Vec::<String>::new());
    let done = |run: &Run, outcome: Option<&Outcome>| {
        let errors = write_run_logs(exp, out, run, outcome);
        if !errors.is_empty() {
            let mut w = write_errors.lock().unwrap_or_else(|e| e.into_inner());
            w.extend(errors);
        }
        progress.inc();
    };
    let results = run_all(runs, &exp.base, threads, &done);
    progress.finish();
    let errors = write_errors.into_inner().unwrap_or_default();
    if let Some(e) = errors.first() {
        return Err(LabError::Internal(format!("cannot write {e}")));
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
            "claim_tries": r.map(|r| r.claim_tries()),
            "submit_failures": r.map(|r| r.submit_failures()),
            "completion_failures": r.map(|r| r.completion_failures()),
            "preemptions": r.map(|r| r.preemptions()),
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
