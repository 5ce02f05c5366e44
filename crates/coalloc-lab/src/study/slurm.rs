//! A study's runs as one Slurm job array (`coalloc sim EXPERIMENT.toml --slurm`, or a
//! `[cluster]` table) (issue 22, item 5). Task `i` runs `coalloc sim EXPERIMENT.toml
//! --run-index i --row-out ROWS/i.json` (run `i` of [`Experiment::runs`]: the grid's points
//! in order, each with every seed), which simulates that one run, writes its per-job and
//! load logs into the output folder as a local run does, and its row (metric columns, or
//! the run's error) as JSON. The submitting process polls `squeue` until the array has left
//! the queue, then reads the rows back in run order, so `runs.csv`, `summary.csv` and the
//! plots are those of a local run, byte for byte.
//!
//! The tasks run the `coalloc` binary that submitted them, read the experiment file and
//! write the output folder at the same absolute paths, so these must be shared with the
//! compute nodes. Bookkeeping goes to `OUT/.slurm/` (the batch script, one `.err`/`.out`
//! per task under `logs/`, the rows under `rows/`).

use super::{write_run_logs, Row};
use crate::{LabError, Progress};
use coalloc_backends::slurm::parse::sbatch_job_id;
use coalloc_backends::slurm::script::quote;
use coalloc_core::spec::units::{parse_duration, Scalar};
use coalloc_sim::experiment::spec::{label, ClusterDoc};
use coalloc_sim::experiment::{columns, measure, run_one, Experiment, Run};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How many `squeue` failures in a row end the wait (the controller is gone for good).
const SQUEUE_FAILURES: u32 = 30;

/// What one array task writes: its run's metric columns, or why the run failed.
#[derive(serde::Serialize, serde::Deserialize)]
struct RowFile {
    index: usize,
    seed: u64,
    #[serde(default)]
    columns: Option<Vec<(String, String)>>,
    #[serde(default)]
    error: Option<String>,
}

/// The hidden task mode: simulate run `index` alone, write its logs into `out` and its row
/// to `row_out` (through a temporary file and a rename, so a half-written row is never
/// read).
pub fn task(
    exp: &Experiment,
    runs: &[Run],
    index: usize,
    out: &Path,
    row_out: &Path,
) -> Result<(), LabError> {
    let run = runs.get(index).ok_or_else(|| {
        LabError::bad(format!(
            "--run-index {index}: the experiment has {} runs (0..={})",
            runs.len(),
            runs.len().saturating_sub(1)
        ))
    })?;
    let outcome = run_one(run, &exp.base);
    let errors = write_run_logs(exp, out, run, outcome.as_ref().ok());
    if let Some(e) = errors.first() {
        return Err(LabError::Internal(format!("cannot write {e}")));
    }
    let metrics = outcome.and_then(|o| measure(run.doc(), &o));
    let row = RowFile {
        index,
        seed: run.seed,
        columns: metrics.as_ref().ok().map(columns),
        error: metrics.err(),
    };
    let text = serde_json::to_string(&row).map_err(|e| LabError::Internal(e.to_string()))?;
    let tmp = row_out.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, row_out))
        .map_err(|e| LabError::Internal(format!("{}: {e}", row_out.display())))
}

/// What the submitting process needs to rebuild the tasks' command line.
pub struct Submission<'a> {
    pub exp: &'a Experiment,
    pub runs: &'a [Run],
    /// The experiment file and the output folder, absolute.
    pub file: PathBuf,
    pub out: PathBuf,
    /// `--seeds`, passed on to the tasks.
    pub seeds: Option<u64>,
    pub cluster: ClusterDoc,
}

/// Submit the array, wait for it, and read its rows in run order. Returns the rows and the
/// array's job id. `submitted` hears of the array once sbatch took it (its number of runs,
/// job id and logs folder); `progress` counts the rows written while it waits.
pub fn run_array(
    s: &Submission,
    submitted: &dyn Fn(usize, &str, &Path),
    progress: &dyn Progress,
) -> Result<(Vec<Row>, String), LabError> {
    let work = s.out.join(".slurm");
    let rows_dir = work.join("rows");
    let logs = work.join("logs");
    for d in [&rows_dir, &logs] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d)
            .map_err(|e| LabError::bad(format!("{}: cannot create: {e}", d.display())))?;
    }
    let poll = match &s.cluster.poll {
        Some(p) => parse_duration(&Scalar::Str(p.clone()))
            .map_err(|e| LabError::bad(format!("[cluster] poll: {e}")))?,
        None => 2000,
    };
    let conf = s.cluster.slurm_conf.as_ref().map(|c| s.exp.base.join(c));
    if let Some(c) = &conf {
        if !c.is_file() {
            return Err(LabError::bad(format!(
                "[cluster] slurm_conf: {} is not a file",
                c.display()
            )));
        }
    }
    let script = batch_script(s, &rows_dir)?;
    std::fs::write(work.join("array.sh"), &script)
        .map_err(|e| LabError::Internal(format!("{}: {e}", work.display())))?;
    let n = s.runs.len();
    let mut args = vec![
        "--parsable".to_owned(),
        format!("--array=0-{}", n - 1),
        format!("--job-name=coalloc-sim-{}", s.exp.doc.name),
        "--ntasks=1".to_owned(),
        "--no-requeue".to_owned(),
        format!("--output={}/%a.out", logs.display()),
        format!("--error={}/%a.err", logs.display()),
    ];
    if let Some(p) = &s.cluster.partition {
        args.push(format!("--partition={p}"));
    }
    if let Some(t) = &s.cluster.time_limit {
        args.push(format!("--time={t}"));
    }
    args.extend(s.cluster.sbatch_args.iter().cloned());
    let sbatch = slurm(&conf, "sbatch", &args, Some(script.as_bytes()))?;
    if !sbatch.status.success() {
        return Err(LabError::bad(format!(
            "sbatch refused the array of {n} runs: {}",
            message(&sbatch)
        )));
    }
    let id = sbatch_job_id(&String::from_utf8_lossy(&sbatch.stdout))
        .map_err(|e| LabError::Internal(e.to_string()))?;
    submitted(n, &id, &logs);
    let poll = Duration::from_millis(poll as u64);
    wait(s, &conf, &id, &rows_dir, poll, progress)?;
    let rows = collect(s, &rows_dir, &logs, &id)?;
    Ok((rows, id))
}

/// The batch script every task runs: `[PREFIX...] coalloc sim FILE --out OUT --run-index
/// $SLURM_ARRAY_TASK_ID --row-out ROWS/$SLURM_ARRAY_TASK_ID.json`.
fn batch_script(s: &Submission, rows: &Path) -> Result<String, LabError> {
    let q = |p: &str| quote(p, "path").map_err(|e| LabError::bad(e.to_string()));
    let exe = std::env::current_exe()
        .map_err(|e| LabError::Internal(format!("cannot find the coalloc binary: {e}")))?;
    let mut words: Vec<String> = Vec::new();
    for w in &s.cluster.task_prefix {
        words.push(q(w)?);
    }
    words.push(q(&exe.display().to_string())?);
    words.push("sim".into());
    words.push(q(&s.file.display().to_string())?);
    words.push("--out".into());
    words.push(q(&s.out.display().to_string())?);
    if let Some(n) = s.seeds {
        words.push(format!("--seeds={n}"));
    }
    words.push("--run-index=\"$SLURM_ARRAY_TASK_ID\"".into());
    words.push(format!(
        "--row-out={}\"/$SLURM_ARRAY_TASK_ID.json\"",
        q(&rows.display().to_string())?
    ));
    Ok(format!(
        "#!/bin/sh\n# coalloc sim: one run of {} per array task\nexec {}\n",
        s.file.display(),
        words.join(" ")
    ))
}

/// `program args` with the cluster's `slurm.conf`; a missing program is a friendly error.
fn slurm(
    conf: &Option<PathBuf>,
    program: &str,
    args: &[String],
    stdin: Option<&[u8]>,
) -> Result<std::process::Output, LabError> {
    let mut c = Command::new(program);
    c.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(conf) = conf {
        c.env("SLURM_CONF", conf);
    }
    let mut child = c.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            LabError::bad(format!(
                "cannot run {program}: not found on PATH (running the grid on Slurm needs \
                 Slurm's client commands; run without --slurm, or with --local, to simulate \
                 here)"
            ))
        } else {
            LabError::bad(format!("cannot run {program}: {e}"))
        }
    })?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes)
            .map_err(|e| LabError::Internal(format!("{program}: writing its input: {e}")))?;
    }
    child
        .wait_with_output()
        .map_err(|e| LabError::Internal(format!("{program}: {e}")))
}

fn message(o: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    let text = if err.trim().is_empty() {
        String::from_utf8_lossy(&o.stdout)
    } else {
        err
    };
    match text.trim() {
        "" => format!("no output, {}", o.status),
        t => t.to_owned(),
    }
}

fn count_rows(rows: &Path) -> usize {
    std::fs::read_dir(rows).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .count()
    })
}

/// Poll `squeue` until no task of array `id` is queued or running; `bar` counts the rows
/// written.
fn wait(
    s: &Submission,
    conf: &Option<PathBuf>,
    id: &str,
    rows: &Path,
    poll: Duration,
    bar: &dyn Progress,
) -> Result<(), LabError> {
    bar.start(s.runs.len() as u64);
    let args: Vec<String> = ["-h", "-r", "-j", id, "-o", "%i %T"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut failures = 0;
    loop {
        let q = slurm(conf, "squeue", &args, None)?;
        let text = String::from_utf8_lossy(&q.stdout).into_owned();
        let gone = !q.status.success() && message(&q).contains("Invalid job id");
        if q.status.success() || gone {
            failures = 0;
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            let running = lines.iter().filter(|l| l.ends_with("RUNNING")).count();
            bar.set_position(count_rows(rows) as u64);
            bar.set_message(format!(
                "{running} running, {} queued",
                lines.len() - running
            ));
            if lines.is_empty() {
                break;
            }
        } else {
            failures += 1;
            if failures >= SQUEUE_FAILURES {
                bar.abandon();
                return Err(LabError::Internal(format!(
                    "squeue failed {failures} times in a row while waiting for array job \
                     {id}: {} (the tasks may still run; their rows go to {})",
                    message(&q),
                    rows.display()
                )));
            }
        }
        std::thread::sleep(poll);
    }
    bar.finish();
    Ok(())
}

/// The rows in run order; a task that left none failed: name its grid point, seed and the
/// end of its standard error.
fn collect(s: &Submission, rows: &Path, logs: &Path, id: &str) -> Result<Vec<Row>, LabError> {
    let mut out = Vec::with_capacity(s.runs.len());
    let mut missing = Vec::new();
    for run in s.runs {
        let path = rows.join(format!("{}.json", run.index));
        let parsed = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<RowFile>(&t).ok())
            .filter(|r| r.index == run.index && r.seed == run.seed);
        match parsed {
            Some(r) => out.push(Row {
                run: run.clone(),
                cols: match (r.columns, r.error) {
                    (Some(c), _) => Ok(c),
                    (None, e) => Err(e.unwrap_or_else(|| "no row".into())),
                },
            }),
            None => missing.push(run),
        }
    }
    let Some(first) = missing.first() else {
        return Ok(out);
    };
    let err = logs.join(format!("{}.err", first.index));
    let tail = std::fs::read_to_string(&err).unwrap_or_default();
    let tail: Vec<&str> = tail.lines().rev().take(10).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    let point: Vec<String> = first
        .point
        .iter()
        .map(|(k, v)| format!("{k} = {}", label(v)))
        .collect();
    Err(LabError::Internal(format!(
        "{} of {} array tasks of Slurm job {id} left no row; the first, task {} (run {}, \
         seed {}{}{}), wrote to {}:\n{}",
        missing.len(),
        s.runs.len(),
        first.index,
        first.name(),
        first.seed,
        if point.is_empty() { "" } else { ", " },
        point.join(", "),
        err.display(),
        if tail.is_empty() {
            "(nothing)".to_owned()
        } else {
            tail.join("\n")
        }
    )))
}
