//! Snapshots of the server's state and compaction of the journal (issue 23, item 4), end to
//! end against a real `coalloc serve`: a `kill -9` while a snapshot is being written loses
//! nothing, and a restart after a snapshot restores it and replays only the journal's tail.

mod common;

use coalloc_testkit::server::{barrier_component, job, three_clusters, Server};
use common::COALLOC;
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
        barrier_component(COALLOC, 1, "", "true"),
        barrier_component(COALLOC, 1, "", "true"),
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
        COALLOC,
        "snapshot-kill",
        &config,
        &[("COALLOC_SNAPSHOT_PAUSE_MS", "5000")],
    );
    let ran = s.submit(&job(vec![barrier_component(COALLOC, 1, "", "true")]));
    assert_eq!(s.wait_ended(ran, 30)["state"], "finished");
    s.hold_the_queue();
    submit_array(&s, 1_000);
    let tmp = s.dir.join("snapshot.bin.tmp");
    let snapshot = s.dir.join("snapshot.bin");
    // The forked child creates the file before the server logs the fork: wait for both,
    // or the kill may come between them.
    wait_until(30, "a snapshot being written", || {
        tmp.exists() && plain(&s.log()).contains("snapshot taken (forked)")
    });
    let log = plain(&s.log());
    let child: u32 = log
        .split("snapshot taken (forked)")
        .nth(1)
        .and_then(|rest| rest.split("pid=").nth(1))
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no forked snapshot in {log}"));
    // The writer holds none of the server's sockets (it would keep the address and the
    // socket file of a killed server while it syncs, and a restart would be refused).
    let held: Vec<String> = std::fs::read_dir(format!("/proc/{child}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|target| target.display().to_string())
        .filter(|target| target.starts_with("socket:"))
        .collect();
    assert!(held.is_empty(), "the snapshot's child holds {held:?}");
    s.kill();
    assert!(!snapshot.exists(), "the first snapshot was cut short");
    // The forked writer died with the server: it cannot meet a restarted one's writer.
    wait_until(10, "the forked writer to die with the server", || {
        std::fs::read_to_string(format!("/proc/{child}/stat"))
            .map(|st| st.split(") ").nth(1).unwrap_or("").starts_with('Z'))
            .unwrap_or(true)
    });
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
    let next = s.submit(&job(vec![barrier_component(COALLOC, 1, "", "true")]));
    assert_eq!(next, 1_602);
    let log = s.log();
    assert!(
        log.contains("snapshot restored and journal replayed"),
        "{log}"
    );
    // Written by a forked child that allocated nothing (the binary's allocator would have
    // ended it), not by the driver.
    assert!(log.contains("snapshot taken (forked)"), "{log}");
    assert!(log.contains("snapshot written"), "{log}");
    assert!(!log.contains("a forked snapshot failed"), "{log}");
}

/// A kill inside the journal's compaction (after a snapshot was written, while the entries
/// it covers are being deleted) loses nothing: the compaction is one transaction.
#[test]
fn a_kill_during_the_journals_compaction_loses_nothing() {
    let config =
        three_clusters([4, 4, 4], "").replace("[server]\n", "[server]\nsnapshot_every = 500\n");
    let mut s = Server::start_with_env(
        COALLOC,
        "compact-kill",
        &config,
        &[("COALLOC_COMPACT_PAUSE_MS", "5000")],
    );
    let ran = s.submit(&job(vec![barrier_component(COALLOC, 1, "", "true")]));
    assert_eq!(s.wait_ended(ran, 30)["state"], "finished");
    s.hold_the_queue();
    submit_array(&s, 1_000);
    wait_until(30, "a compaction under way", || {
        s.log()
            .contains("journal compaction paused before its commit")
    });
    assert!(s.dir.join("snapshot.bin").exists());
    s.kill();
    let (entries, first) = journal_span(&s);
    assert_eq!(
        first, 1,
        "the compaction was rolled back ({entries} entries)"
    );
    s.env.clear();
    s.restart();
    every_job_once(&s, 1_001);
    assert_eq!(s.job(ran)["state"], "finished");
    // The restart used the snapshot and skipped the entries it covers.
    let log = plain(&s.log());
    let last = log
        .rsplit("snapshot restored and journal replayed")
        .next()
        .unwrap_or("");
    assert!(
        last.trim_start().starts_with("covered=") && !last.trim_start().starts_with("covered=0 "),
        "{log}"
    );
}

/// A restart after a snapshot under a changed configuration: another queue policy and a
/// site added take effect, the queued jobs are kept and run; a site removed is refused with
/// a message that says why and what to do.
#[test]
fn a_restart_may_change_the_policy_and_add_sites_but_not_remove_one() {
    let mut s = Server::start(
        COALLOC,
        "snapshot-config",
        &three_clusters([1, 1, 1], "policy = \"fcfs\""),
    );
    s.hold_the_queue();
    let ids: Vec<u64> = (0..3)
        .map(|_| s.submit(&job(vec![barrier_component(COALLOC, 1, "", "true")])))
        .collect();
    assert!(s.terminate(Duration::from_secs(20)), "a clean stop");
    assert!(
        s.dir.join("snapshot.bin").exists(),
        "a clean stop snapshots"
    );

    // Without gamma: refused, the state left as it was.
    let config = std::fs::read_to_string(&s.config).unwrap();
    let gamma = "[[site]]\nname = \"gamma\"\nprocessors = 1\nmanager = { type = \"local\" }\n";
    assert!(config.contains(gamma));
    std::fs::write(&s.config, config.replace(gamma, "")).unwrap();
    let err = s.serve_refused();
    assert!(
        err.contains("[alpha, beta, gamma]") && err.contains("not removed"),
        "{err}"
    );

    // EASY instead of FCFS, and a site delta after the others.
    let delta = "[[site]]\nname = \"delta\"\nprocessors = 4\nmanager = { type = \"local\" }\n";
    let changed = config
        .replace("policy = \"fcfs\"", "policy = \"easy\"")
        .replace(gamma, &format!("{gamma}{delta}"));
    std::fs::write(&s.config, changed).unwrap();
    s.restart();
    let log = s.log();
    assert!(log.contains("queue policy fcfs -> easy"), "{log}");
    assert!(log.contains("sites added: delta"), "{log}");
    for id in ids {
        let j = s.wait_ended(id, 30);
        assert_eq!(j["state"], "finished", "{j}");
        assert_eq!(coalloc_testkit::server::component_sites(&j), vec!["delta"]);
    }
}

/// `text` without its terminal colours.
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('\x1b') {
        out += &rest[..at];
        rest = rest[at..].split_once('m').map_or("", |(_, r)| r);
    }
    out + rest
}

/// A journal entry the restart cannot take (here a submission whose job no longer reads)
/// stops the start with a message that names it and the reason, not a panic or a hang;
/// the journal is read on a thread of its own while the driver replays, so this checks that
/// the two stop together.
#[test]
fn a_journal_entry_that_does_not_read_stops_the_start_with_its_number() {
    // No snapshots: every entry stays in the journal.
    let config =
        three_clusters([1, 1, 1], "").replace("[server]\n", "[server]\nsnapshot_every = 0\n");
    let mut s = Server::start(COALLOC, "bad-entry", &config);
    s.hold_the_queue();
    for _ in 0..3 {
        s.submit(&job(vec![barrier_component(COALLOC, 1, "", "true")]));
    }
    assert!(s.terminate(Duration::from_secs(20)), "a clean stop");
    assert!(!s.dir.join("snapshot.bin").exists());
    let journal = rusqlite::Connection::open(s.dir.join("journal.sqlite")).unwrap();
    let changed = journal
        .execute(
            r#"UPDATE journal SET entry = '{"e":"submit","job":"no job","secret":"x"}'
               WHERE seq = (SELECT seq FROM journal WHERE entry LIKE '%"e":"submit"%'
                            ORDER BY seq LIMIT 1 OFFSET 1)"#,
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    // Some entries compacted away first, so that the entry's number (its seq) is not its
    // place among the entries left.
    let gone = journal
        .execute(
            "DELETE FROM journal WHERE seq = (SELECT min(seq) FROM journal)",
            [],
        )
        .unwrap();
    assert_eq!(gone, 1);
    let (seq,): (i64,) = journal
        .query_row(
            r#"SELECT seq FROM journal WHERE entry LIKE '%"job":"no job"%'"#,
            [],
            |r| Ok((r.get(0)?,)),
        )
        .unwrap();
    let (place,): (i64,) = journal
        .query_row("SELECT count(*) FROM journal WHERE seq <= ?1", [seq], |r| {
            Ok((r.get(0)?,))
        })
        .unwrap();
    assert_ne!(place, seq, "the entry's place differs from its number");
    drop(journal);
    let err = s.serve_refused();
    assert!(err.contains(&format!("journal entry {seq}:")), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
