//! `coalloc sim`: a small parameter study end to end (CSV rows, plots, determinism), the
//! committed experiment files, and bad experiment files.

mod common;
use common::{coalloc, repo, stdout};
use std::path::{Path, PathBuf};

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
