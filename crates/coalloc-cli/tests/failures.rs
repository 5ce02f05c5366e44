//! End to end with real processes, the failures a real grid throws (issue 20): a component
//! that never checks in is aborted at the barrier timeout and its job tried again after a
//! growing back-off.

mod common;

use coalloc_testkit::server::{barrier_component, job, processes_with, three_clusters, Server};
use common::COALLOC;
use serde_json::json;
use std::time::{Duration, Instant};

/// `coalloc ARGS --state-dir` of server `s`; its standard output, after checking it
/// succeeded.
fn cli(s: &Server, args: &[&str]) -> String {
    let out = std::process::Command::new(COALLOC)
        .args(args)
        .args(["--state-dir", s.dir.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {text} {err}");
    text
}

/// A job with one component that checks in and one that starts and stays silent (a program
/// that speaks neither the barrier nor PMI): every try is aborted at the job's 1 s barrier
/// timeout, the tries are spaced by a back-off that doubles (1 s, then 2 s), and after its
/// limit the job fails with the reason, nothing left running.
#[test]
fn a_silent_component_is_aborted_at_the_barrier_timeout_and_retried_with_growing_waits() {
    let s = Server::start(
        COALLOC,
        "barrier-timeout",
        &three_clusters(
            [4, 4, 4],
            "policy = \"fcfs\"\nmax_submit_failures = 2\nretry_backoff = \"1s\"\nretry_backoff_max = \"10s\"",
        ),
    );
    let silent =
        json!({ "count": 2, "executable": "/bin/sh", "arguments": ["-c", "exec sleep 3023"] });
    let mut spec = job(vec![barrier_component(COALLOC, 2, "", "sleep 30"), silent]);
    spec["barrier_timeout"] = json!("1s");
    let id = s.submit(&spec);
    // The start of each try, as the job's placement time shows it.
    let mut placed: Vec<i64> = Vec::new();
    // Each back-off's end (`retry_at`) and the wall clock when its answer was in, which is
    // no earlier than its abort: `retry_at - seen` is at most that back-off.
    let mut retries: Vec<(i64, i64)> = Vec::new();
    let wall_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    };
    let t = Instant::now();
    let j = loop {
        let j = s.job(id);
        let answered = wall_ms();
        if let Some(p) = j["placed"].as_i64().filter(|p| placed.last() != Some(p)) {
            placed.push(p);
        }
        if let Some(r) = j["retry_at"]
            .as_i64()
            .filter(|r| retries.last().map(|l| l.0) != Some(*r))
        {
            retries.push((r, answered));
        }
        if matches!(j["state"].as_str(), Some("finished" | "failed")) {
            break j;
        }
        assert!(t.elapsed() < Duration::from_secs(40), "{j}");
        std::thread::sleep(Duration::from_millis(40));
    };
    assert_eq!(j["state"], "failed", "{j}");
    assert_eq!(j["submit_failures"], 3, "{j}");
    let why = j["last_abort"].as_str().unwrap_or_default();
    assert!(
        why.contains("did not check in at the barrier within the barrier timeout (1s)")
            && why.contains("limit of 2 aborted starts"),
        "{why}"
    );
    assert_eq!(placed.len(), 3, "{placed:?}");
    // Each gap is the barrier timeout (1 s) plus the back-off (1 s, then 2 s) plus start-up.
    let gaps: Vec<i64> = placed.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps[0] >= 2_000 && gaps[1] >= 3_000, "{gaps:?}");
    // The back-off grew: the second one, as seen from no earlier than its abort, is longer
    // than the first could be (1 s). Start-up times, which vary with the machine's load,
    // do not enter this.
    assert_eq!(
        retries.len(),
        2,
        "the job showed a retry_at per back-off: {retries:?}"
    );
    let seen_backoffs: Vec<i64> = retries.iter().map(|(r, seen)| r - seen).collect();
    assert!(
        seen_backoffs[0] <= 1_000 && seen_backoffs[1] > 1_000,
        "the back-off did not grow: {seen_backoffs:?} (retry_at, seen: {retries:?})"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(processes_with("sleep 3023"), Vec::<u32>::new());
}

/// Issue 20: one bad job, whose component exits 3 before the barrier, fails after its tries
/// and leaves every site usable with no error counted against it (seed 000 §3.4 counts the
/// errors of a cluster, not of the user's program).
#[test]
fn a_job_whose_program_exits_3_before_the_barrier_fails_and_leaves_every_site_usable() {
    let s = Server::start(
        COALLOC,
        "exit-3",
        &three_clusters(
            [4, 4, 4],
            "policy = \"fcfs\"\nmax_submit_failures = 4\nretry_backoff = \"100ms\"",
        ),
    );
    let bad = json!({ "count": 2, "executable": "/bin/sh", "arguments": ["-c", "exit 3"] });
    let id = s.submit(&job(vec![
        barrier_component(COALLOC, 2, "", "sleep 30"),
        bad.clone(),
        bad,
    ]));
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "failed", "{j}");
    assert_eq!(j["submit_failures"], 5, "{j}");
    let why = j["last_abort"].as_str().unwrap_or_default();
    assert!(why.contains("exited with 3"), "{why}");
    for site in ["alpha", "beta", "gamma"] {
        let v = coalloc_testkit::server::site(&s, site);
        assert_eq!(v["usable"], true, "{v}");
        assert_eq!(v["submit_errors"], 0, "{v}");
    }
    // And the sites take the next job at once.
    let good = s.submit(&job(vec![barrier_component(COALLOC, 4, "", "true"); 3]));
    assert_eq!(s.wait_ended(good, 30)["state"], "finished");
}

/// `coalloc site drain|down|resume NAME --reason TEXT`: a drained site takes no new
/// component while its running one finishes, `coalloc sites` says why and since when, and
/// resume puts it back.
#[test]
fn an_operator_drains_and_resumes_a_site_and_sites_says_why_it_is_out() {
    let s = Server::start(
        COALLOC,
        "drain",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let cli = |args: &[&str]| cli(&s, args);
    let running = s.submit(&job(vec![barrier_component(COALLOC, 4, "", "sleep 2")]));
    let j = s.wait_for(running, 20, "running", |j| j["state"] == "running");
    let busy = j["components"][0]["site"].as_str().unwrap().to_string();
    cli(&["site", "drain", &busy, "--reason", "disk swap"]);
    let v = coalloc_testkit::server::site(&s, &busy);
    assert_eq!(v["usable"], false, "{v}");
    assert_eq!(v["out_reason"], "drained: disk swap", "{v}");
    assert!(v["out_since"].as_i64().is_some(), "{v}");
    let table = cli(&["sites"]);
    assert!(table.contains("drained: disk swap (since "), "{table}");
    // Running ones finish; new ones go elsewhere.
    assert_eq!(s.wait_ended(running, 20)["state"], "finished");
    let next = s.submit(&job(vec![barrier_component(COALLOC, 4, "", "true"); 2]));
    let j = s.wait_ended(next, 20);
    assert_eq!(j["state"], "finished", "{j}");
    assert!(
        !coalloc_testkit::server::component_sites(&j).contains(&busy),
        "{j}"
    );
    cli(&["site", "resume", &busy]);
    let v = coalloc_testkit::server::site(&s, &busy);
    assert_eq!(v["usable"], true, "{v}");
    assert!(v.get("out_reason").is_none(), "{v}");
    let (code, body) = s.call(
        "PUT",
        "/v1/sites/nowhere/control",
        &s.token,
        Some(r#"{"action":"down"}"#),
    );
    assert_eq!(code, 404, "{body}");
    let (code, body) = s.call(
        "PUT",
        &format!("/v1/sites/{busy}/control"),
        &s.token,
        Some(r#"{"action":"explode"}"#),
    );
    assert_eq!(code, 400, "{body}");
}

/// Issue 20 item 5: the queue cap (seed 000 §4.2) delays submissions instead of refusing
/// them: 300 submissions beyond it are all taken, wait for admission, and are admitted and
/// run in submission order as room frees; none is lost, and the CLI says so.
#[test]
fn submissions_beyond_the_queue_cap_are_all_admitted_in_order() {
    let s = Server::start(
        COALLOC,
        "admission",
        &three_clusters([1, 1, 1], "policy = \"fcfs\"\nmax_queued = 5"),
    );
    let one = job(vec![barrier_component(COALLOC, 1, "", "true")]);
    let mut ids = Vec::new();
    let mut waiting = 0;
    // Submitted until 300 of them met a full queue (jobs finish during the burst).
    while waiting < 300 && ids.len() < 600 {
        let (code, v) = s.call("POST", "/v1/jobs", &s.token, Some(&one.to_string()));
        assert_eq!(code, 201, "{v}");
        ids.push(v["job"].as_u64().unwrap());
        waiting += usize::from(v["awaiting_admission"] == true);
    }
    assert!(waiting >= 300, "{waiting} waited for admission");
    let last = s.job(*ids.last().unwrap());
    assert!(
        matches!(
            last["state"].as_str(),
            Some("awaiting-admission" | "queued" | "running" | "finished")
        ),
        "{last}"
    );
    // The CLI says a job waits.
    let file = s.dir.parent().unwrap().join("one.json");
    std::fs::write(&file, one.to_string()).unwrap();
    let said = cli(&s, &["submit", file.to_str().unwrap()]);
    let mut placed = Vec::new();
    for &id in &ids {
        let j = s.wait_ended(id, 120);
        assert_eq!(j["state"], "finished", "{j}");
        placed.push(j["placed"].as_i64().unwrap());
    }
    assert!(
        placed.windows(2).all(|w| w[0] <= w[1]),
        "not in order: {placed:?}"
    );
    // Submitted right behind 300 others, it waited for admission too.
    assert!(said.contains("waiting for admission"), "{said}");
}

/// Issue 20 item 4: a job held at the barrier (`hold_at_barrier = true`) waits for its
/// owner: its interactive component fails and is left to the owner, who substitutes it with
/// `coalloc edit`; the job still waits, and `coalloc commit` releases it.
#[test]
fn a_held_job_waits_for_coalloc_commit_takes_an_edit_and_commits() {
    let s = Server::start(
        COALLOC,
        "held",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let cli = |args: &[&str]| cli(&s, args);
    let mut bad = json!({ "count": 1, "executable": "/bin/sh", "arguments": ["-c", "exit 3"] });
    bad["start_type"] = json!("interactive");
    let mut spec = job(vec![barrier_component(COALLOC, 2, "", "echo done"), bad]);
    spec["hold_at_barrier"] = json!(true);
    let id = s.submit(&spec);
    s.wait_for(id, 20, "its interactive component failed", |j| {
        j["components"][1]["state"] == "failed" && j["components"][0]["state"] == "ready"
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(
        s.job(id)["state"],
        "starting",
        "held, not committed by itself"
    );
    let file = s.dir.parent().unwrap().join("good.json");
    std::fs::write(
        &file,
        job(vec![barrier_component(COALLOC, 1, "", "echo fixed")]).to_string(),
    )
    .unwrap();
    let said = cli(&[
        "edit",
        &id.to_string(),
        "substitute",
        "1",
        file.to_str().unwrap(),
    ]);
    assert!(said.contains("substitute"), "{said}");
    s.wait_for(id, 20, "the substitute at the barrier", |j| {
        j["components"][1]["state"] == "ready"
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(s.job(id)["state"], "starting", "still held for the owner");
    let said = cli(&["commit", &id.to_string(), "--json"]);
    assert!(said.contains("\"committed\":true"), "{said}");
    let j = s.wait_ended(id, 20);
    assert_eq!(j["state"], "finished", "{j}");
    assert!(s.output(id, 1).contains("fixed"));
    let (code, body) = s.call("POST", &format!("/v1/jobs/{id}/commit"), &s.token, None);
    assert_eq!(code, 409, "{body}");
}
