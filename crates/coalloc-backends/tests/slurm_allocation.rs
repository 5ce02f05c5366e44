//! The Slurm backend's allocation launch (`launch = "allocation"`: `salloc` + `srun`,
//! detached) against the real clusters of the rig in scripts/slurm/; skipped like
//! tests/slurm.rs unless `COALLOC_SLURM_RIG` is set. Exit codes (0 and not), output and
//! ranks, a component started inside the request, cancel (nothing left in squeue, no client
//! process left), a wait in the queue while the CPUs are busy, a controller that is not there.

use coalloc_backends::slurm::alloc::client_log;
use coalloc_backends::slurm::Launch;
use coalloc_backends::{Backend, BackendError, RemoteState};
use coalloc_testkit::backend::{request, shared, state, until_final, until_running, QUIET};
use coalloc_testkit::rig::slurm::{
    assert_bad_requests_are_rejected, assert_failures_keep_their_exit_codes,
    assert_unrecorded_submission_is_cancelled, quiet_load, Rig,
};
use std::thread;
use std::time::{Duration, Instant};

/// Processes on this machine whose command line holds `needle` (read from /proc).
fn processes_with(needle: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(needle))
        .collect()
}

/// Waits until no process's command line holds `needle`.
fn until_no_process(needle: &str, limit: Duration) {
    let t0 = Instant::now();
    loop {
        let left = processes_with(needle);
        if left.is_empty() {
            return;
        }
        assert!(t0.elapsed() < limit, "still running: {left:?}");
        thread::sleep(Duration::from_millis(50));
    }
}

/// A fresh folder for one test's output files, under `target/tmp/slurm/`.
fn out_dir(test: &str) -> std::path::PathBuf {
    coalloc_testkit::backend::out_dir(env!("CARGO_TARGET_TMPDIR"), "slurm", test)
}

#[test]
fn an_allocation_runs_its_processes_and_ends_with_their_exit_code() {
    let Some(rig) = Rig::get("an_allocation_runs_its_processes_and_ends_with_their_exit_code")
    else {
        return;
    };
    let _g = shared();
    let (b, dir) = (rig.launching(0, Launch::Allocation), out_dir("alloc-exit"));
    // Exit 0: two processes with their ranks, output appended where asked.
    let mut r = request(
        &dir,
        101,
        2,
        2,
        "/bin/sh",
        &["-c", "echo $COALLOC_LOCAL_RANK $COALLOC_RANK; sleep 1"],
    );
    r.stdout = dir.join("new/sub/L101.out");
    let t0 = Instant::now();
    let id = b.submit(&r).unwrap();
    let submitted = t0.elapsed();
    let seen = until_final(&b, &id, Duration::from_secs(20));
    eprintln!(
        "{}: allocation {id} (submit returned after {submitted:?}): {seen:?} in {:?}",
        rig.name(0),
        t0.elapsed()
    );
    assert!(seen.contains(&RemoteState::Running), "{seen:?}");
    assert_eq!(seen.last(), Some(&RemoteState::Finished));
    let text = std::fs::read_to_string(&r.stdout).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort();
    assert_eq!(lines, ["0 10", "1 11"]);
    let line = rig.slurm(
        0,
        "squeue",
        &["-h", "-t", "all", "-j", &id, "-o", "%j|%C|%T"],
    );
    assert_eq!(line, "coalloc-J1-c0-L101|2|COMPLETED");
    let log = std::fs::read_to_string(client_log(&r)).unwrap();
    assert!(
        log.contains(&format!("Granted job allocation {id}")),
        "{log}"
    );
    // The script does not leak into the component's environment.
    let id = b
        .submit(&request(
            &dir,
            102,
            1,
            1,
            "/bin/sh",
            &["-c", "env | grep -c COALLOC_LAUNCH_SCRIPT; exit 0"],
        ))
        .unwrap();
    assert_eq!(
        until_final(&b, &id, Duration::from_secs(20)).last(),
        Some(&RemoteState::Finished)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("L102.out"))
            .unwrap()
            .trim(),
        "0"
    );

    // Exit 3 of one process (launch 103): FAILED with that code, as a batch job would; a
    // missing executable (104): the shell's 127.
    assert_failures_keep_their_exit_codes(&b, &dir, 103);
    // Every client has ended with its allocation.
    until_no_process("coalloc-J1-c0-L10", Duration::from_secs(10));
}

#[test]
fn an_allocation_runs_inside_the_request_and_cancel_leaves_nothing() {
    let Some(rig) = Rig::get("an_allocation_runs_inside_the_request_and_cancel_leaves_nothing")
    else {
        return;
    };
    let _g = shared();
    let (b, dir) = (
        rig.launching(2, Launch::Allocation),
        out_dir("alloc-cancel"),
    );
    let t0 = Instant::now();
    let id = b
        .submit(&request(&dir, 111, 1, 1, "/bin/sleep", &["60"]))
        .unwrap();
    let submitted = t0.elapsed();
    // Granted inside the request: already running when submit returns (no pass waited for).
    let first = state(&b, &id);
    let running = until_running(&b, &id) + submitted;
    eprintln!(
        "{}: allocation submit returned after {submitted:?}, then {first:?}; RUNNING after {running:?}",
        rig.name(2)
    );
    assert_eq!(first, RemoteState::Running);
    assert_eq!(processes_with("coalloc-J1-c0-L111").len(), 1, "one salloc");
    b.cancel(&id).unwrap();
    rig.until_gone_from_squeue(2, &id);
    match state(&b, &id) {
        // Cancelled at the site: the site's side of the failure classes (Lost).
        RemoteState::Lost(why) => assert!(why.starts_with("CANCELLED"), "{why}"),
        other => panic!("expected Lost(CANCELLED), got {other:?}"),
    }
    // salloc, srun and the step are gone too.
    until_no_process("coalloc-J1-c0-L111", Duration::from_secs(15));
    b.cancel(&id).unwrap();
}

#[test]
fn an_allocation_waits_in_the_queue_while_the_cpus_are_busy() {
    let Some(rig) = Rig::get("an_allocation_waits_in_the_queue_while_the_cpus_are_busy") else {
        return;
    };
    let _quiet = QUIET.write().unwrap_or_else(|e| e.into_inner());
    let i = 1;
    let (b, dir) = (rig.launching(i, Launch::Allocation), out_dir("alloc-queue"));
    let all = quiet_load(&rig, i, &b).total.to_string();
    // Someone else holds every CPU.
    let blocker = rig.foreign_job(i, &all, 60);
    // The request returns with the pending allocation's id; it runs once the CPUs are free.
    let t0 = Instant::now();
    let id = b
        .submit(&request(&dir, 121, 2, 1, "/bin/true", &[]))
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    thread::sleep(Duration::from_millis(300));
    assert_eq!(state(&b, &id), RemoteState::Queued);
    rig.slurm(i, "scancel", &[&blocker]);
    let seen = until_final(&b, &id, Duration::from_secs(30));
    assert_eq!(seen.last(), Some(&RemoteState::Finished), "{seen:?}");
    until_no_process("coalloc-J1-c0-L121", Duration::from_secs(10));
}

#[test]
fn an_allocation_whose_id_was_never_recorded_is_cancelled_by_its_name() {
    let Some(rig) = Rig::get("an_allocation_whose_id_was_never_recorded_is_cancelled_by_its_name")
    else {
        return;
    };
    let _g = shared();
    let (b, dir) = (
        rig.launching(1, Launch::Allocation),
        out_dir("alloc-unrecorded"),
    );
    assert_unrecorded_submission_is_cancelled(&rig, 1, &b, &dir, 141);
    // Its clients on this machine end with the allocation.
    until_no_process("coalloc-J1-c0-L141", Duration::from_secs(10));
}

#[test]
fn oversize_allocations_are_rejected_and_a_dead_controller_is_unavailable() {
    let Some(rig) =
        Rig::get("oversize_allocations_are_rejected_and_a_dead_controller_is_unavailable")
    else {
        return;
    };
    let dir = out_dir("alloc-reject");
    {
        let _g = shared();
        let b = rig.launching(0, Launch::Allocation);
        assert_bad_requests_are_rejected(&b, &dir, 131);
    }
    let b = rig.dead_cluster(&dir, Launch::Allocation);
    let t0 = Instant::now();
    let e = b
        .submit(&request(&dir, 133, 1, 1, "/bin/true", &[]))
        .unwrap_err();
    assert!(matches!(e, BackendError::Unavailable(_)), "{e}");
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "{e} after {:?}",
        t0.elapsed()
    );
    eprintln!("dead controller, allocation: {e} after {:?}", t0.elapsed());
    until_no_process("coalloc-J1-c0-L133", Duration::from_secs(5));
}
