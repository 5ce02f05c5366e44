//! `coalloc trace stats` on the shipped traces: the table, `--json`, the filters, and bad
//! files. The figures are the ones `crates/coalloc-sim/tests/swf_traces.rs` checks (and says
//! how they were cross-checked).

mod common;
use common::{coalloc, stdout};
use std::path::PathBuf;
use std::process::Command;

const KTH: &str = "traces/KTH-SP2-1996-2.1-cln.swf.gz";
const LUBLIN: &str = "traces/lublin_256.swf.gz";

#[test]
fn table_for_kth_sp2_at_most_32_processors() {
    let out = stdout(&coalloc(&["trace", "stats", KTH, "--max-procs", "32"]));
    assert_eq!(
        out,
        "\
trace: traces/KTH-SP2-1996-2.1-cln.swf.gz
filter: at most 32 processors

jobs                              count  % of known run time
read                              28476
skipped: unknown submit time      0
skipped: unknown run time         0
skipped: unknown processors       1
dropped: more than 32 processors  1158
kept                              27317  95.93

count (%)       mean [min]  25% [min]  50% [min]  75% [min]  99% [min]
27317 (95.93%)  149.14      0.55       13.92      164.32     1314.55
percentiles: nearest rank
"
    );
}

#[test]
fn table_for_all_of_lublin_256() {
    let out = stdout(&coalloc(&["trace", "stats", LUBLIN]));
    assert!(
        out.contains("\nread                          10000\n"),
        "{out}"
    );
    assert!(!out.contains("dropped"), "{out}");
    assert!(
        out.contains("10000 (100.00%)  81.05       0.35       2.28       137.83     602.30\n"),
        "{out}"
    );
}

#[test]
fn json_for_kth_sp2() {
    let out = stdout(&coalloc(&["trace", "stats", KTH, "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["file"], KTH);
    assert_eq!(v["filter"]["max_procs"], serde_json::Value::Null);
    assert_eq!(v["header"]["max_records"], 28_476);
    assert_eq!(v["header"]["max_procs"], 100);
    let jobs = &v["jobs"];
    assert_eq!(jobs["read"], 28_476);
    assert_eq!(jobs["kept"], 28_475);
    assert_eq!(jobs["known_run_time"], 28_476);
    assert_eq!(jobs["skipped"]["unknown_run_time"], 0);
    assert_eq!(jobs["skipped"]["unknown_processors"], 1);
    assert_eq!(jobs["dropped"]["too_many_processors"], 0);
    let rt = &v["run_time"];
    assert_eq!(rt["percentile_method"], "nearest-rank");
    assert_eq!(rt["jobs"], 28_475);
    let s = &rt["seconds"];
    assert_eq!(
        [&s["p25"], &s["p50"], &s["p75"], &s["p99"]],
        [35, 847, 9806, 77_454]
    );
    let mean = s["mean"].as_f64().unwrap();
    assert!((mean - 8_872.164_143_985_952).abs() < 1e-9, "{mean}");
    let m = &rt["minutes"];
    assert!((m["mean"].as_f64().unwrap() - 147.869_402_399_765_87).abs() < 1e-9);
    assert!((m["p99"].as_f64().unwrap() - 77_454.0 / 60.0).abs() < 1e-12);
}

#[test]
fn json_with_first_and_max_procs() {
    let out = stdout(&coalloc(&[
        "trace",
        "stats",
        "--first",
        "1000",
        "--max-procs",
        "32",
        KTH,
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["filter"]["first"], 1000);
    assert_eq!(v["filter"]["max_procs"], 32);
    assert_eq!(v["jobs"]["read"], 1000);
    assert_eq!(v["jobs"]["dropped"]["too_many_processors"], 67);
    assert_eq!(v["jobs"]["kept"], 933);
    assert_eq!(v["jobs"]["kept_percent"], 93.3);
    let s = &v["run_time"]["seconds"];
    assert_eq!(
        [&s["p25"], &s["p50"], &s["p75"], &s["p99"]],
        [16, 32, 825, 53_327]
    );
}

#[test]
fn no_jobs_kept() {
    let out = stdout(&coalloc(&["trace", "stats", LUBLIN, "--first", "0"]));
    assert!(out.ends_with("run time: no jobs kept\n"), "{out}");
    let out = stdout(&coalloc(&[
        "trace", "stats", LUBLIN, "--first", "0", "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["run_time"], serde_json::Value::Null);
    assert_eq!(v["jobs"]["kept_percent"], serde_json::Value::Null);
}

#[test]
fn bad_files_exit_2_with_file_line_and_column() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace_bad");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cases: &[(&str, &[u8], &str)] = &[
        (
            "short.swf",
            b"; Version: 2\n1 0 10 100 4 -1 -1 4 600 -1 1 1 1 -1 -1 -1 -1\n",
            "short.swf:2:46: expected 18 fields, found 17",
        ),
        (
            "number.swf",
            b"1 0 10 1O0 4 -1 -1 4 600 -1 1 1 1 -1 -1 -1 -1 -1\n",
            "number.swf:1:8: field 4 (run time): `1O0` is not a whole number",
        ),
        (
            "garbage.swf.gz",
            b"\x1f\x8bgarbage, not a gzip stream",
            "garbage.swf.gz: not a valid gzip file: invalid gzip header",
        ),
        (
            "missing.swf",
            b"",
            "missing.swf: cannot read: No such file or directory (os error 2)",
        ),
    ];
    for (name, content, expected) in cases {
        if *name != "missing.swf" {
            std::fs::write(dir.join(name), content).unwrap();
        }
        let out = Command::new(env!("CARGO_BIN_EXE_coalloc"))
            .args(["trace", "stats", name])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("error: {expected}\n"),
            "{name}"
        );
        assert!(out.stdout.is_empty(), "{name}");
    }
}

#[test]
fn help_defines_the_percentile_method() {
    let out = stdout(&coalloc(&["trace", "stats", "--help"]));
    assert!(out.contains("nearest-rank"), "{out}");
    assert!(out.contains("--max-procs <N>"), "{out}");
    assert!(out.contains("--first <N>"), "{out}");
}
