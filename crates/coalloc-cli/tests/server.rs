//! End to end with real processes: `coalloc serve` on three local clusters, components that
//! call `coalloc barrier`, and the co-allocation transaction's outcomes (seed 002 §3.2):
//! commit, atomic abort, interactive substitution, optional components, failures after
//! commit, cancel, `kill -9` and restart, and bad input over the API.

mod common;

use coalloc_testkit::server::{
    barrier_component, component_sites as sites, processes_with, three_clusters, Server,
};
use common::COALLOC;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// A component that checks in at the barrier, then runs `then` (a shell snippet).
fn comp(count: u32, then: &str) -> Value {
    barrier_component(COALLOC, count, "", then)
}

fn job(components: Vec<Value>) -> Value {
    json!({ "kind": "unordered", "max_wall_time": "2m", "component": components })
}

/// A job's secret, read from the environment of one of its running processes (of this
/// server: other tests' servers number their jobs from 1 too).
fn secret_of(url: &str, job: u64) -> String {
    // Released from the barrier, the component's shell starts its sleep a moment later.
    let t = std::time::Instant::now();
    while t.elapsed() < std::time::Duration::from_secs(10) {
        if let Some(s) = find_secret(url, job) {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("no process of job {job} found");
}

fn find_secret(url: &str, job: u64) -> Option<String> {
    for pid in processes_with("sleep") {
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let vars: Vec<String> = env
            .split(|b| *b == 0)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        let has = |want: String| vars.contains(&want);
        if has(format!("COALLOC_JOB_ID={job}")) && has(format!("COALLOC_URL={url}")) {
            if let Some(v) = vars.iter().find_map(|v| v.strip_prefix("COALLOC_SECRET=")) {
                return Some(v.to_string());
            }
        }
    }
    None
}

#[test]
fn a_three_component_job_spans_three_clusters_passes_the_barrier_and_completes() {
    let s = Server::start(
        COALLOC,
        "three",
        &three_clusters([4, 4, 4], "policy = \"fcfs\"\nfit = \"worst\""),
    );
    let id = s.submit(&job((0..3)
        .map(|_| comp(4, "echo rank=$COALLOC_RANK_OFFSET sizes=$COALLOC_SIZES"))
        .collect()));
    let j = s.wait_ended(id, 30);
    assert_eq!(j["state"], "finished", "{j}");
    let used: BTreeSet<String> = sites(&j).into_iter().collect();
    assert_eq!(
        used,
        ["alpha", "beta", "gamma"].map(String::from).into(),
        "{j}"
    );
    assert!(j["barrier_release"].as_i64().is_some());
    for i in 0..3 {
        let out = s.output(id, i);
        assert!(
            out.contains(&format!("rank={} sizes=4,4,4", 4 * i)),
            "component {i}: {out:?}"
        );
    }
}

#[test]
fn a_required_component_that_cannot_start_aborts_the_job_with_nothing_left_running() {
    let s = Server::start(
        COALLOC,
        "abort",
        &three_clusters([4, 4, 4], "policy = \"fcfs\"\nmax_submit_failures = 1"),
    );
    let missing = json!({ "count": 2, "executable": "/no/such/program" });
    let id = s.submit(&job(vec![comp(2, "exec sleep 3017"), missing]));
    let j = s.wait_ended(id, 30);
    assert_eq!(j["state"], "failed", "{j}");
    assert!(j["submit_failures"].as_u64().unwrap() >= 1, "{j}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        processes_with("sleep 3017"),
        Vec::<u32>::new(),
        "a component was left running"
    );
    let sites = s.get("/v1/sites");
    let busy: u64 = sites["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["coalloc"].as_u64().unwrap())
        .sum();
    assert_eq!(busy, 0, "{sites}");
}

#[test]
fn an_interactive_component_that_fails_is_placed_again_elsewhere() {
    // alpha is the biggest, so the worst fit puts both components there first; the
    // interactive one fails on alpha only.
    let s = Server::start(
        COALLOC,
        "interactive",
        &three_clusters([8, 4, 4], "policy = \"fcfs\"\nfit = \"worst\""),
    );
    let mut picky = comp(2, "echo on $COALLOC_SITE");
    picky["arguments"] = json!([
        "-c",
        "[ \"$COALLOC_SITE\" = alpha ] && exit 3; \"$COALLOC\" barrier && echo on $COALLOC_SITE"
    ]);
    picky["start_type"] = json!("interactive");
    let id = s.submit(&job(vec![comp(2, "sleep 0.5"), picky]));
    let j = s.wait_ended(id, 30);
    assert_eq!(j["state"], "finished", "{j}");
    let placed = sites(&j);
    assert_eq!(placed[0], "alpha", "{j}");
    assert_ne!(placed[1], "alpha", "{j}");
    assert!(s.output(id, 1).contains(&format!("on {}", placed[1])));
    assert!(
        j["components"][1]["launch"].as_u64().unwrap()
            > j["components"][0]["launch"].as_u64().unwrap()
    );
}

#[test]
fn an_optional_component_that_fails_is_ignored() {
    let s = Server::start(
        COALLOC,
        "optional",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let broken = json!({ "count": 1, "executable": "/no/such/program", "start_type": "optional" });
    let id = s.submit(&job(vec![comp(2, "echo fine"), broken]));
    let j = s.wait_ended(id, 30);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(j["submit_failures"], 0, "{j}");
    assert_eq!(j["components"][1]["state"], "failed", "{j}");
    assert!(s.output(id, 0).contains("fine"));
}

#[test]
fn a_failure_after_commit_requeues_the_job_and_counts_against_the_site() {
    let s = Server::start(
        COALLOC,
        "after",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let mark = s.dir.join("failed-once");
    let once = format!(
        "if [ ! -e {m} ]; then touch {m}; exit 4; fi; echo second",
        m = mark.display()
    );
    let id = s.submit(&job(vec![comp(2, &once)]));
    // Watch the site's error count rise while the job is re-run.
    let mut seen_errors = 0;
    let t = std::time::Instant::now();
    while t.elapsed() < std::time::Duration::from_secs(30) {
        let sites = s.get("/v1/sites");
        for x in sites["sites"].as_array().unwrap() {
            seen_errors = seen_errors.max(x["completion_errors"].as_u64().unwrap_or(0));
        }
        if s.job(id)["completion_failures"].as_u64() == Some(1) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let j = s.wait_ended(id, 30);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(j["completion_failures"], 1, "{j}");
    let failed: u64 = s.get("/v1/sites")["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["failed_launches"].as_u64().unwrap())
        .sum();
    assert_eq!(failed, 1, "one launch failed in all");
    // The consecutive count may be seen only between the failure and the re-run's success.
    let _ = seen_errors;
    assert!(s.output(id, 0).contains("second"));
}

#[test]
fn cancel_leaves_no_process_behind() {
    let s = Server::start(
        COALLOC,
        "cancel",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let id = s.submit(&job(vec![
        comp(2, "exec sleep 3021"),
        comp(2, "exec sleep 3021"),
    ]));
    s.wait_for(id, 30, "running", |j| j["state"] == "running");
    // Released from the barrier, each component's shell execs its sleep a moment later.
    let t = std::time::Instant::now();
    while processes_with("sleep 3021").len() < 2 && t.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(processes_with("sleep 3021").len(), 2);
    let (st, v) = s.call("DELETE", &format!("/v1/jobs/{id}"), &s.token, None);
    assert_eq!(st, 200, "{v}");
    let j = s.wait_ended(id, 10);
    assert_eq!(j["state"], "failed", "{j}");
    let t = std::time::Instant::now();
    while !processes_with("sleep 3021").is_empty() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "left running: {:?}",
            processes_with("sleep 3021")
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn kill_9_and_restart_loses_nothing_and_starts_nothing_twice() {
    let mut s = Server::start(
        COALLOC,
        "restart",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let starts = s.dir.parent().unwrap().join("starts.log");
    let record = format!(
        "echo $COALLOC_JOB_ID.$COALLOC_COMPONENT >> {}; sleep 2",
        starts.display()
    );
    let ids: Vec<u64> = (0..4)
        .map(|_| s.submit(&job(vec![comp(2, &record), comp(2, &record)])))
        .collect();
    // Two jobs fit at once (12 slots, 4 per job... 3 jobs); wait for one to run, then kill.
    s.wait_for(ids[0], 30, "running", |j| j["state"] == "running");
    s.kill_and_restart();
    for id in &ids {
        let j = s.wait_ended(*id, 60);
        assert_eq!(j["state"], "finished", "{j}");
    }
    coalloc_testkit::server::assert_started_once(&starts, &ids, 2);
    assert_eq!(s.get("/v1/jobs")["jobs"].as_array().unwrap().len(), 4);
    // A restart learns again from the launchers that the launches ended, and does not
    // journal it again (a soak with 30 restarts once held 18 entries per launch).
    assert_eq!(s.journal_entries("finished"), 8);
    s.kill_and_restart();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(s.journal_entries("finished"), 8);
}

#[test]
fn a_launch_the_server_never_recorded_is_cancelled_at_restart_not_left_running() {
    let mut s = Server::start(
        COALLOC,
        "unrecorded",
        &three_clusters([2, 2, 2], "policy = \"fcfs\""),
    );
    let runs = s.dir.parent().unwrap().join("runs.log");
    let cmd = format!(
        "echo start $$ >> {0}; sleep 3; echo end $$ >> {0}",
        runs.display()
    );
    let id = s.submit(&job(vec![comp(1, &cmd)]));
    s.wait_for(id, 30, "running", |j| j["state"] == "running");
    s.kill();
    // A crash after the cluster accepted the launch but before the server journaled its
    // answer leaves the journal without the launch's `launched` entry: make it so.
    assert_eq!(s.forget_launched_entries(), 1);
    s.restart();
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}");
    // Longer than the lost launch would have gone on running.
    std::thread::sleep(std::time::Duration::from_secs(4));
    let text = std::fs::read_to_string(&runs).unwrap();
    let count = |word: &str| text.lines().filter(|l| l.starts_with(word)).count();
    assert_eq!(
        count("start"),
        2,
        "the lost launch and its replacement: {text}"
    );
    assert_eq!(
        count("end"),
        1,
        "the lost launch was cancelled, not left running beside its replacement: {text}"
    );
}

/// The local launchers of this server's clusters (`coalloc local-launcher SITE_DIR`).
fn launchers_of(s: &Server) -> BTreeSet<u32> {
    processes_with(&format!("{COALLOC} local-launcher {}", s.dir.display()))
        .into_iter()
        .collect()
}

#[test]
fn kill_9_leaves_the_launchers_running_and_the_next_server_reads_their_codes() {
    let mut s = Server::start(
        COALLOC,
        "launchers",
        &three_clusters([2, 2, 2], "policy = \"fcfs\""),
    );
    let id = s.submit(&job(vec![
        comp(1, "sleep 1.5"),
        comp(1, "sleep 1.5"),
        comp(1, "sleep 1.5"),
    ]));
    s.wait_for(id, 30, "running", |j| j["state"] == "running");
    let before = launchers_of(&s);
    assert_eq!(before.len(), 3, "one launcher per cluster");
    for site in ["alpha", "beta", "gamma"] {
        assert!(s
            .dir
            .join("sites")
            .join(site)
            .join("launcher.sock")
            .exists());
    }
    s.kill_and_restart();
    // The components end while, or after, the new server starts: their codes come from the
    // launchers, which the new server connected to rather than starting others.
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(launchers_of(&s), before);
    let again = s.submit(&job(vec![comp(1, "exit 0")]));
    assert_eq!(s.wait_ended(again, 30)["state"], "finished");
    assert_eq!(launchers_of(&s), before);
}

#[test]
fn bad_input_over_the_api_gets_a_4xx_and_changes_nothing() {
    let s = Server::start(
        COALLOC,
        "bad",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let ok = s.submit(&job(vec![comp(1, "sleep 30")]));
    let before = s.get("/v1/jobs");
    let t = s.token.clone();
    let cases: Vec<(&str, String, Option<String>, u16, &str)> = vec![
        (
            "POST",
            "/v1/jobs?format=rsl".into(),
            Some("&(count=2".into()),
            400,
            "job:",
        ),
        (
            "POST",
            "/v1/jobs?format=rsl".into(),
            Some("+(&(resourceManagerContact=nowhere)(count=2)(executable=/bin/true))".into()),
            400,
            "nowhere",
        ),
        (
            "POST",
            "/v1/jobs".into(),
            Some(job(vec![json!({"count": 1000, "executable": "/bin/true"})]).to_string()),
            400,
            "1000",
        ),
        (
            "POST",
            "/v1/jobs?format=xml".into(),
            Some("x".into()),
            400,
            "unknown format",
        ),
        ("DELETE", "/v1/jobs/999".into(), None, 404, "no job 999"),
    ];
    for (m, path, body, want, text) in cases {
        let (st, v) = s.call(m, &path, &t, body.as_deref());
        assert_eq!(st, want, "{m} {path}: {v}");
        assert!(
            v["error"].as_str().unwrap_or("").contains(text),
            "{m} {path}: {v}"
        );
    }
    let (st, v) = s.call("GET", "/v1/jobs", "not-the-token", None);
    assert_eq!(st, 401, "{v}");
    // Another job's secret is refused at this job's barrier and rendezvous store.
    let other = s.submit(&job(vec![comp(1, "sleep 30")]));
    s.wait_for(ok, 30, "running", |j| j["state"] == "running");
    let secret = secret_of(&s.url, ok);
    // Its own secret works at its own store ...
    let (st, v) = s.call("PUT", &format!("/v1/jobs/{ok}/kv/x"), &secret, Some("1"));
    assert_eq!(st, 204, "{v}");
    // ... and is refused at another job's barrier and store.
    let (st, v) = s.call("PUT", &format!("/v1/jobs/{other}/kv/x"), &secret, Some("1"));
    assert_eq!(st, 403, "{v}");
    let checkin = json!({"launch": 1, "ok": true}).to_string();
    let (st, v) = s.call(
        "POST",
        &format!("/v1/jobs/{other}/barrier"),
        &secret,
        Some(&checkin),
    );
    assert_eq!(st, 403, "{v}");
    let (st, v) = s.call(
        "POST",
        &format!("/v1/jobs/{ok}/barrier"),
        &secret,
        Some("{\"ok\": 3}"),
    );
    assert_eq!(st, 400, "{v}");
    let after = s.get("/v1/jobs");
    assert_eq!(
        after["jobs"].as_array().unwrap().len(),
        before["jobs"].as_array().unwrap().len() + 1
    );
    assert_eq!(s.job(ok)["id"], ok);
}

#[test]
fn components_find_each_other_through_the_rendezvous_store_from_the_shell() {
    let s = Server::start(
        COALLOC,
        "kv",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let put = comp(
        2,
        "\"$COALLOC\" kv put greeting \"hello from $COALLOC_SITE\"",
    );
    let get = comp(2, "\"$COALLOC\" kv get greeting --wait 20s");
    let id = s.submit(&job(vec![put, get]));
    let j = s.wait_ended(id, 30);
    assert_eq!(j["state"], "finished", "{j}");
    let site0 = sites(&j)[0].clone();
    assert_eq!(s.output(id, 1).trim(), format!("hello from {site0}"));
}

#[test]
fn edits_before_commit_and_the_event_stream() {
    use std::io::{BufRead, BufReader, Write};
    let s = Server::start(
        COALLOC,
        "edit",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    // Subscribe to the event stream first (server-sent events over a raw connection).
    let addr = s.url.trim_start_matches("http://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        conn,
        "GET /v1/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\n\r\n",
        s.token
    )
    .unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    // The response's head first: the server subscribes the stream before it answers, so no
    // event of the job is missed (submitting at once raced the subscription, and a CI run
    // saw the stream begin after `placed`).
    let head = common::read_head(&mut conn).unwrap_or_else(|e| panic!("the event stream: {e}"));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // The component waits for a mark before its check-in, so the job stays uncommitted.
    let mark = s.dir.join("go");
    let wait = format!(
        "while [ ! -e {m} ]; do sleep 0.05; done; \"$COALLOC\" barrier || exit 1; echo first",
        m = mark.display()
    );
    let c = json!({ "count": 1, "job_type": "single", "executable": "/bin/sh",
        "arguments": ["-c", wait], "environment": { "COALLOC": COALLOC } });
    let id = s.submit(&job(vec![c]));
    s.wait_for(id, 30, "claiming", |j| {
        j["components"][0]["launch"].is_u64()
    });
    // Add a component before commit; delete a missing one is refused.
    let added = comp(1, "echo added");
    let body = json!({ "op": "add", "component": added }).to_string();
    let (st, v) = s.call(
        "POST",
        &format!("/v1/jobs/{id}/edit"),
        &s.token,
        Some(&body),
    );
    assert_eq!(st, 200, "{v}");
    let body = json!({ "op": "delete", "index": 7 }).to_string();
    let (st, v) = s.call(
        "POST",
        &format!("/v1/jobs/{id}/edit"),
        &s.token,
        Some(&body),
    );
    assert!((400..500).contains(&st), "{st} {v}");
    std::fs::write(&mark, "").unwrap();
    let j = s.wait_ended(id, 30);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(j["components"].as_array().unwrap().len(), 2, "{j}");
    assert_eq!(s.output(id, 1).trim(), "added");
    // After commit, edits are refused.
    let body = json!({ "op": "delete", "index": 1 }).to_string();
    let (st, _) = s.call(
        "POST",
        &format!("/v1/jobs/{id}/edit"),
        &s.token,
        Some(&body),
    );
    assert!((400..500).contains(&st));
    // The stream told the story in order: placed, committed, finished.
    let mut seen = Vec::new();
    let reader = BufReader::new(conn);
    for line in reader.lines() {
        let Ok(line) = line else { break };
        if let Some(data) = line.strip_prefix("data:") {
            let v: Value = serde_json::from_str(data.trim()).unwrap_or(Value::Null);
            if v["job"] == id {
                if let Some(e) = v["event"].as_str() {
                    seen.push(e.to_string());
                }
            }
            if v["event"] == "finished" {
                break;
            }
        }
    }
    let pos = |e: &str| seen.iter().position(|x| x == e);
    assert!(pos("placed").is_some(), "{seen:?}");
    assert!(pos("placed") < pos("committed"), "{seen:?}");
    assert!(pos("committed") < pos("finished"), "{seen:?}");
    let once = |e: &str| seen.iter().filter(|x| *x == e).count() == 1;
    assert!(once("committed") && once("finished"), "{seen:?}");
    // The API describes itself.
    let (st, doc) = s.call("GET", "/openapi.json", "", None);
    assert_eq!(st, 200);
    assert!(doc["paths"]["/v1/jobs/{id}/edit"].is_object(), "{doc}");
}

/// CPU seconds (user + system) the process `pid` has used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses: utime and stime are 14 and 15.
    let rest: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 = rest[11].parse::<f64>().unwrap() + rest[12].parse::<f64>().unwrap();
    let out = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .unwrap();
    let hz: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    ticks / hz
}

#[test]
fn a_check_in_waiting_at_the_barrier_keeps_the_server_idle() {
    let s = Server::start(
        COALLOC,
        "idle-wait",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    // The second component checks in only when the mark exists; the first waits for it.
    let mark = s.dir.join("go");
    let late = format!(
        "while [ ! -e {m} ]; do sleep 0.05; done; \"$COALLOC\" barrier || exit 1; echo second",
        m = mark.display()
    );
    let c = json!({ "count": 1, "job_type": "single", "executable": "/bin/sh",
        "arguments": ["-c", late], "environment": { "COALLOC": COALLOC } });
    let id = s.submit(&job(vec![comp(1, "echo first"), c]));
    s.wait_for(id, 30, "the first component at the barrier", |j| {
        j["components"][0]["state"] == "ready"
    });
    // While it waits, the server does next to nothing (it used to answer the waiting
    // check-in again after every turn of its own making: about 80% of a core).
    let pid = s.pid().unwrap();
    let (c0, t0) = (cpu_seconds(pid), std::time::Instant::now());
    std::thread::sleep(std::time::Duration::from_secs(2));
    let used = (cpu_seconds(pid) - c0) / t0.elapsed().as_secs_f64();
    assert!(
        used < 0.25,
        "the server used {:.0}% of a core while a check-in waited",
        used * 100.0
    );
    let j = s.job(id);
    assert!(j["barrier_release"].is_null(), "{j}");
    // ... and still hears the second check-in and releases both.
    std::fs::write(&mark, "").unwrap();
    let j = s.wait_ended(id, 30);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(s.output(id, 0).trim(), "first");
    assert_eq!(s.output(id, 1).trim(), "second");
}

#[test]
fn sigterm_stops_the_server_even_with_an_event_stream_open() {
    use std::io::{Read, Write};
    let mut s = Server::start(
        COALLOC,
        "sigterm",
        &three_clusters([2, 2, 2], "policy = \"fcfs\""),
    );
    let addr = s.url.trim_start_matches("http://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        conn,
        "GET /v1/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\r\n",
        s.token
    )
    .unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut head = [0u8; 12];
    conn.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    // Graceful shutdown must not wait for the endless stream: the stream ends, the server exits.
    assert!(
        s.terminate(std::time::Duration::from_secs(5)),
        "the server was still running 5 s after SIGTERM"
    );
    let mut rest = Vec::new();
    conn.read_to_end(&mut rest).unwrap();
}
