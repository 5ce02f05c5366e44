//! What the tests of the resource-manager backends share, whichever the resource manager:
//! a lock that keeps a cluster quiet for the tests that need it, a folder for a test's
//! output files, requests, and polling until a job runs or ends.

use coalloc_backends::{Backend, RemoteState, SubmitRequest};
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard};
use std::thread;
use std::time::{Duration, Instant};

/// The clusters are shared by the tests of one binary: one that needs a quiet cluster takes
/// this for writing, every other test for reading ([`shared`]).
pub static QUIET: RwLock<()> = RwLock::new(());

/// A read hold on [`QUIET`], which most tests take.
pub fn shared() -> RwLockReadGuard<'static, ()> {
    QUIET.read().unwrap_or_else(|e| e.into_inner())
}

/// A fresh directory for one test's output files: `TMP/group/test-PID`, where `tmp` is the
/// test's `env!("CARGO_TARGET_TMPDIR")` (which only a test or benchmark target can name).
pub fn out_dir(tmp: &str, group: &str, test: &str) -> PathBuf {
    let d = Path::new(tmp)
        .join(group)
        .join(format!("{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A request for launch `launch` of job 1's component 0: `count` processors, `processes`
/// processes of `exe args` in `dir`, whose output goes to `dir/L{launch}.out` and `.err`.
pub fn request(
    dir: &Path,
    launch: u64,
    count: u32,
    processes: u32,
    exe: &str,
    args: &[&str],
) -> SubmitRequest {
    SubmitRequest {
        launch,
        job: 1,
        component: 0,
        count,
        processes,
        executable: exe.into(),
        arguments: args.iter().map(|a| a.to_string()).collect(),
        environment: vec![("COALLOC_RANK_OFFSET".into(), "10".into())],
        directory: Some(dir.to_path_buf()),
        wall_time_ms: Some(120_000),
        stdout: dir.join(format!("L{launch}.out")),
        stderr: dir.join(format!("L{launch}.err")),
        owner: None,
        reservation: None,
    }
}

/// The backend's word on job `id`.
pub fn state(b: &dyn Backend, id: &str) -> RemoteState {
    b.query(&[id.to_string()]).unwrap().remove(0)
}

/// Polls until the job's state is final; returns every distinct state seen, in order.
pub fn until_final(b: &dyn Backend, id: &str, limit: Duration) -> Vec<RemoteState> {
    let t0 = Instant::now();
    let mut seen: Vec<RemoteState> = Vec::new();
    loop {
        let s = state(b, id);
        if seen.last() != Some(&s) {
            seen.push(s.clone());
        }
        if s.is_final() {
            return seen;
        }
        assert!(
            t0.elapsed() < limit,
            "job {id} not final after {limit:?}: {seen:?}"
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// Polls until the job runs; returns how long that took.
pub fn until_running(b: &dyn Backend, id: &str) -> Duration {
    let t0 = Instant::now();
    loop {
        match state(b, id) {
            RemoteState::Running => return t0.elapsed(),
            RemoteState::Queued => {}
            other => panic!("job {id} is {other:?}, expected it to run"),
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "job {id} did not start"
        );
        thread::sleep(Duration::from_millis(20));
    }
}
