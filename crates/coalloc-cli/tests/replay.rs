//! `coalloc replay` on a shipped trace: metrics, the schedule file, bad arguments.

mod common;
use common::repo;
use std::path::PathBuf;
use std::process::Command;

#[test]
fn replay_writes_metrics_and_a_schedule() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("replay");
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("schedule.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_coalloc"))
        .args(["replay", "traces/KTH-SP2-1996-2.1-cln.swf.gz", "--sites"])
        .arg("examples/sites-kth-sp2.toml")
        .args([
            "--policy",
            "fcfs",
            "--first",
            "1000",
            "--json",
            "--schedule",
        ])
        .arg(&csv)
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["policy"], "fcfs");
    assert_eq!(v["jobs"], 1000);
    assert_eq!(v["completed"], 1000);
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "job_id,submit,start,end");
    assert_eq!(lines.len(), 1001);
    // Every job ends after it starts and starts after it was submitted.
    for l in &lines[1..] {
        let f: Vec<i64> = l.split(',').map(|x| x.parse().unwrap()).collect();
        assert!(f[1] <= f[2] && f[2] <= f[3], "{l}");
    }
}

#[test]
fn an_unknown_policy_is_bad_input() {
    let out = Command::new(env!("CARGO_BIN_EXE_coalloc"))
        .args([
            "replay",
            "traces/lublin_256.swf.gz",
            "--sites",
            "examples/sites-kth-sp2.toml",
        ])
        .args(["--policy", "lottery"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: --policy: unknown queue policy `lottery`"),
        "{err}"
    );
}

/// Issue 22: a site file with a cloud site (provisioned On-Demand, the default) stopped the
/// replay with "internal: the scheduler stopped with N job(s) still waiting and nothing left
/// to happen" (the cloud's VM leases were never answered). It now runs on the engine.
#[test]
fn a_site_file_with_a_cloud_site_replays() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("replay-cloud");
    std::fs::create_dir_all(&dir).unwrap();
    let sites = dir.join("sites.toml");
    std::fs::write(
        &sites,
        "[[site]]\nname = \"kth\"\nprocessors = 32\n\n[[site]]\nname = \"ec2\"\nkind = \"cloud\"\n\
         cloud = { vm_processors = 8, min_vms = 0, max_vms = 8, lease_latency = \"1m\", \
         price_per_vm_hour = 0.065 }\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_coalloc"))
        .args(["replay", "traces/KTH-SP2-1996-2.1-cln.swf.gz", "--sites"])
        .arg(&sites)
        .args(["--first", "300", "--json"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["jobs"], 300);
    // Jobs of more than 64 processors fit no site; every other job completes.
    let (completed, refused) = (
        v["completed"].as_u64().unwrap(),
        v["refused"].as_u64().unwrap(),
    );
    assert_eq!(completed + refused, 300);
    assert!(completed > 280, "{v}");
}
