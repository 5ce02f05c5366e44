//! `coalloc whatif` (issue 22 item 4) on a real server's history: a small workload runs on
//! three local clusters, the server stops, and the replay under the server's own
//! configuration reproduces every job's wait and response within the stated tolerance
//! (1 s + 10% of the observed response); under FPFS the same history gives another valid
//! schedule, in which the small job that FCFS held behind a blocked large one goes first.
//! Cancelled and failed jobs are replayed (a cancel at the same time after submission, a
//! program failure after the observed run time), and a TAGS policy takes its chains and
//! limits from flags, or is refused naming what it lacks.

mod common;

use coalloc_testkit::server::{barrier_component, job, three_clusters, wait_site, Server};
use common::COALLOC;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

fn whatif(dir: &std::path::Path, extra: &[&str]) -> Value {
    let out = Command::new(COALLOC)
        .args(["whatif", "--json", "--state-dir"])
        .arg(dir)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "whatif {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn by_job(r: &Value, id: u64) -> &Value {
    r["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == id)
        .unwrap_or_else(|| panic!("job {id} not replayed: {r}"))
}

#[test]
fn the_servers_own_configuration_reproduces_its_history_and_fpfs_reorders_it() {
    let mut s = Server::start(
        COALLOC,
        "whatif",
        &three_clusters([4, 4, 4], "policy = \"fcfs\"\nfit = \"worst\""),
    );
    // J1 holds one cluster for 3 s; J2 needs all three and waits for it; under FCFS J3 (one
    // cluster) waits behind J2, under FPFS it goes at once.
    let j1 = s.submit(&job(vec![barrier_component(COALLOC, 4, "", "sleep 3")]));
    let j2 = s.submit(&job((0..3)
        .map(|_| barrier_component(COALLOC, 4, "", "sleep 1"))
        .collect()));
    let j3 = s.submit(&job(vec![barrier_component(COALLOC, 4, "", "sleep 1")]));
    for id in [j1, j2, j3] {
        let j = s.wait_ended(id, 60);
        assert_eq!(j["state"], "finished", "{j}");
    }
    assert!(
        s.terminate(Duration::from_secs(20)),
        "the server did not stop"
    );

    let same = whatif(&s.dir, &[]);
    assert_eq!(same["jobs_replayed"], 3, "{same}");
    assert_eq!(same["within_tolerance"], 3, "{same:#}");
    for id in [j1, j2, j3] {
        let j = by_job(&same, id);
        assert_eq!(j["replayed_fate"], "finished", "{j}");
        let obs = &j["happened"];
        let sim = &j["would_have"];
        eprintln!("job {id}: happened {obs}, replayed {sim}");
        let tol = 1.0 + 0.1 * obs["response_s"].as_f64().unwrap();
        for k in ["wait_s", "response_s"] {
            let (a, b) = (obs[k].as_f64().unwrap(), sim[k].as_f64().unwrap());
            assert!(
                (a - b).abs() <= tol,
                "job {id} {k}: happened {a}, replayed {b}"
            );
        }
    }
    // FCFS held J3 behind J2: it waited for J1 and J2 (about 4 s).
    let w3 = by_job(&same, j3)["would_have"]["wait_s"].as_f64().unwrap();
    assert!(w3 >= 3.5, "J3 under FCFS waited {w3} s");

    let fpfs = whatif(&s.dir, &["--policy", "fpfs", "--fit", "best"]);
    assert_eq!(fpfs["jobs_replayed"], 3, "{fpfs}");
    for id in [j1, j2, j3] {
        let j = by_job(&fpfs, id);
        assert_eq!(j["replayed_fate"], "finished", "{j}");
        let w = j["would_have"]["wait_s"].as_f64().unwrap();
        let r = j["would_have"]["response_s"].as_f64().unwrap();
        assert!(w >= 0.0 && r > w, "job {id}: wait {w}, response {r}");
    }
    let w3 = by_job(&fpfs, j3)["would_have"]["wait_s"].as_f64().unwrap();
    assert!(w3 < 1.0, "J3 under FPFS waited {w3} s");
    // J2 needs every processor: under FPFS it waits for J3 as well as J1, still after both.
    let w2 = by_job(&fpfs, j2)["would_have"]["wait_s"].as_f64().unwrap();
    assert!(w2 >= 2.5, "J2 under FPFS waited {w2} s");
    for site in fpfs["sites"].as_array().unwrap() {
        let u = site["would_have_utilization"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&u), "{site}");
    }
    assert!(s.dir.join("whatif/wait.svg").exists());
}

#[test]
fn the_other_users_load_a_site_reported_is_replayed() {
    // One cluster of 6 slots, 2 of them held by other users: two 4-slot jobs cannot run
    // together, so the second waits for the first. A replay without the other users' load
    // would run both at once.
    let config = "[server]\nmonitor_interval = \"50ms\"\nsample_interval = \"200ms\"\n\
        [[site]]\nname = \"alpha\"\nprocessors = 6\nmanager = { type = \"local\", background = 2 }\n\
        [scheduler]\npolicy = \"fcfs\"\n";
    let mut s = Server::start(COALLOC, "whatif-bg", config);
    wait_site(&s, "alpha", 20, "loaded by others", |v| v["other"] == 2);
    let j1 = s.submit(&job(vec![barrier_component(COALLOC, 4, "", "sleep 2")]));
    let j2 = s.submit(&job(vec![barrier_component(COALLOC, 4, "", "sleep 1")]));
    for id in [j1, j2] {
        let j = s.wait_ended(id, 60);
        assert_eq!(j["state"], "finished", "{j}");
    }
    assert!(
        s.terminate(Duration::from_secs(20)),
        "the server did not stop"
    );
    let r = whatif(&s.dir, &[]);
    assert!(r["background_local_jobs"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(r["within_tolerance"], 2, "{r:#}");
    let w2 = by_job(&r, j2)["would_have"]["wait_s"].as_f64().unwrap();
    assert!(
        w2 >= 1.5,
        "J2 was replayed without the other users' load: wait {w2} s"
    );
}

#[test]
fn a_state_directory_without_a_journal_or_a_bad_policy_is_refused_with_a_message() {
    let dir = std::env::temp_dir().join(format!("coalloc-whatif-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |extra: &[&str]| {
        let out = Command::new(COALLOC)
            .args(["whatif", "--state-dir"])
            .arg(&dir)
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, err) = run(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("no journal at")
            && err.contains("run a server with this state directory first"),
        "{err}"
    );
    let (code, err) = run(&["--policy", "lottery"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown queue policy `lottery`"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cancelled_and_failed_jobs_are_replayed_as_they_happened() {
    let mut s = Server::start(
        COALLOC,
        "whatif-fates",
        &three_clusters(
            [4, 4, 4],
            "policy = \"fcfs\"\nfit = \"worst\"\nmax_completion_failures = 0",
        ),
    );
    // J1 holds every cluster for 3 s. J2 queues behind it and is cancelled there after
    // about 1 s. J3's program fails 1 s after its barrier; J4 finishes.
    let j1 = s.submit(&job((0..3)
        .map(|_| barrier_component(COALLOC, 4, "", "sleep 3"))
        .collect()));
    let j2 = s.submit(&job(vec![barrier_component(COALLOC, 4, "", "sleep 5")]));
    let j3 = s.submit(&job(vec![barrier_component(
        COALLOC,
        4,
        "",
        "sleep 1; exit 3",
    )]));
    let j4 = s.submit(&job(vec![barrier_component(COALLOC, 4, "", "sleep 1")]));
    std::thread::sleep(Duration::from_millis(1000));
    let (code, v) = s.call("DELETE", &format!("/v1/jobs/{j2}"), &s.token, None);
    assert_eq!(code, 200, "{v}");
    for (id, state) in [
        (j1, "finished"),
        (j2, "failed"),
        (j3, "failed"),
        (j4, "finished"),
    ] {
        let j = s.wait_ended(id, 60);
        assert_eq!(j["state"], state, "{j}");
    }
    assert!(
        s.terminate(Duration::from_secs(20)),
        "the server did not stop"
    );

    let r = whatif(&s.dir, &[]);
    assert_eq!(r["jobs_replayed"], 4, "{r:#}");
    assert_eq!(r["jobs_not_replayed"], 0, "{r:#}");
    let by = &r["replayed_by_history"];
    assert_eq!(
        (
            &by["finished"],
            &by["cancelled"],
            &by["failed running"],
            &by["failed before running"]
        ),
        (&json!(2), &json!(1), &json!(1), &json!(0)),
        "{r:#}"
    );
    assert_eq!(r["within_tolerance"], 4, "{r:#}");
    let c = by_job(&r, j2);
    assert_eq!(c["history"], "cancelled", "{c}");
    assert_eq!(c["replayed_fate"], "failed: cancelled", "{c}");
    assert!(
        c["happened"]["wait_s"].is_null() && c["would_have"]["wait_s"].is_null(),
        "{c}"
    );
    let (a, b) = (
        c["happened"]["response_s"].as_f64().unwrap(),
        c["would_have"]["response_s"].as_f64().unwrap(),
    );
    assert!(
        (0.9..2.5).contains(&a) && (a - b).abs() < 0.01,
        "cancel at {a} s, replayed {b} s"
    );
    let f = by_job(&r, j3);
    assert_eq!(f["history"], "failed running", "{f}");
    let fate = f["replayed_fate"].as_str().unwrap();
    assert!(
        fate.starts_with("failed: ") && fate.contains("its program failed"),
        "{f}"
    );
    for k in ["wait_s", "response_s"] {
        let (a, b) = (
            f["happened"][k].as_f64().unwrap(),
            f["would_have"][k].as_f64().unwrap(),
        );
        assert!(
            (a - b).abs() <= 1.0 + 0.1 * a,
            "J3 {k}: happened {a}, replayed {b}"
        );
    }
    // J3 waited for J1 (3 s) and ran 1 s before failing.
    let resp = f["happened"]["response_s"].as_f64().unwrap();
    assert!(resp >= 3.5, "{f}");
    // The means compare only the two jobs that finished.
    let mean = r["happened"]["mean_response_s"].as_f64().unwrap();
    let (r1, r4) = (
        by_job(&r, j1)["happened"]["response_s"].as_f64().unwrap(),
        by_job(&r, j4)["happened"]["response_s"].as_f64().unwrap(),
    );
    assert!((mean - (r1 + r4) / 2.0).abs() < 1e-9, "{r:#}");
    // The text says how each kind was treated.
    let text = s.cli_ok(&["whatif"]);
    for line in [
        "replayed 4 job(s) of 4 under",
        "2 finished: each runs for its observed net run time",
        "1 cancelled: each cancelled the same time after its submission",
        "1 failed after running: each fails, as its own program, after its observed net run time",
        "0 failed before running",
        "0 not replayed",
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }

    // TAGS-chain needs chains and limits: refused naming them, then given by flags.
    let out = s.cli(&["whatif", "--policy", "tags-chain"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--policy tags-chain needs settings that")
            && err.contains("its chains of sites (--tags-chains")
            && err.contains("its runtime limits (--tags-limits"),
        "{err}"
    );
    let t = whatif(
        &s.dir,
        &[
            "--policy",
            "tags-chain",
            "--tags-chains",
            "alpha,beta",
            "--tags-limits",
            "1h",
        ],
    );
    assert_eq!(t["jobs_replayed"], 4, "{t:#}");
    // The cancel is replayed under TAGS-chain as well, at the same time.
    let c = by_job(&t, j2);
    assert_eq!(c["replayed_fate"], "failed: cancelled", "{c}");
    assert_eq!(
        c["would_have"]["response_s"],
        by_job(&r, j2)["would_have"]["response_s"]
    );
}
