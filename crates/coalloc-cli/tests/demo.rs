//! `coalloc demo` end to end (README set-up command 1, smaller): every job finishes, the job
//! with the injected failure survives it, and the report's plots have data with a shape.

use coalloc_testkit::tools::temp_dir;
use std::collections::BTreeSet;

/// The points of one series of a plot's CSV (`series,x,y`).
fn points(csv: &str, series: &str) -> Vec<(f64, f64)> {
    csv.lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split(',');
            (f.next()? == series).then_some(())?;
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .collect()
}

#[test]
fn the_demo_finishes_every_job_survives_its_injected_failure_and_plots_data() {
    let dir = temp_dir("demo");
    let state = dir.join("state");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_coalloc"))
        .args(["demo", "--batch", "3", "--n", "24", "--state-dir"])
        .arg(&state)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("(flaky) finished after an aborted start"),
        "{text}"
    );
    // The result log tells the abort with its class and reason.
    let results = std::fs::read_to_string(state.join("logs/result.jsonl")).unwrap();
    let flaky: serde_json::Value = results
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["name"] == "flaky")
        .unwrap();
    assert_eq!(flaky["outcome"], "finished", "{flaky}");
    assert_eq!(flaky["aborts"][0]["class"], "before_commit", "{flaky}");
    assert!(flaky["placement_ms"].as_i64().is_some(), "{flaky}");
    // Each site's plot: many readings over the run, and coalloc's load rises and falls.
    for site in ["alpha", "beta", "gamma"] {
        let csv = std::fs::read_to_string(state.join(format!("report/site-{site}.csv"))).unwrap();
        let coalloc = points(&csv, "coalloc");
        let xs: BTreeSet<u64> = coalloc.iter().map(|p| (p.0 * 1000.0) as u64).collect();
        let ys: BTreeSet<u64> = coalloc.iter().map(|p| p.1 as u64).collect();
        assert!(xs.len() >= 5, "{site}: {coalloc:?}");
        assert!(
            ys.len() >= 2 && ys.iter().any(|y| *y > 0),
            "{site}: {coalloc:?}"
        );
        let span = coalloc.last().unwrap().0 - coalloc.first().unwrap().0;
        assert!(span >= 3.0, "{site}: {span} s: {coalloc:?}");
    }
    let csv = std::fs::read_to_string(state.join("report/placement-times.csv")).unwrap();
    assert!(points(&csv, "placement time").len() >= 5, "{csv}");
    let _ = std::fs::remove_dir_all(&dir);
}
