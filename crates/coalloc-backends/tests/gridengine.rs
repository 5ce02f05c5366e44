//! The Grid Engine backend against real cells: the rig of scripts/gridengine/ (two cells
//! on loopback). Skipped unless `COALLOC_GE_RIG` names the rig's base directory (failing
//! instead with `COALLOC_REQUIRE_GE=1`):
//!
//! ```sh
//! scripts/gridengine/up.sh /tmp/coalloc-ge
//! COALLOC_GE_RIG=/tmp/coalloc-ge cargo test -p coalloc-backends --test gridengine
//! scripts/gridengine/down.sh /tmp/coalloc-ge
//! ```
//!
//! The tests share the cells; the one that crashes a host takes [`QUIET`] for writing.

use coalloc_backends::gridengine::{GridEngineCell, GridEngineConfig};
use coalloc_backends::{Backend, BackendError, RemoteState};
use coalloc_testkit::backend::{
    out_dir, request, shared, state, until_final, until_running, QUIET,
};
use coalloc_testkit::rig::gridengine::GeRig;
use std::time::{Duration, Instant};

fn dir(test: &str) -> std::path::PathBuf {
    out_dir(env!("CARGO_TARGET_TMPDIR"), "gridengine", test)
}

#[test]
fn two_slots_two_processes_run_with_their_ranks_and_finish() {
    let Some(rig) = GeRig::get("ge-ranks") else {
        return;
    };
    let _g = shared();
    let b = rig.backend(0);
    let d = dir("ranks");
    let r = request(
        &d,
        1,
        2,
        2,
        "/bin/sh",
        &[
            "-c",
            "echo rank=$COALLOC_RANK local=$COALLOC_LOCAL_RANK slots=$NSLOTS",
        ],
    );
    let id = b.submit(&r).unwrap();
    let seen = until_final(&b, &id, Duration::from_secs(30));
    assert_eq!(seen.last(), Some(&RemoteState::Finished), "{seen:?}");
    let mut lines: Vec<String> = std::fs::read_to_string(&r.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        ["rank=10 local=0 slots=2", "rank=11 local=1 slots=2"]
    );
    // Its name carries the tag, as on Slurm.
    let acct = rig.ge(0, "qacct", &["-j", &id]);
    assert!(acct.contains("coalloc-test-J1-c0-L1"), "{acct}");
}

#[test]
fn failures_keep_their_exit_codes() {
    let Some(rig) = GeRig::get("ge-exit") else {
        return;
    };
    let _g = shared();
    let b = rig.backend(1);
    let d = dir("exit");
    let id = b
        .submit(&request(
            &d,
            1,
            2,
            2,
            "/bin/sh",
            &["-c", "[ $COALLOC_LOCAL_RANK = 1 ] && exit 3; exit 0"],
        ))
        .unwrap();
    let seen = until_final(&b, &id, Duration::from_secs(30));
    assert_eq!(
        seen.last(),
        Some(&RemoteState::Failed("exit code 3".into())),
        "{seen:?}"
    );
    let id = b
        .submit(&request(&d, 2, 1, 1, "/nonexistent/program", &[]))
        .unwrap();
    let seen = until_final(&b, &id, Duration::from_secs(30));
    assert_eq!(
        seen.last(),
        Some(&RemoteState::Failed("exit code 127".into())),
        "{seen:?}"
    );
}

#[test]
fn cancel_removes_a_running_job_and_unknown_ids_are_unknown() {
    let Some(rig) = GeRig::get("ge-cancel") else {
        return;
    };
    let _g = shared();
    let b = rig.backend(0);
    let d = dir("cancel");
    let r = request(
        &d,
        3,
        4,
        1,
        "/bin/sh",
        &["-c", "echo started; exec sleep 60"],
    );
    let id = b.submit(&r).unwrap();
    let waited = until_running(&b, &id);
    eprintln!("qsub to running through the backend: {waited:?}");
    b.cancel(&id).unwrap();
    let t0 = Instant::now();
    while rig
        .active_jobs(0)
        .iter()
        .any(|j| j.starts_with(&format!("{id} ")))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "job {id} still listed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(state(&b, &id).is_final());
    b.cancel(&id).unwrap(); // again: not an error
    assert_eq!(
        b.query(&["999999".into(), "x".into()]).unwrap(),
        vec![RemoteState::Unknown, RemoteState::Unknown]
    );
}

#[test]
fn bad_requests_are_refused_at_once() {
    let Some(rig) = GeRig::get("ge-bad") else {
        return;
    };
    let _g = shared();
    let b = rig.backend(1);
    let d = dir("bad");
    // More slots than the cell has: `-w e` makes the qmaster refuse it.
    let e = b
        .submit(&request(&d, 1, rig.cells[1].slots + 1, 1, "/bin/true", &[]))
        .unwrap_err();
    assert!(
        matches!(&e, BackendError::Rejected(m) if m.contains("no suitable queues")),
        "{e}"
    );
    // A parallel environment the site's settings name and the cell lacks: the site's
    // fault, not the job's (the component goes elsewhere).
    let nope = GridEngineCell::new(GridEngineConfig {
        pe: Some("nope".into()),
        ..b.config().clone()
    });
    let e = nope
        .submit(&request(&d, 2, 2, 1, "/bin/true", &[]))
        .unwrap_err();
    assert!(
        matches!(&e, BackendError::Unavailable(m) if m.contains("parallel environment")),
        "{e}"
    );
    let mut r = request(&d, 3, 1, 1, "/bin/true", &[]);
    r.environment.push(("BAD NAME".into(), "x".into()));
    assert!(matches!(b.submit(&r), Err(BackendError::Rejected(_))));
    assert!(
        rig.active_jobs(1)
            .iter()
            .all(|j| !j.contains("coalloc-test-J1")),
        "{:?}",
        rig.active_jobs(1)
    );
}

#[test]
fn a_submission_whose_id_was_never_recorded_is_cancelled_by_its_name() {
    let Some(rig) = GeRig::get("ge-unrecorded") else {
        return;
    };
    let _g = shared();
    let b = rig.backend(0);
    let d = dir("unrecorded");
    let mut r = request(&d, 41, 1, 1, "/bin/sh", &["-c", "exec sleep 60"]);
    r.job = 9;
    let id = b.submit(&r).unwrap();
    until_running(&b, &id);
    b.cancel_unrecorded(9, 0, 41).unwrap();
    let t0 = Instant::now();
    while rig
        .active_jobs(0)
        .iter()
        .any(|j| j.starts_with(&format!("{id} ")))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "job {id} still listed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    b.cancel_unrecorded(9, 0, 4100).unwrap(); // never submitted: no error
}

#[test]
fn a_dead_or_hung_qmaster_is_unavailable_within_the_timeout() {
    let Some(rig) = GeRig::get("ge-dead") else {
        return;
    };
    // A qmaster that accepts connections and never answers (a stopped one), and a port
    // where none listens (a dead one).
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for port in [hung.local_addr().unwrap().port(), free] {
        let b = GridEngineCell::new(GridEngineConfig {
            qmaster_port: Some(port),
            command_timeout: Duration::from_secs(2),
            ..rig.backend(0).config().clone()
        });
        let t0 = Instant::now();
        assert!(matches!(b.load(), Err(BackendError::Unavailable(_))));
        let e = b
            .submit(&request(&dir("dead"), 1, 1, 1, "/bin/true", &[]))
            .unwrap_err();
        assert!(
            matches!(e, BackendError::Unavailable(_)),
            "port {port}: {e}"
        );
        assert!(matches!(
            b.query(&["1".into()]),
            Err(BackendError::Unavailable(_))
        ));
        assert!(
            t0.elapsed() < Duration::from_secs(8),
            "port {port}: {:?}",
            t0.elapsed()
        );
    }
}

#[test]
fn load_counts_other_users_jobs() {
    let Some(rig) = GeRig::get("ge-load") else {
        return;
    };
    let _g = QUIET.write().unwrap_or_else(|e| e.into_inner());
    let b = rig.backend(1);
    rig.until_empty(1, Duration::from_secs(20));
    let quiet = b.load().unwrap();
    assert_eq!(quiet.total, rig.cells[1].slots);
    assert_eq!((quiet.idle, quiet.other), (quiet.total, 0));
    let other = rig.foreign_job(1, 5, 60);
    let mine = b
        .submit(&request(&dir("load"), 1, 3, 1, "/bin/sleep", &["60"]))
        .unwrap();
    until_running(&b, &mine);
    let t0 = Instant::now();
    let l = loop {
        let l = b.load().unwrap();
        if l.idle == quiet.total - 8 || t0.elapsed() > Duration::from_secs(10) {
            break l;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        (l.total, l.idle, l.other),
        (quiet.total, quiet.total - 8, 5)
    );
    rig.ge(1, "qdel", &["-f", &other]);
    b.cancel(&mine).unwrap();
    rig.until_empty(1, Duration::from_secs(20));
}

#[test]
fn an_execution_host_crash_fails_its_jobs_and_the_cell_recovers() {
    let Some(rig) = GeRig::get("ge-crash") else {
        return;
    };
    let _g = QUIET.write().unwrap_or_else(|e| e.into_inner());
    let b = rig.backend(1);
    let r = request(&dir("crash"), 1, 2, 1, "/bin/sleep", &["120"]);
    let id = b.submit(&r).unwrap();
    until_running(&b, &id);
    rig.crash_host(1);
    let t0 = Instant::now();
    let seen = until_final(&b, &id, Duration::from_secs(40));
    eprintln!("crash seen as failed after {:?}: {seen:?}", t0.elapsed());
    assert!(
        // The site's fault, not the job's (coalloc_core::scheduler::faults).
        matches!(seen.last(), Some(RemoteState::Lost(m)) if m.contains("state u")),
        "{seen:?}"
    );
    // The host's slots are not usable while it is silent.
    assert_eq!(b.load().unwrap().total, 0);
    b.cancel(&id).unwrap();
    rig.restore();
    rig.until_empty(1, Duration::from_secs(20));
    assert_eq!(b.load().unwrap().total, rig.cells[1].slots);
}
