//! `coalloc serve` on a PostgreSQL journal (issue 32, item 1), end to end against a
//! throwaway cluster: jobs submitted by four clients at once, the server killed with
//! `kill -9` in the middle of them, restarted from the database alone, and every job it
//! acknowledged is there (in memory or in the history), numbered densely, with the snapshot
//! and the history in the database and nothing of them in the state directory. Skipped
//! without PostgreSQL's binaries unless COALLOC_REQUIRE_POSTGRES=1 (scripts/test.sh).

mod common;

use coalloc_testkit::postgres::Cluster;
use coalloc_testkit::server::{barrier_component, job, three_clusters, Server};
use common::COALLOC;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A one-process job that ends once it has passed the barrier.
fn quick() -> serde_json::Value {
    job(vec![barrier_component(COALLOC, 1, "", "true")])
}

/// Submit `quick` jobs until the server stops answering; the numbers it acknowledged.
fn submitter(url: &str, token: &str, stop: &AtomicBool) -> Vec<u64> {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .new_agent();
    let body = quick().to_string();
    let mut acked = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let r = agent
            .post(format!("{url}/v1/jobs"))
            .header("Authorization", &format!("Bearer {token}"))
            .send(body.as_str());
        let Ok(mut r) = r else { break };
        let text = r.body_mut().read_to_string().unwrap_or_default();
        if r.status().as_u16() != 201 {
            break;
        }
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        acked.push(v["job"].as_u64().unwrap());
        // A steady stream, not a flood: the sites keep up and jobs end while it goes on.
        std::thread::sleep(Duration::from_millis(20));
    }
    acked
}

#[test]
fn a_server_on_postgres_killed_mid_stream_keeps_every_acknowledged_job() {
    let Some(pg) = Cluster::start("serve") else {
        return;
    };
    let url = pg.create_db("coalloc");
    let config = three_clusters([4, 4, 4], "").replacen(
        "[server]\n",
        &format!("[server]\njournal = \"{url}\"\nsnapshot_every = 50\nmin_job_age = \"500ms\"\n"),
        1,
    );
    let mut s = Server::start(COALLOC, "pg-journal", &config);
    let acked: Mutex<Vec<u64>> = Mutex::new(Vec::new());
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            let (u, t) = (s.url.clone(), s.token.clone());
            let (acked, stop) = (&acked, &stop);
            scope.spawn(move || {
                let mine = submitter(&u, &t, stop);
                acked.lock().unwrap().extend(mine);
            });
        }
        // Kill it once a snapshot is in the database and jobs keep coming.
        let t = Instant::now();
        loop {
            let snapshots = pg.psql("coalloc", "SELECT count(*) FROM snapshot");
            let ended = pg.psql("coalloc", "SELECT count(*) FROM history");
            if snapshots != "0" && ended != "0" {
                break;
            }
            if t.elapsed() > Duration::from_secs(120) {
                stop.store(true, Ordering::Relaxed);
                panic!("no snapshot or no history in the database:\n{}", s.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        s.kill();
        stop.store(true, Ordering::Relaxed);
    });
    let mut acked = acked.into_inner().unwrap();
    acked.sort_unstable();
    let n = acked.len() as u64;
    assert!(n >= 20, "{n} jobs acknowledged");
    assert_eq!(
        acked,
        (1..=n).collect::<Vec<_>>(),
        "numbered densely, each once"
    );
    let state = s.dir.clone();
    assert!(!state.join("journal.sqlite").exists(), "no SQLite journal");
    assert!(!state.join("snapshot.bin").exists(), "no snapshot file");

    s.restart();
    // Every acknowledged job is there, in memory or in the history, and runs to its end.
    for id in 1..=n {
        let (code, j) = s.call("GET", &format!("/v1/jobs/{id}"), &s.token, None);
        assert_eq!(code, 200, "job {id} after the restart: {j}\n{}", s.log());
    }
    assert_eq!(s.wait_ended(1, 60)["state"], "finished");
    // The history answers from the database too.
    let h = s.get("/v1/history?limit=10000");
    assert!(!h["jobs"].as_array().unwrap().is_empty(), "{h}");
    // Numbering goes on after the last acknowledged one (or after one that was committed
    // but not yet answered when the server died).
    let next = s.submit(&quick());
    assert!(next > n, "{next} after {n}");
    assert!(s.log().contains("snapshot read"), "{}", s.log());
    // The restart took the lease: its entries carry the next fencing number.
    assert_eq!(pg.psql("coalloc", "SELECT epoch FROM lease"), "2");
    assert_eq!(pg.psql("coalloc", "SELECT max(epoch) FROM journal"), "2");
    s.terminate(Duration::from_secs(10));
}
