//! Active and standby servers on one PostgreSQL journal (issue 32, item 2), end to end
//! against a throwaway cluster, on loopback: two `coalloc serve` on one database; the
//! standby answers 503 naming the leader; the leader killed with `kill -9` while a job
//! runs, and the standby takes over within 5 s (the time is printed) and sees the job to
//! its end, started once; then a third server stands by, the second is frozen (SIGSTOP)
//! past its lease and the third takes over, and once thawed (SIGCONT) the deposed one writes
//! not a single journal entry under its epoch and exits. Skipped without PostgreSQL's
//! binaries unless COALLOC_REQUIRE_POSTGRES=1 (scripts/test.sh).

mod common;

use coalloc_testkit::postgres::Cluster;
use coalloc_testkit::server::{
    assert_started_once, barrier_component, job, three_clusters, Server,
};
use common::COALLOC;
use std::path::Path;
use std::time::{Duration, Instant};

/// Poll `s` (a standby) until it answers for job `id` as the leader: how long that took
/// from `since`. Panics after 20 s.
fn taken_over(s: &Server, id: u64, since: Instant) -> Duration {
    loop {
        let (code, v) = s.call("GET", &format!("/v1/jobs/{id}"), &s.token, None);
        if code == 200 {
            return since.elapsed();
        }
        assert_eq!(code, 503, "{v}");
        assert!(
            since.elapsed() < Duration::from_secs(20),
            "no takeover: {v}\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A standby's answer: 503 naming `leader`.
fn assert_standby_of(s: &Server, leader: &Server) {
    let (code, v) = s.call("GET", "/v1/jobs", &s.token, None);
    assert_eq!(
        (code, v["leader"].as_str()),
        (503, Some(leader.url.as_str())),
        "{v}"
    );
    let e = v["error"].as_str().unwrap();
    assert!(
        e.starts_with(&format!(
            "this server is a standby; the leader is {}",
            leader.url
        )),
        "{e}"
    );
    let (code, _) = s.call("GET", "/v1/health", &s.token, None);
    assert_eq!(
        code, 503,
        "a standby is not healthy: load balancers turn to the leader"
    );
}

/// `coalloc status ID` with `COALLOC_URL` listing `urls` (the CLI follows the leader):
/// whether it succeeded, and what it printed.
fn status_via(urls: &[&str], token: &str, id: u64) -> (bool, String) {
    let out = std::process::Command::new(COALLOC)
        .args(["status", &id.to_string(), "--state-dir", "/nonexistent"])
        .env("COALLOC_URL", urls.join(","))
        .env("COALLOC_TOKEN", token)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// A job whose one component writes `JOB.COMPONENT` into `dir/starts`, checks in at the
/// barrier, writes `dir/passed`, runs `secs` seconds and writes `JOB` into `dir/ends`.
fn marked(dir: &Path, secs: u32) -> serde_json::Value {
    let d = dir.display();
    job(vec![barrier_component(
        COALLOC,
        1,
        &format!("echo $COALLOC_JOB_ID.$COALLOC_COMPONENT >> {d}/starts;"),
        &format!("touch {d}/passed; sleep {secs}; echo $COALLOC_JOB_ID >> {d}/ends"),
    )])
}

#[test]
fn a_standby_takes_over_from_a_dead_leader_and_a_deposed_one_writes_nothing() {
    let Some(pg) = Cluster::start("standby") else {
        return;
    };
    let url = pg.create_db("coalloc");
    // No snapshots: the journal keeps every entry, so its rows tell who wrote what.
    let config = three_clusters([4, 4, 4], "").replacen(
        "[server]\n",
        &format!("[server]\njournal = \"{url}\"\nsnapshot_every = 0\n"),
        1,
    );
    let mut a = Server::start(COALLOC, "pg-lead-a", &config);
    let mut b = Server::standby_of(&a, "pg-lead-b");
    // The standby waits, answering 503 with the leader's address; it schedules nothing.
    let t = Instant::now();
    while !b.log().contains("standby on") {
        assert!(t.elapsed() < Duration::from_secs(20), "{}", b.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_standby_of(&b, &a);
    // The leader started twice on its own state directory is refused (it would take its
    // own lease at once, as a restart does).
    let e = a.serve_refused();
    assert!(e.contains("another server answers on this socket"), "{e}");
    assert_eq!(pg.psql("coalloc", "SELECT epoch FROM lease"), "1");

    // A job runs on the leader; the leader dies with it past the barrier.
    let marks = a.dir.parent().unwrap().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let id = a.submit(&marked(&marks, 4));
    let t = Instant::now();
    while !marks.join("passed").exists() {
        assert!(t.elapsed() < Duration::from_secs(30), "{}", a.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    // The CLI, given both servers, talks to the leader whichever comes first; given the
    // standby alone, it says who leads.
    let (ok, text) = status_via(&[&b.url, &a.url], &a.token, id);
    assert!(ok && text.contains("running"), "{text}");
    let (ok, text) = status_via(&[&b.url], &a.token, id);
    assert!(
        !ok && text.contains(&format!(
            "this server is a standby; the leader is {}",
            a.url
        )),
        "{text}"
    );
    // On the standby's host, `coalloc` finds it by its state directory and hears the same.
    let out = b.cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && text.contains(&format!("the leader is {}", a.url)),
        "{text}"
    );
    let killed = Instant::now();
    a.kill();
    let first = taken_over(&b, id, killed);
    println!(
        "takeover after kill -9 of the leader: {} ms",
        first.as_millis()
    );
    assert!(
        first < Duration::from_secs(5),
        "took {first:?}\n{}",
        b.log()
    );
    b.wait_leading(5);
    assert_eq!(pg.psql("coalloc", "SELECT epoch FROM lease"), "2");
    let (ok, text) = status_via(&[&a.url, &b.url], &a.token, id);
    assert!(ok, "{text}");
    // The job it adopted ends, started once; and it schedules what comes next.
    assert_eq!(b.wait_ended(id, 60)["state"], "finished", "{}", b.log());
    let next = b.submit(&marked(&marks, 0));
    assert_eq!(b.wait_ended(next, 60)["state"], "finished");
    assert_started_once(&marks.join("starts"), &[id, next], 1);
    let ends = std::fs::read_to_string(marks.join("ends")).unwrap();
    assert_eq!(ends, format!("{id}\n{next}\n"));
    assert!(b.log().contains("taking over"), "{}", b.log());

    // A third server stands by; the leader is frozen past its lease and the third takes
    // over.
    let mut c = Server::standby_of(&b, "pg-lead-c");
    let t = Instant::now();
    while !c.log().contains("standby on") {
        assert!(t.elapsed() < Duration::from_secs(20), "{}", c.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_standby_of(&c, &b);
    let frozen = Instant::now();
    b.signal(libc::SIGSTOP);
    let second = taken_over(&c, next, frozen);
    println!(
        "takeover from a frozen (SIGSTOP) leader: {} ms",
        second.as_millis()
    );
    assert!(
        second < Duration::from_secs(5),
        "took {second:?}\n{}",
        c.log()
    );
    c.wait_leading(5);
    assert_eq!(pg.psql("coalloc", "SELECT epoch FROM lease"), "3");
    let by_epoch = || {
        pg.psql(
            "coalloc",
            "SELECT string_agg(epoch || ':' || n || ':' || last, ',' ORDER BY epoch)
             FROM (SELECT epoch, count(*) AS n, max(seq) AS last FROM journal GROUP BY epoch) e",
        )
    };
    let before = by_epoch();
    // A submission waits for the frozen one; thawed, it learns it is deposed, acknowledges
    // nothing, writes nothing and exits.
    let submitted = std::thread::scope(|scope| {
        let late = scope.spawn(|| {
            let agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(20)))
                .build()
                .new_agent();
            // Its status, or none when the connection ended unanswered.
            agent
                .post(format!("{}/v1/jobs", b.url))
                .header("Authorization", &format!("Bearer {}", b.token))
                .send(marked(&marks, 0).to_string().as_str())
                .map(|r| r.status().as_u16())
                .ok()
        });
        std::thread::sleep(Duration::from_millis(500));
        b.signal(libc::SIGCONT);
        late.join().unwrap()
    });
    let status = b.wait_exit(15).expect("the deposed leader exits");
    assert!(!status.success(), "{status:?}");
    assert!(b.log().contains("deposed"), "{}", b.log());
    assert_ne!(submitted, Some(201), "a deposed leader acknowledged a job");
    let after = by_epoch();
    let epoch2 = |s: &str| {
        s.split(',')
            .find(|e| e.starts_with("2:"))
            .map(str::to_string)
    };
    assert_eq!(
        epoch2(&after),
        epoch2(&before),
        "epoch 2's entries: {after}"
    );
    // The third leads on.
    let last = c.submit(&marked(&marks, 0));
    assert_eq!(c.wait_ended(last, 60)["state"], "finished", "{}", c.log());
    assert_started_once(&marks.join("starts"), &[id, next, last], 1);
    let after = by_epoch();
    assert_eq!(
        pg.psql(
            "coalloc",
            "SELECT count(*) FROM journal
             WHERE epoch < 3 AND seq > (SELECT min(seq) FROM journal WHERE epoch = 3)"
        ),
        "0",
        "no entry of an old epoch after the new one's first: {after}"
    );
    println!("journal rows by epoch (epoch:rows:last seq): {after}");
    c.terminate(Duration::from_secs(10));
    assert!(c.log().contains("lease released"), "{}", c.log());
}
