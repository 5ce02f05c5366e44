//! PostgreSQL replicated (issue 32, item 3), end to end on three hosts (network namespaces,
//! [`coalloc_testkit::postgres::replicated`]): a primary, its synchronous streaming replica,
//! and `coalloc serve` whose journal's connection string names both hosts with
//! `target_session_attrs=read-write`. 200 jobs are submitted one after another; once half
//! are acknowledged, the primary's postmaster is killed with `kill -9` and the replica
//! promoted (`pg_ctl promote`, the operator's or a tool's job). The server exits at its next
//! write (a journal it cannot commit to ends it: nothing is acknowledged that is not
//! committed) and is started again, as a supervisor does, until it serves: it connects to
//! the promoted replica, the only host that accepts writes. Submissions go on; every
//! acknowledged one is there under its name and runs, and no component passes its barrier
//! twice (a launch whose unsynced `launched` entry had not reached the replica is
//! cancelled by its name and made again, before its barrier: counted and printed). The times
//! (kill to served again, kill to the first acknowledgement after) are printed.
//! Skipped without PostgreSQL's binaries unless COALLOC_REQUIRE_POSTGRES=1, and without
//! network namespaces (root) unless COALLOC_REQUIRE_AGENTS is set (scripts/test.sh).

mod common;

use coalloc_testkit::postgres::replicated::Replicated;
use coalloc_testkit::server::{barrier_component, job, three_clusters, Server};
use common::COALLOC;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const JOBS: usize = 200;

/// Submission `i`: one component that writes `JOB.COMPONENT` into `dir/tries`, checks in at
/// the barrier, and once past it writes the same into `dir/starts`.
fn submission(dir: &Path, i: usize) -> Value {
    let mark = |file: &str| {
        format!(
            "echo $COALLOC_JOB_ID.$COALLOC_COMPONENT >> {}/{file};",
            dir.display()
        )
    };
    let mut j = job(vec![barrier_component(
        COALLOC,
        1,
        &mark("tries"),
        &mark("starts"),
    )]);
    j["name"] = format!("sub-{i}").into();
    j
}

/// An acknowledged submission: its number, its job, when it was acknowledged.
type Acked = (usize, u64, Instant);

/// Submit the `JOBS` submissions in order to `url`, each until it is acknowledged (201),
/// into `acked`; how many attempts failed.
fn submit_all(url: &str, token: &str, marks: &Path, acked: &Mutex<Vec<Acked>>) -> usize {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .new_agent();
    let mut failed = 0;
    for i in 0..JOBS {
        let body = submission(marks, i).to_string();
        loop {
            let r = agent
                .post(format!("{url}/v1/jobs"))
                .header("Authorization", &format!("Bearer {token}"))
                .send(body.as_str());
            if let Ok(mut r) = r {
                if r.status().as_u16() == 201 {
                    let v: Value =
                        serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
                    let id = v["job"].as_u64().unwrap();
                    acked.lock().unwrap().push((i, id, Instant::now()));
                    break;
                }
            }
            failed += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    failed
}

#[test]
fn the_primary_killed_and_its_replica_promoted_lose_no_acknowledged_submission() {
    let Some(mut db) = Replicated::start("coalloc") else {
        return;
    };
    // The primary waits for its replica at every commit.
    assert_eq!(
        db.primary
            .psql("postgres", "SELECT sync_state FROM pg_stat_replication"),
        "sync"
    );
    // A fixed port (coalloc's host is this test's own): started again, the server answers
    // where the submissions go.
    let config = three_clusters([4, 4, 4], "").replacen(
        "[server]\n",
        &format!(
            "[server]\njournal = \"{}\"\nbind = \"127.0.0.1:4417\"\n",
            db.url("coalloc")
        ),
        1,
    );
    std::thread::scope(|scope| {
        let run = scope.spawn(|| {
            db.enter_coalloc_host();
            run(&mut db, &config);
        });
        if let Err(e) = run.join() {
            std::panic::resume_unwind(e);
        }
    });
    // The old primary is gone, the replica leads alone.
    assert_eq!(
        db.replica.psql("coalloc", "SELECT pg_is_in_recovery()"),
        "f"
    );
}

/// The test on coalloc's host.
fn run(db: &mut Replicated, config: &str) {
    let mut s = Server::start(COALLOC, "pg-replicated", config);
    let marks = s.dir.parent().unwrap().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let acked = Mutex::new(Vec::new());
    let (url, token) = (s.url.clone(), s.token.clone());
    let (failed, killed, times, starts) = std::thread::scope(|scope| {
        let submitter = scope.spawn(|| submit_all(&url, &token, &marks, &acked));
        let t = Instant::now();
        while acked.lock().unwrap().len() < JOBS / 2 {
            assert!(t.elapsed() < Duration::from_secs(120), "{}", s.log());
            std::thread::sleep(Duration::from_millis(5));
        }
        let killed = Instant::now();
        db.primary.kill();
        db.replica.promote();
        let promoted = killed.elapsed();
        let status = s
            .wait_exit(30)
            .expect("the server exits without its journal");
        assert!(!status.success(), "{status:?}");
        let exited = killed.elapsed();
        let starts = s.restart_until_served(60);
        let served = killed.elapsed();
        let failed = submitter.join().unwrap();
        (failed, killed, [promoted, exited, served], starts)
    });
    let acked = acked.into_inner().unwrap();
    assert_eq!(acked.len(), JOBS);
    assert_eq!(s.url, url, "served again on the same address");
    let first_after = acked
        .iter()
        .map(|a| a.2)
        .filter(|&t| t > killed)
        .min()
        .expect("acknowledged after the kill")
        - killed;
    println!(
        "kill -9 of the primary: the replica promoted after {} ms, the server exited by {} ms, served again after {} ms ({} start(s)), first acknowledgement after {} ms; {failed} submission attempt(s) failed",
        times[0].as_millis(),
        times[1].as_millis(),
        times[2].as_millis(),
        starts,
        first_after.as_millis()
    );
    assert!(s.log().contains("fatal"), "{}", s.log());
    // Every acknowledged submission is there under its name and ends.
    for &(i, id, _) in &acked {
        let j = s.wait_ended(id, 180);
        assert_eq!(j["name"], format!("sub-{i}"), "{j}");
        assert_eq!(j["state"], "finished", "{j}");
    }
    // Each passed the barrier once; none twice (a submission whose answer was lost may have
    // been committed too: it runs once, like the others).
    let lines = |file: &str| {
        let text = std::fs::read_to_string(marks.join(file)).unwrap_or_default();
        let mut n: BTreeMap<String, usize> = BTreeMap::new();
        for l in text.lines() {
            *n.entry(l.to_string()).or_default() += 1;
        }
        n
    };
    let started = lines("starts");
    assert!(
        started.values().all(|&n| n == 1),
        "past the barrier twice: {started:?}"
    );
    for &(_, id, _) in &acked {
        assert!(started.contains_key(&format!("{id}.0")), "{id} never ran");
    }
    // A launch made while its `launched` entry was not yet on the replica (an entry the
    // server commits without waiting, as it tells no one of it) is not known after the
    // fail-over: it is cancelled by its name and its component placed again, as after any
    // crash in that window; it never reached the barrier.
    let tries = lines("tries");
    assert!(tries.values().all(|&n| n <= 2), "{tries:?}");
    let again: Vec<&String> = tries
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(c, _)| c)
        .collect();
    println!("components launched again before their barrier: {again:?}");
    println!(
        "{} jobs started once, {} of them acknowledged",
        started.len(),
        acked.len()
    );
}
