//! Every experiment's regenerate command (`experiments/*/run.sh`, issue 34 item 5) runs as
//! its README writes it, at a reduced size: `bash experiments/seed-NNN/run.sh
//! target/debug/coalloc` from the top of a copy of the repository's experiments (so the
//! binary's path is relative to the caller's directory, not to the script's), with
//! `COALLOC_EXPERIMENT_QUICK=1` (one seed, at most 20 jobs per run, one repetition of the
//! real-server microbenchmarks). Each run must succeed, write its tables into the fresh
//! `results-quick/` and leave the committed `results/` alone; a run that fails leaves the
//! previous results as they were (the committed `results/` too, at full size). Seed 004's runs read the traces of `../shared/traces`
//! (or `$COALLOC_TRACES`); when they are missing those two tests say so and pass, as
//! coalloc-sim's `swf_shared` test does.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Most jobs a quick run gives any run (`COALLOC_EXPERIMENT_JOBS`' default).
const QUICK_JOBS: u64 = 20;

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        // Results (committed or of earlier runs), trace links and caches stay behind.
        if name.starts_with("results")
            || name.starts_with(".results-")
            || name == "traces"
            || name == "__pycache__"
        {
            continue;
        }
        let ty = e.file_type().unwrap();
        if ty.is_dir() {
            copy_tree(&e.path(), &to.join(&name));
        } else if ty.is_file() {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}

/// A copy of the repository's experiments (and the server helper seed 002 imports) with
/// `target/debug/coalloc` linked to the binary under test, and a stand-in for the committed
/// results in every experiment's `results/`.
fn sandbox(name: &str) -> PathBuf {
    let root = coalloc_testkit::tools::temp_dir(&format!("experiments-{name}"));
    let repo = common::repo();
    copy_tree(&repo.join("experiments"), &root.join("experiments"));
    std::fs::create_dir_all(root.join("bench")).unwrap();
    std::fs::copy(
        repo.join("bench/serverlib.py"),
        root.join("bench/serverlib.py"),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("target/debug")).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_coalloc"),
        root.join("target/debug/coalloc"),
    )
    .unwrap();
    for exp in [
        "seed-000",
        "seed-001",
        "seed-002",
        "seed-003",
        "seed-004",
        "seed-004/cloud",
        "reserve",
    ] {
        let results = root.join("experiments").join(exp).join("results");
        std::fs::create_dir_all(&results).unwrap();
        std::fs::write(results.join("committed.txt"), "committed\n").unwrap();
    }
    root
}

/// The shared traces seed 004 reads, if they are on this machine.
fn traces() -> Option<PathBuf> {
    let dir = std::env::var_os("COALLOC_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::repo().join("../shared/traces"));
    dir.join("LCG-2005-1.swf.gz").is_file().then_some(dir)
}

/// `bash experiments/EXP/run.sh BINARY` from the sandbox's top, at the reduced size.
fn run_sh(root: &Path, exp: &str, binary: &str) -> Output {
    run_sh_sized(root, exp, binary, true)
}

/// `bash experiments/EXP/run.sh BINARY` from the sandbox's top, at the reduced size when
/// `quick`, else at full size (into the committed `results/`).
fn run_sh_sized(root: &Path, exp: &str, binary: &str, quick: bool) -> Output {
    let started = std::time::Instant::now();
    let mut cmd = Command::new("bash");
    cmd.arg(format!("experiments/{exp}/run.sh"))
        .arg(binary)
        .current_dir(root)
        .env_remove("COALLOC_EXPERIMENT_QUICK")
        .env_remove("COALLOC_EXPERIMENT_JOBS")
        .env_remove("JOBS");
    if quick {
        cmd.env("COALLOC_EXPERIMENT_QUICK", "1");
    }
    if let Some(t) = traces() {
        cmd.env("COALLOC_TRACES", t);
    }
    let out = cmd.output().unwrap();
    eprintln!(
        "{exp}/run.sh {binary}: exit {:?} in {:.1} s",
        out.status.code(),
        started.elapsed().as_secs_f64()
    );
    out
}

fn must_succeed(out: &Output, exp: &str) {
    assert!(
        out.status.success(),
        "{exp}/run.sh failed ({:?}):\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The rows of a CSV file, as (header, fields).
fn csv_rows(path: &Path) -> Vec<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split(',')
        .map(str::to_owned)
        .collect();
    lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(str::to_owned))
                .collect()
        })
        .collect()
}

/// A quick run succeeded: each `coalloc sim` output folder has its runs (at most
/// [`QUICK_JOBS`] jobs each, at least one), each other file is there and not empty, the
/// committed results are untouched and no unfinished folder is left.
fn check_quick(root: &Path, exp: &str, sims: &[(&str, usize)], files: &[&str]) {
    let dir = root.join("experiments").join(exp);
    let quick = dir.join("results-quick");
    for (sim, runs) in sims {
        let rows = csv_rows(&quick.join(sim).join("runs.csv"));
        assert_eq!(rows.len(), *runs, "{exp}: {sim}/runs.csv");
        for row in &rows {
            let jobs: u64 = row
                .iter()
                .find(|(k, _)| k == "jobs")
                .map(|(_, v)| v.parse().unwrap())
                .unwrap_or_else(|| panic!("{exp}: {sim}/runs.csv has no jobs column"));
            assert!(
                (1..=QUICK_JOBS).contains(&jobs),
                "{exp}: {sim}: a run of {jobs} jobs"
            );
        }
        let summary = quick.join(sim).join("summary.csv");
        assert!(summary.is_file(), "{}", summary.display());
    }
    for f in files {
        let p = quick.join(f);
        let len = std::fs::metadata(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .len();
        assert!(len > 0, "{} is empty", p.display());
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("results/committed.txt")).unwrap(),
        "committed\n",
        "{exp}: the committed results changed"
    );
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".results-"))
        .collect();
    assert!(left.is_empty(), "{exp}: left behind {left:?}");
}

#[test]
fn seed_000_run_sh_works_at_a_reduced_size() {
    let root = sandbox("000");
    must_succeed(
        &run_sh(&root, "seed-000", "target/debug/coalloc"),
        "seed-000",
    );
    check_quick(
        &root,
        "seed-000",
        &[("koala", 5), ("utilization", 1), ("threshold", 9)],
        &[
            "cells.csv",
            "overall.csv",
            "utilization/sites/r000-s1.jsonl",
        ],
    );
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn reserve_run_sh_works_at_a_reduced_size() {
    let root = sandbox("reserve");
    must_succeed(&run_sh(&root, "reserve", "target/debug/coalloc"), "reserve");
    check_quick(&root, "reserve", &[("seed000", 6), ("seed001", 18)], &[]);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn seed_001_run_sh_works_at_a_reduced_size() {
    let root = sandbox("001");
    must_succeed(
        &run_sh(&root, "seed-001", "target/debug/coalloc"),
        "seed-001",
    );
    check_quick(
        &root,
        "seed-001",
        &[
            ("fig1", 10),
            ("lp", 40),
            ("wait", 100),
            ("deadline", 48),
            ("local", 20),
        ],
        &[],
    );
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn seed_002_run_sh_works_at_a_reduced_size() {
    let root = sandbox("002");
    must_succeed(
        &run_sh(&root, "seed-002", "target/debug/coalloc"),
        "seed-002",
    );
    check_quick(
        &root,
        "seed-002",
        &[],
        &["run.txt", "summary.csv", "fits.csv", "fig3_breakdown.csv"],
    );
    // One repetition: 7 jobs of Fig. 2 (1..64 processes), 8 of Fig. 4 (1..25 components).
    let jobs = csv_rows(&root.join("experiments/seed-002/results-quick/jobs.csv"));
    let figure = |f: &str| {
        jobs.iter()
            .filter(|r| r.iter().any(|(k, v)| k == "figure" && v == f))
            .count()
    };
    assert_eq!((figure("fig2"), figure("fig4")), (7, 8));
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn seed_003_run_sh_works_at_a_reduced_size() {
    let root = sandbox("003");
    must_succeed(
        &run_sh(&root, "seed-003", "target/debug/coalloc"),
        "seed-003",
    );
    check_quick(
        &root,
        "seed-003",
        &[("dcs", 6), ("background", 36), ("background-timeline", 6)],
        &["dcs/per_experiment.csv"],
    );
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn seed_004_run_sh_works_at_a_reduced_size() {
    if traces().is_none() {
        eprintln!("skipped: the shared traces are not there (set COALLOC_TRACES)");
        return;
    }
    let root = sandbox("004");
    must_succeed(
        &run_sh(&root, "seed-004", "target/debug/coalloc"),
        "seed-004",
    );
    check_quick(
        &root,
        "seed-004",
        &[("sweep", 637), ("compare", 420)],
        &[
            "table2.csv",
            "best_limits.csv",
            "ranking.csv",
            "tables.md",
            "table2/LCG-2005-1.json",
        ],
    );
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn seed_004_cloud_run_sh_works_at_a_reduced_size() {
    if traces().is_none() {
        eprintln!("skipped: the shared traces are not there (set COALLOC_TRACES)");
        return;
    }
    let root = sandbox("004-cloud");
    let out = run_sh(&root, "seed-004/cloud", "target/debug/coalloc");
    must_succeed(&out, "seed-004/cloud");
    check_quick(
        &root,
        "seed-004/cloud",
        &[("limit", 21), ("policies", 24)],
        &[],
    );
    let _ = std::fs::remove_dir_all(root);
}

/// A run that fails leaves the previous results as they were and says where its partial
/// output is: a full-size run the committed `results/`, a quick one `results-quick/`; the
/// next run that succeeds replaces them. A binary path that is not there is refused before
/// anything is touched.
#[test]
fn a_failed_run_leaves_the_previous_results_and_a_good_one_replaces_them() {
    let root = sandbox("replace");
    let dir = root.join("experiments/seed-003");
    let quick = dir.join("results-quick");
    std::fs::create_dir_all(&quick).unwrap();
    std::fs::write(quick.join("previous.txt"), "previous\n").unwrap();
    // A "binary" that runs but fails, as a broken build would.
    let broken = root.join("target/debug/broken");
    std::fs::write(&broken, "#!/bin/sh\necho broken >&2\nexit 3\n").unwrap();
    std::fs::set_permissions(&broken, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // At full size, the run that would replace the committed results/: they stay as they
    // were, nothing of the run among them.
    let committed = dir.join("results");
    let out = run_sh_sized(&root, "seed-003", "target/debug/broken", false);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("stopped (exit status 3): experiments/seed-003/results is as it was; this run's partial output is in experiments/seed-003/.results-new."),
        "{err}"
    );
    let left: Vec<String> = std::fs::read_dir(&committed)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, vec!["committed.txt".to_string()]);
    assert_eq!(
        std::fs::read_to_string(committed.join("committed.txt")).unwrap(),
        "committed\n"
    );
    assert!(quick.join("previous.txt").is_file());
    let out = run_sh(&root, "seed-003", "target/debug/broken");
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("stopped (exit status 3): experiments/seed-003/results-quick is as it was; this run's partial output is in experiments/seed-003/.results-new."),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(quick.join("previous.txt")).unwrap(),
        "previous\n"
    );
    // A path that is not there: refused at once, naming it (absolute, against the caller's
    // directory).
    let out = run_sh(&root, "seed-003", "target/release/coalloc");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "{}: no such executable file",
        root.join("target/release/coalloc").display()
    );
    assert!(err.contains(&want), "{err}");
    assert!(quick.join("previous.txt").is_file());
    // A good run replaces them.
    must_succeed(
        &run_sh(&root, "seed-003", "target/debug/coalloc"),
        "seed-003",
    );
    assert!(!quick.join("previous.txt").exists());
    assert_eq!(csv_rows(&quick.join("dcs/runs.csv")).len(), 6);
    assert_eq!(
        std::fs::read_to_string(committed.join("committed.txt")).unwrap(),
        "committed\n"
    );
    let _ = std::fs::remove_dir_all(root);
}
