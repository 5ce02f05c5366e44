//! Snapshots of the server's state and compaction of the journal (issue 23, item 4), end to
//! end against a real `coalloc serve`: a `kill -9` while a snapshot is being written loses
//! nothing, and a restart after a snapshot restores it and replays only the journal's tail.

mod common;

use common::server::{barrier_component, job, three_clusters, Server};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Every job numbered 1..=n, each once, in memory.
fn every_job_once(s: &Server, n: u64) {
    let mut all = Vec::new();
    let mut after = 0;
    loop {
        let page = s.get(&format!("/v1/jobs?state=all&limit=10000&after={after}"));
        all.extend(
            page["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["id"].as_u64().unwrap()),
        );
        match page["next"].as_u64() {
            Some(next) => after = next,
            None => break,
        }
    }
    assert_eq!(all, (1..=n).collect::<Vec<_>>());
}

/// Submit `n` queued two-component jobs as one array.
fn submit_array(s: &Server, n: u32) {
    let spec = job(vec![
        barrier_component(1, "", "true"),
        barrier_component(1, "", "true"),
    ]);
    let path = format!("/v1/jobs?array=0-{}", n - 1);
    let (code, v) = s.call("POST", &path, &s.token, Some(&spec.to_string()));
    assert_eq!(code, 201, "{v}");
}

fn wait_until(secs: u64, what: &str, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < Duration::from_secs(secs), "waited for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The journal's entries: how many, and the first one's number.
fn journal_span(s: &Server) -> (i64, i64) {
    let journal = rusqlite::Connection::open(s.dir.join("journal.sqlite")).unwrap();
    journal
        .query_row("SELECT count(*), min(seq) FROM journal", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
}

fn usable(s: &Server) -> Vec<Value> {
    let sites = s.get("/v1/sites");
    sites["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["usable"].clone())
        .collect()
}

#[test]
fn a_kill_during_a_snapshot_loses_nothing_and_a_restart_replays_only_the_tail() {
    let config =
        three_clusters([4, 4, 4], "").replace("[server]\n", "[server]\nsnapshot_every = 500\n");
    // The snapshot's writing thread stops for 5 s before it syncs and renames its
    // temporary file.
    let mut s = Server::start_with_env(
        "snapshot-kill",
        &config,
        &[("COALLOC_SNAPSHOT_PAUSE_MS", "5000")],
    );
    let ran = s.submit(&job(vec![barrier_component(1, "", "true")]));
    assert_eq!(s.wait_ended(ran, 30)["state"], "finished");
    s.hold_the_queue();
    submit_array(&s, 1_000);
    let tmp = s.dir.join("snapshot.bin.tmp");
    let snapshot = s.dir.join("snapshot.bin");
    wait_until(30, "a snapshot being written", || tmp.exists());
    s.kill();
    assert!(!snapshot.exists(), "the first snapshot was cut short");
    s.env.clear();
    s.restart();
    every_job_once(&s, 1_001);
    assert_eq!(s.job(ran)["state"], "finished");

    // Now snapshots that complete (the restarted server takes one at once: its journal's
    // tail is over `snapshot_every`): the journal is compacted up to the last one.
    submit_array(&s, 600);
    wait_until(30, "a snapshot and a compacted journal", || {
        snapshot.exists() && journal_span(&s).1 > 1
    });
    let (entries, first) = journal_span(&s);
    s.kill();
    s.restart();
    every_job_once(&s, 1_601);
    assert_eq!(s.job(ran)["state"], "finished");
    assert_eq!(
        usable(&s),
        vec![Value::Bool(false); 3],
        "site state restored"
    );
    assert!(
        entries < 1_601 && first > 1,
        "the restart replayed {entries} entries from {first}"
    );
    // Numbering goes on after the restored state's jobs.
    let next = s.submit(&job(vec![barrier_component(1, "", "true")]));
    assert_eq!(next, 1_602);
    assert!(
        s.log().contains("snapshot restored and journal replayed"),
        "{}",
        s.log()
    );
}
