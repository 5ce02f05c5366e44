//! `coalloc sim`: a small parameter study end to end (CSV rows, plots, determinism), the
//! committed experiment files, and bad experiment files; the same study as a Slurm job
//! array on the rig of scripts/slurm/ (skipped unless `COALLOC_SLURM_RIG` names it:
//! `COALLOC_SLURM_RIG=/tmp/coalloc-slurm cargo test -p coalloc-cli --test sim`).

mod common;
use coalloc_testkit::rig::slurm::Scenario;
use common::{coalloc, repo, stdout};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SMALL: &str = r#"
name = "small"
seeds = 2
output = "out"

[[site]]
name = "a"
processors = 32
[[site]]
name = "b"
processors = 32

[scheduler]
policy = "rpp"
fit = "worst-plain"
[scheduler.rpp]
lp = 0.7
ignore = "10s"

[workload]
kind = "seed001"
jobs = 100
arrival_rate = 0.004

[workload.local]
load = 0.3

[sim]
start_latency = "1s"
sample_interval = "10m"

[[subset]]
name = "big"
size = [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 64]

[[grid]]
key = "workload.arrival_rate"
name = "lambda_g"
values = [0.002, 0.006]

[[plot]]
file = "success"
x = "lambda_g"
y = ["success_rate", "big.success_rate"]
scale = 100
"#;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("coalloc-sim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, text: &str) -> String {
    let p = dir.join("exp.toml");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn a_small_study_writes_one_row_per_run_and_its_plots_deterministically() {
    let dir = temp_dir("small");
    let file = write(&dir, SMALL);
    let out = stdout(&coalloc(&["sim", &file, "-q"]));
    assert!(out.contains("4 runs (0 failed)"), "{out}");
    let runs = std::fs::read_to_string(dir.join("out/runs.csv")).unwrap();
    let lines: Vec<&str> = runs.lines().collect();
    assert_eq!(lines.len(), 5, "{runs}");
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(&header[..3], &["run", "seed", "lambda_g"]);
    for col in [
        "success_rate",
        "total_load",
        "local_kill_rate",
        "mean_bounded_slowdown",
        "big.success_rate",
    ] {
        assert!(header.contains(&col), "no column {col}");
    }
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    for row in &lines[1..] {
        let cells: Vec<&str> = row.split(',').collect();
        let jobs: usize = cells[col("jobs")].parse().unwrap();
        let done: usize = cells[col("finished")].parse().unwrap();
        let failed: usize = cells[col("failed")].parse().unwrap();
        assert_eq!(jobs, 100);
        assert_eq!(done + failed, 100, "every job ends: {row}");
        let rate: f64 = cells[col("success_rate")].parse().unwrap();
        assert!((0.5..=1.0).contains(&rate), "{row}");
    }
    let summary = std::fs::read_to_string(dir.join("out/summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 3);
    for f in ["success.svg", "success.png"] {
        assert!(std::fs::metadata(dir.join("out").join(f)).unwrap().len() > 1000);
    }
    let samples = std::fs::read_dir(dir.join("out/sites")).unwrap().count();
    assert_eq!(samples, 4);
    // The same file gives the same numbers, whatever the number of threads.
    let again = temp_dir("small-again");
    let file2 = write(&again, SMALL);
    stdout(&coalloc(&["sim", &file2, "-q", "-j", "1"]));
    assert_eq!(
        std::fs::read_to_string(again.join("out/runs.csv")).unwrap(),
        runs
    );
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::remove_dir_all(again).unwrap();
}

#[test]
fn json_summary_and_dry_run() {
    let dir = temp_dir("json");
    let file = write(&dir, SMALL);
    let dry = stdout(&coalloc(&["sim", &file, "--dry-run"]));
    assert_eq!(dry.lines().count(), 4);
    assert!(dry.contains("r000-s1  seed 1  lambda_g=0.002"), "{dry}");
    let out = stdout(&coalloc(&["sim", &file, "--json", "--seeds", "1"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let points = v.as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[0]["lambda_g"], "0.002");
    assert_eq!(points[0]["seeds"], 1);
    assert!(points[0]["success_rate"].as_f64().unwrap() > 0.5);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_committed_seed_001_experiments_are_valid() {
    let dir = repo().join("experiments/seed-001");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "toml") {
            let out = stdout(&coalloc(&["sim", p.to_str().unwrap(), "--dry-run"]));
            assert!(out.lines().count() >= 50, "{}", p.display());
            n += 1;
        }
    }
    assert_eq!(n, 5);
}

#[test]
fn bad_experiment_files_are_refused_with_the_reason() {
    let dir = temp_dir("bad");
    let cases: &[(&str, &str, &str)] = &[
        (
            "kind = \"seed001\"",
            "kind = \"nope\"",
            "workload.kind: \"nope\" is not one of",
        ),
        (
            "jobs = 100",
            "jobs = 100\nbatch = \"ordered\"",
            "`batch` does not apply to kind \"seed001\"",
        ),
        (
            "values = [0.002, 0.006]",
            "values = []",
            "grid `workload.arrival_rate`: no values",
        ),
        (
            "y = [\"success_rate\", \"big.success_rate\"]",
            "y = [\"speed\"]",
            "y: no metric \"speed\"",
        ),
        (
            "y = [\"success_rate\", \"big.success_rate\"]",
            "y = [\"tiny.success_rate\"]",
            "names no [[subset]] \"tiny\"",
        ),
        (
            "x = \"lambda_g\"",
            "x = \"lp\"",
            "x = \"lp\" is not a grid axis",
        ),
        (
            "start_latency = \"1s\"",
            "start_latency = \"soon\"",
            "sim.start_latency",
        ),
        (
            "start_latency = \"1s\"",
            "start_failure = 1.5",
            "must be a probability",
        ),
        ("lp = 0.7", "lp = 0.7\nbogus = 1", "bogus"),
        (
            "seeds = 2",
            "seeds = 2\ncolour = \"red\"",
            "unknown field `colour`",
        ),
    ];
    for (from, to, want) in cases {
        assert!(SMALL.contains(from), "{from}");
        let file = write(&dir, &SMALL.replacen(from, to, 1));
        let out = coalloc(&["sim", &file, "-q"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{to}: {err}");
        assert!(err.contains(want), "{to}: {err}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// `coalloc ARGS...` with `SLURM_CONF` (and `PATH`, when given) set.
fn coalloc_env(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_coalloc"));
    c.args(args).current_dir(repo());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// Every file of `dir` (recursively, but not the Slurm bookkeeping), by relative path.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != ".slurm") {
                    todo.push(p);
                }
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_path_buf();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_study_on_slurm_writes_the_same_files_as_a_local_run() {
    let Some(scn) = Scenario::begin("sim on slurm") else {
        return;
    };
    let conf = scn.rig.clusters[0].conf.clone();
    let dir = temp_dir("slurm-same");
    let file = write(
        &dir,
        &SMALL.replace("output = \"out\"", "output = \"out\"\njobs_jsonl = true"),
    );
    let (local, slurm) = (dir.join("local"), dir.join("slurm"));
    let l = stdout(&coalloc(&[
        "sim",
        &file,
        "-q",
        "--out",
        local.to_str().unwrap(),
    ]));
    assert!(l.contains("4 runs (0 failed) on "), "{l}");
    let out = coalloc_env(
        &["sim", &file, "--slurm", "--out", slurm.to_str().unwrap()],
        &[("SLURM_CONF", &conf)],
    );
    let s = stdout(&out);
    assert!(s.contains("4 runs (0 failed) as Slurm array job "), "{s}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("submitted 4 runs as Slurm array job"), "{err}");
    // The same numbers: runs.csv, summary.csv, every per-job and load log, the plots.
    let (a, b) = (files(&local), files(&slurm));
    let names: Vec<String> = a.iter().map(|(p, _)| p.display().to_string()).collect();
    assert_eq!(names.len(), 12, "{names:?}");
    for f in [
        "runs.csv",
        "summary.csv",
        "jobs/r003-s2.jsonl",
        "sites/r000-s1.jsonl",
    ] {
        assert!(names.contains(&f.to_owned()), "{f} missing: {names:?}");
    }
    assert_eq!(
        b.iter().map(|(p, _)| p).collect::<Vec<_>>(),
        a.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    for ((p, x), (_, y)) in a.iter().zip(&b) {
        assert!(
            x == y,
            "{} differs between the local and the Slurm run",
            p.display()
        );
    }
    let text = std::fs::read_to_string(local.join("runs.csv")).unwrap();
    let rows: Vec<&str> = text
        .lines()
        .map(|l| l.split(',').next().unwrap_or_default())
        .collect();
    assert_eq!(
        rows,
        ["run", "r000-s1", "r001-s2", "r002-s1", "r003-s2"],
        "{text}"
    );
    drop(scn);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_failed_array_task_names_its_grid_point_and_stderr() {
    let Some(scn) = Scenario::begin("sim on slurm, a task fails") else {
        return;
    };
    let conf = scn.rig.clusters[0].conf.display().to_string();
    let dir = temp_dir("slurm-fail");
    // Task 2 (lambda_g = 0.006, seed 1) fails before running coalloc; a [cluster] table
    // sends the runs to Slurm without --slurm.
    let table = format!(
        r#"
[cluster]
slurm_conf = "{conf}"
poll = "200ms"
task_prefix = ["sh", "-c", 'if [ "$SLURM_ARRAY_TASK_ID" = 2 ]; then echo boom >&2; exit 3; fi; exec "$@"', "sh"]
"#
    );
    let file = write(&dir, &format!("{SMALL}{table}"));
    let out = coalloc(&["sim", &file, "-q"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("1 of 4 array tasks of Slurm job ")
            && err.contains("the first, task 2 (run r002-s1, seed 1, lambda_g = 0.006)")
            && err.trim_end().ends_with("boom"),
        "{err}"
    );
    // --local overrides the table.
    let l = stdout(&coalloc(&["sim", &file, "-q", "--local"]));
    assert!(l.contains("4 runs (0 failed) on "), "{l}");
    drop(scn);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn slurm_without_sbatch_is_a_friendly_error() {
    let dir = temp_dir("no-sbatch");
    let file = write(&dir, SMALL);
    let out = coalloc_env(
        &["sim", &file, "--slurm"],
        &[("PATH", Path::new("/nonexistent"))],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot run sbatch: not found on PATH") && err.contains("--local"),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
