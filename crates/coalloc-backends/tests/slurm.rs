//! The Slurm backend against real Slurm clusters: the rig of scripts/slurm/ (three
//! independent clusters on loopback). Skipped, with a line on stderr, unless
//! `COALLOC_SLURM_RIG` names the rig's base directory (up.sh's BASE_DIR); each cluster's
//! `slurm.conf` is read from `$COALLOC_SLURM_RIG/clusters.tsv`. scripts/slurm/test.sh brings
//! the rig up, runs these, and takes it down.
//!
//! The tests share the clusters. `load_*` needs a quiet cluster, so it takes a write lock
//! that every other test takes for reading.

use coalloc_backends::slurm::preempt::Preempt;
use coalloc_backends::slurm::{Launch, SlurmCluster, SlurmConfig};
use coalloc_backends::{Backend, BackendError, RemoteState, SiteLoad};
use coalloc_testkit::backend::{request, shared, state, until_final, until_running, QUIET};
use coalloc_testkit::rig::slurm::{
    assert_bad_requests_are_rejected, assert_failures_keep_their_exit_codes,
    assert_unrecorded_submission_is_cancelled, quiet_load, Rig,
};
use std::thread;
use std::time::{Duration, Instant};

/// A fresh folder for one test's output files, under `target/tmp/slurm/`.
fn out_dir(test: &str) -> std::path::PathBuf {
    coalloc_testkit::backend::out_dir(env!("CARGO_TARGET_TMPDIR"), "slurm", test)
}

#[test]
fn two_processes_run_with_their_ranks_and_finish() {
    let Some(rig) = Rig::get("two_processes_run_with_their_ranks_and_finish") else {
        return;
    };
    let _g = shared();
    let (b, dir) = (rig.backend(0), out_dir("ranks"));
    let mut r = request(
        &dir,
        1,
        2,
        2,
        "/bin/sh",
        &["-c", "echo $COALLOC_LOCAL_RANK $COALLOC_RANK; sleep 1"],
    );
    // Output into a directory that does not exist yet: the backend makes it.
    r.stdout = dir.join("new/sub/L1.out");
    let t0 = Instant::now();
    let id = b.submit(&r).unwrap();
    let seen = until_final(&b, &id, Duration::from_secs(20));
    eprintln!("{}: job {id}: {seen:?} in {:?}", rig.name(0), t0.elapsed());
    assert!(
        matches!(seen[0], RemoteState::Queued | RemoteState::Running),
        "{seen:?}"
    );
    assert!(seen.contains(&RemoteState::Running), "{seen:?}");
    assert_eq!(seen.last(), Some(&RemoteState::Finished));
    let text = std::fs::read_to_string(&r.stdout).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort();
    assert_eq!(lines, ["0 10", "1 11"]);
    // The job name and CPUs as Slurm has them.
    let line = rig.slurm(0, "squeue", &["-h", "-t", "all", "-j", &id, "-o", "%j|%C"]);
    assert_eq!(line, "coalloc-J1-c0-L1|2");
}

#[test]
fn a_failing_command_fails_with_its_exit_code() {
    let Some(rig) = Rig::get("a_failing_command_fails_with_its_exit_code") else {
        return;
    };
    let _g = shared();
    let (b, dir) = (rig.backend(1), out_dir("failing"));
    // Launches 2 (exit 3) and 3 (a missing executable: the shell's 127).
    assert_failures_keep_their_exit_codes(&b, &dir, 2);
}

#[test]
fn cancel_removes_a_running_job() {
    let Some(rig) = Rig::get("cancel_removes_a_running_job") else {
        return;
    };
    let _g = shared();
    let (b, dir) = (rig.backend(2), out_dir("cancel"));
    let id = b
        .submit(&request(&dir, 4, 1, 1, "/bin/sleep", &["60"]))
        .unwrap();
    let latency = until_running(&b, &id);
    eprintln!("{}: sbatch to RUNNING {latency:?}", rig.name(2));
    let t0 = Instant::now();
    b.cancel(&id).unwrap();
    rig.until_gone_from_squeue(2, &id);
    eprintln!(
        "{}: cancel to gone from squeue {:?}",
        rig.name(2),
        t0.elapsed()
    );
    match state(&b, &id) {
        // Cancelled at the site: the site's side of the failure classes (Lost).
        RemoteState::Lost(why) => assert!(why.starts_with("CANCELLED"), "{why}"),
        other => panic!("expected Lost(CANCELLED), got {other:?}"),
    }
    b.cancel(&id).unwrap(); // again, after the end: not an error
}

#[test]
fn unknown_ids_are_unknown() {
    let Some(rig) = Rig::get("unknown_ids_are_unknown") else {
        return;
    };
    let _g = shared();
    let (b, dir) = (rig.backend(0), out_dir("unknown"));
    // A single unknown id makes squeue fail: the backend falls back to scontrol.
    assert_eq!(b.query(&["987654".into()]).unwrap(), [RemoteState::Unknown]);
    let id = b.submit(&request(&dir, 5, 1, 1, "/bin/true", &[])).unwrap();
    until_final(&b, &id, Duration::from_secs(20));
    let ids = ["987654".to_string(), id.clone(), "garbage".into(), id];
    let got = b.query(&ids).unwrap();
    use RemoteState::*;
    assert_eq!(got, [Unknown, Finished, Unknown, Finished]);
}

#[test]
fn oversize_and_malformed_requests_are_rejected() {
    let Some(rig) = Rig::get("oversize_and_malformed_requests_are_rejected") else {
        return;
    };
    let _g = shared();
    let (b, dir) = (rig.backend(0), out_dir("rejected"));
    assert_bad_requests_are_rejected(&b, &dir, 6);
}

#[test]
fn a_submission_whose_id_was_never_recorded_is_cancelled_by_its_name() {
    let Some(rig) = Rig::get("a_submission_whose_id_was_never_recorded_is_cancelled_by_its_name")
    else {
        return;
    };
    let _g = shared();
    // With a server's tag in the job names, as `coalloc serve` runs it.
    let b = SlurmCluster::new(SlurmConfig {
        name_tag: Some("5e0a11c2".into()),
        ..rig.backend(1).config().clone()
    });
    let dir = out_dir("unrecorded");
    assert_unrecorded_submission_is_cancelled(&rig, 1, &b, &dir, 41);
}

#[test]
fn a_dead_controller_is_unavailable_within_the_timeout() {
    let Some(rig) = Rig::get("a_dead_controller_is_unavailable_within_the_timeout") else {
        return;
    };
    let dir = out_dir("dead");
    let b = rig.dead_cluster(&dir, Launch::Batch);
    let t0 = Instant::now();
    let e = b.load().unwrap_err();
    assert!(matches!(e, BackendError::Unavailable(_)), "{e}");
    let e = b
        .submit(&request(&dir, 8, 1, 1, "/bin/true", &[]))
        .unwrap_err();
    assert!(matches!(e, BackendError::Unavailable(_)), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(6), "{:?}", t0.elapsed());
    eprintln!(
        "dead controller: {e} after {:?} for two calls",
        t0.elapsed()
    );
}

#[test]
fn three_clusters_in_parallel() {
    let Some(rig) = Rig::get("three_clusters_in_parallel") else {
        return;
    };
    let _g = shared();
    let dir = out_dir("parallel");
    let n = rig.clusters.len().min(3);
    let t0 = Instant::now();
    thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (b, dir, rig) = (rig.backend(i), &dir, &rig);
                s.spawn(move || {
                    let r = request(
                        dir,
                        10 + i as u64,
                        2,
                        1,
                        "/bin/sh",
                        &["-c", "echo $SLURM_CLUSTER_NAME; sleep 1"],
                    );
                    let id = b.submit(&r).unwrap();
                    let running = until_running(&b, &id);
                    let seen = until_final(&b, &id, Duration::from_secs(20));
                    assert_eq!(seen.last(), Some(&RemoteState::Finished), "{}", rig.name(i));
                    assert_eq!(
                        std::fs::read_to_string(&r.stdout).unwrap().trim(),
                        rig.name(i)
                    );
                    let load = b.load().unwrap();
                    assert!(load.total > 0 && load.idle <= load.total, "{load:?}");
                    running
                })
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            let running = h.join().unwrap();
            eprintln!("{}: sbatch to RUNNING {running:?}", rig.name(i));
        }
    });
    eprintln!("{n} clusters, submit to all finished: {:?}", t0.elapsed());
}

#[test]
fn load_counts_other_users_jobs() {
    let Some(rig) = Rig::get("load_counts_other_users_jobs") else {
        return;
    };
    let _quiet = QUIET.write().unwrap_or_else(|e| e.into_inner());
    let i = 1;
    let (b, dir) = (rig.backend(i), out_dir("load"));
    let before = quiet_load(&rig, i, &b);
    assert_eq!(before.other, 0, "{before:?}");
    // Someone else's 5-CPU job, straight through sbatch.
    let foreign = rig.foreign_job(i, "5", 30);
    let with_foreign = b.load().unwrap();
    // And a 3-CPU job of ours.
    let ours = b
        .submit(&request(&dir, 20, 3, 1, "/bin/sleep", &["30"]))
        .unwrap();
    until_running(&b, &ours);
    let with_both = b.load().unwrap();
    rig.slurm(i, "scancel", &[&foreign]);
    b.cancel(&ours).unwrap();
    eprintln!("load: quiet {before:?}, +foreign 5 {with_foreign:?}, +ours 3 {with_both:?}");
    assert_eq!(
        with_foreign,
        SiteLoad {
            idle: before.idle - 5,
            total: before.total,
            other: 5
        }
    );
    assert_eq!(
        with_both,
        SiteLoad {
            idle: before.idle - 8,
            total: before.total,
            other: 5
        }
    );
}

/// GP (seed 001 §2.2): preempting local jobs of the preemptible partition, newest first,
/// requeued; coalloc's own job is left alone; without a preemptible partition, refused.
#[test]
fn kill_local_requeues_the_newest_local_jobs_of_the_preemptible_partition() {
    let Some(rig) = Rig::get("kill_local") else {
        return;
    };
    let _quiet = QUIET.write().unwrap_or_else(|e| e.into_inner());
    let i = 1;
    let dir = out_dir("kill_local");
    let plain = rig.backend(i);
    let refused = plain.kill_local(4).unwrap_err().to_string();
    assert!(
        refused.contains("no preemptible partition or QOS"),
        "{refused}"
    );
    let b = SlurmCluster::new(SlurmConfig {
        preempt: Some(Preempt {
            partition: Some("main".into()),
            qos: None,
            requeue: true,
        }),
        ..plain.config().clone()
    });
    let older = rig.foreign_job(i, "4", 120);
    thread::sleep(Duration::from_millis(1100));
    let newer = rig.foreign_job(i, "3", 120);
    let ours = b
        .submit(&request(&dir, 30, 2, 1, "/bin/sleep", &["120"]))
        .unwrap();
    until_running(&b, &ours);
    // 2 CPUs asked: the newest local job (3 CPUs) goes, the older one and ours stay.
    assert_eq!(b.kill_local(2).unwrap(), 3);
    let state = |id: &str| rig.slurm(i, "squeue", &["-h", "-j", id, "-o", "%T"]);
    let requeued = state(&newer);
    let (older_state, ours_state) = (state(&older), state(&ours));
    rig.slurm(i, "scancel", &[&older, &newer]);
    b.cancel(&ours).unwrap();
    assert_ne!(requeued, "RUNNING", "the newer local job was requeued");
    assert_eq!(
        (older_state.as_str(), ours_state.as_str()),
        ("RUNNING", "RUNNING")
    );
}
