//! The local backend with real processes: running, failing, queueing, cancelling, wall
//! times, the background load, and adoption by a new cluster on the same directory. Every
//! test runs twice: with each launch under its own `/bin/sh` wrapper, and through the
//! cluster's long-lived launcher (the `coalloc-launcher` program of this crate).

use coalloc_backends::local::{
    recorded_launches, recorded_pgid, remote_id, LauncherCommand, LocalCluster, LocalConfig,
};
use coalloc_backends::{Backend, BackendError, RemoteState, SubmitRequest};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How the cluster of a test starts its launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Wrapper,
    Launcher,
}

/// `name` as two tests, one per [`Mode`].
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        $(mod $name {
            #[test]
            fn wrapper() {
                super::$name(super::Mode::Wrapper)
            }
            #[test]
            fn launcher() {
                super::$name(super::Mode::Launcher)
            }
        })*
    };
}

fn temp_dir(m: Mode, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("coalloc-local-{name}-{m:?}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn launcher(m: Mode) -> Option<LauncherCommand> {
    (m == Mode::Launcher).then(|| LauncherCommand {
        program: env!("CARGO_BIN_EXE_coalloc-launcher").into(),
        args: vec![],
    })
}

fn cluster(m: Mode, dir: &Path, slots: u32) -> LocalCluster {
    LocalCluster::new(LocalConfig {
        name: "test".into(),
        slots,
        initial_slots: None,
        work_dir: dir.join("site"),
        background: None,
        launcher: launcher(m),
    })
    .unwrap()
}

fn sh(dir: &Path, launch: u64, count: u32, processes: u32, script: &str) -> SubmitRequest {
    SubmitRequest {
        launch,
        job: 1,
        component: 0,
        count,
        processes,
        executable: "/bin/sh".into(),
        arguments: vec!["-c".into(), script.into()],
        environment: vec![("COALLOC_RANK_OFFSET".into(), "10".into())],
        directory: None,
        wall_time_ms: None,
        stdout: dir.join(format!("out/{launch}.out")),
        stderr: dir.join(format!("out/{launch}.err")),
        owner: None,
        reservation: None,
    }
}

fn state(c: &LocalCluster, launch: u64) -> RemoteState {
    c.query(&[remote_id(launch)]).unwrap().remove(0)
}

fn wait_final(c: &LocalCluster, launch: u64) -> RemoteState {
    let t = Instant::now();
    loop {
        let s = state(c, launch);
        if s.is_final() {
            return s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "launch {launch} still {s:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn pgid(dir: &Path, launch: u64) -> i32 {
    recorded_pgid(&dir.join("site"), launch).unwrap()
}

fn group_alive(pgid: i32) -> bool {
    unsafe { libc::kill(-pgid, 0) == 0 }
}

/// Killed processes are reaped by init a moment after the kill.
fn group_gone(pgid: i32) -> bool {
    let t = Instant::now();
    while group_alive(pgid) {
        if t.elapsed() > Duration::from_secs(2) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

fn processes_run_with_their_ranks_and_finish(m: Mode) {
    let d = temp_dir(m, "run");
    let c = cluster(m, &d, 8);
    let id = c
        .submit(&sh(
            &d,
            1,
            4,
            3,
            "echo rank $COALLOC_LOCAL_RANK of $COALLOC_RANK",
        ))
        .unwrap();
    assert_eq!(id, "L1");
    assert_eq!(wait_final(&c, 1), RemoteState::Finished);
    let out = std::fs::read_to_string(d.join("out/1.out")).unwrap();
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(lines, ["rank 0 of 10", "rank 1 of 11", "rank 2 of 12"]);
    assert_eq!(c.busy_slots(), 0);
    assert_eq!(c.load().unwrap().idle, 8);
    assert_eq!(recorded_launches(&d.join("site")), [1]);
    // A launch creates no file of its own in the work directory: two logs are appended to.
    let mut files: Vec<String> = std::fs::read_dir(d.join("site"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let expected: &[&str] = match m {
        Mode::Wrapper => &["exits", "launches.jsonl"],
        Mode::Launcher => &[
            "exits",
            "launcher.lock",
            "launcher.log",
            "launcher.sock",
            "launches.jsonl",
        ],
    };
    assert_eq!(files, expected);
}

fn processes_start_in_the_folder_of_their_output_unless_told_otherwise(m: Mode) {
    let d = temp_dir(m, "cwd");
    let c = cluster(m, &d, 8);
    c.submit(&sh(&d, 1, 1, 1, "pwd")).unwrap();
    let mut other = sh(&d, 2, 1, 1, "pwd");
    other.directory = Some("/".into());
    c.submit(&other).unwrap();
    assert_eq!(wait_final(&c, 1), RemoteState::Finished);
    assert_eq!(wait_final(&c, 2), RemoteState::Finished);
    let out = std::fs::read_to_string(d.join("out/1.out")).unwrap();
    assert_eq!(Path::new(out.trim()), d.join("out").canonicalize().unwrap());
    assert_eq!(std::fs::read_to_string(d.join("out/2.out")).unwrap(), "/\n");
}

fn a_missing_executable_or_an_oversize_request_is_rejected_before_anything_starts(m: Mode) {
    let d = temp_dir(m, "reject");
    let c = cluster(m, &d, 8);
    let mut r = sh(&d, 1, 2, 1, "true");
    r.executable = "/no/such/program".into();
    assert!(matches!(c.submit(&r), Err(BackendError::Rejected(m)) if m.contains("not found")));
    r.executable = "no-such-program-on-path".into();
    assert!(matches!(c.submit(&r), Err(BackendError::Rejected(_))));
    let big = sh(&d, 2, 9, 1, "true");
    assert!(matches!(c.submit(&big), Err(BackendError::Rejected(m)) if m.contains("9 processors")));
    assert!(recorded_launches(&d.join("site")).is_empty());
    assert_eq!(state(&c, 1), RemoteState::Unknown);
}

fn a_failing_process_fails_the_component_with_its_code(m: Mode) {
    let d = temp_dir(m, "fail");
    let c = cluster(m, &d, 8);
    c.submit(&sh(
        &d,
        1,
        2,
        2,
        "[ $COALLOC_LOCAL_RANK = 1 ] && exit 3; exit 0",
    ))
    .unwrap();
    assert_eq!(
        wait_final(&c, 1),
        RemoteState::Failed("process 1 exited with 3".into())
    );
}

fn components_that_do_not_fit_wait_in_fifo_order(m: Mode) {
    let d = temp_dir(m, "fifo");
    let c = cluster(m, &d, 4);
    c.submit(&sh(&d, 1, 3, 1, "sleep 0.4")).unwrap();
    c.submit(&sh(&d, 2, 3, 1, "true")).unwrap();
    c.submit(&sh(&d, 3, 1, 1, "true")).unwrap();
    assert_eq!(state(&c, 1), RemoteState::Running);
    assert_eq!(state(&c, 2), RemoteState::Queued);
    // FIFO: the one-slot launch waits behind the head even though it would fit.
    assert_eq!(state(&c, 3), RemoteState::Queued);
    assert_eq!(c.load().unwrap().idle, 1);
    assert_eq!(wait_final(&c, 2), RemoteState::Finished);
    assert_eq!(wait_final(&c, 3), RemoteState::Finished);
    assert_eq!(state(&c, 1), RemoteState::Finished);
}

fn cancel_kills_every_process_and_frees_the_slots(m: Mode) {
    let d = temp_dir(m, "cancel");
    let c = cluster(m, &d, 4);
    c.submit(&sh(&d, 1, 4, 4, "sleep 60")).unwrap();
    c.submit(&sh(&d, 2, 1, 1, "sleep 60")).unwrap();
    assert_eq!(state(&c, 2), RemoteState::Queued);
    let g = pgid(&d, 1);
    assert!(group_alive(g));
    c.cancel(&remote_id(1)).unwrap();
    assert!(group_gone(g), "processes left after cancel");
    assert_eq!(state(&c, 1), RemoteState::Failed("cancelled".into()));
    c.cancel(&remote_id(2)).unwrap();
    assert_eq!(state(&c, 2), RemoteState::Failed("cancelled".into()));
    c.cancel(&remote_id(1)).unwrap();
    c.cancel(&"L99".to_string()).unwrap();
    assert_eq!(c.load().unwrap().idle, 4);
}

fn the_wall_time_is_enforced(m: Mode) {
    let d = temp_dir(m, "wall");
    let c = cluster(m, &d, 4);
    let mut r = sh(&d, 1, 1, 2, "sleep 30");
    r.wall_time_ms = Some(300);
    c.submit(&r).unwrap();
    let t = Instant::now();
    let s = wait_final(&c, 1);
    assert!(
        matches!(&s, RemoteState::Failed(m) if m.contains("wall time")),
        "{s:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(group_gone(pgid(&d, 1)));
}

fn background_load_takes_slots_outside_coalloc(m: Mode) {
    let d = temp_dir(m, "background");
    let c = cluster(m, &d, 8);
    c.set_background_slots(6);
    let l = c.load().unwrap();
    assert_eq!((l.idle, l.total, l.other), (2, 8, 6));
    c.submit(&sh(&d, 1, 4, 1, "true")).unwrap();
    assert_eq!(state(&c, 1), RemoteState::Queued);
    c.set_background_slots(0);
    assert_eq!(wait_final(&c, 1), RemoteState::Finished);
}

fn a_new_cluster_adopts_what_the_last_one_left_running_or_queued(m: Mode) {
    let d = temp_dir(m, "adopt");
    let c = cluster(m, &d, 4);
    c.submit(&sh(&d, 1, 4, 2, "sleep 0.6; echo done $COALLOC_LOCAL_RANK"))
        .unwrap();
    c.submit(&sh(&d, 2, 2, 1, "echo second")).unwrap();
    c.submit(&sh(&d, 3, 1, 1, "exit 0")).unwrap();
    assert_eq!(state(&c, 2), RemoteState::Queued);
    drop(c);
    let c = cluster(m, &d, 4);
    // Submitting the same launch again changes nothing.
    assert_eq!(c.submit(&sh(&d, 1, 4, 2, "echo twice")).unwrap(), "L1");
    assert_eq!(state(&c, 1), RemoteState::Running);
    assert_eq!(state(&c, 2), RemoteState::Queued);
    assert_eq!(wait_final(&c, 1), RemoteState::Finished);
    assert_eq!(wait_final(&c, 2), RemoteState::Finished);
    assert_eq!(wait_final(&c, 3), RemoteState::Finished);
    let out = std::fs::read_to_string(d.join("out/1.out")).unwrap();
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(!out.contains("twice"));
    drop(c);
    // Ended launches keep their state across another restart.
    let c = cluster(m, &d, 4);
    assert_eq!(state(&c, 1), RemoteState::Finished);
    assert_eq!(c.load().unwrap().idle, 4);
}

fn a_launch_that_ended_while_no_server_watched_is_read_from_its_files(m: Mode) {
    let d = temp_dir(m, "unwatched");
    let c = cluster(m, &d, 4);
    c.submit(&sh(&d, 1, 1, 1, "sleep 0.3; exit 4")).unwrap();
    c.submit(&sh(&d, 2, 1, 1, "sleep 0.3")).unwrap();
    drop(c);
    std::thread::sleep(Duration::from_millis(800));
    let c = cluster(m, &d, 4);
    assert_eq!(
        state(&c, 1),
        RemoteState::Failed("process 0 exited with 4".into())
    );
    assert_eq!(state(&c, 2), RemoteState::Finished);
}

fn a_log_line_cut_short_by_a_crash_is_skipped(m: Mode) {
    let d = temp_dir(m, "torn");
    let c = cluster(m, &d, 4);
    c.submit(&sh(&d, 1, 1, 1, "exit 3")).unwrap();
    assert_eq!(
        wait_final(&c, 1),
        RemoteState::Failed("process 0 exited with 3".into())
    );
    drop(c);
    use std::io::Write;
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(d.join("site/launches.jsonl"))
        .unwrap();
    log.write_all(br#"{"request":{"launch":2,"#).unwrap();
    let mut exits = std::fs::OpenOptions::new()
        .append(true)
        .open(d.join("site/exits"))
        .unwrap();
    exits.write_all(b"2 0").unwrap();
    let c = cluster(m, &d, 4);
    assert_eq!(
        state(&c, 1),
        RemoteState::Failed("process 0 exited with 3".into())
    );
    assert_eq!(state(&c, 2), RemoteState::Unknown);
    assert_eq!(c.load().unwrap().idle, 4);
    // The cut lines do not swallow the next ones.
    c.submit(&sh(&d, 3, 1, 1, "exit 5")).unwrap();
    assert_eq!(
        wait_final(&c, 3),
        RemoteState::Failed("process 0 exited with 5".into())
    );
    drop(c);
    let c = cluster(m, &d, 4);
    assert_eq!(
        state(&c, 3),
        RemoteState::Failed("process 0 exited with 5".into())
    );
}

fn a_cloud_site_grows_and_shrinks_with_its_vms(m: Mode) {
    let d = temp_dir(m, "resize");
    let c = LocalCluster::new(LocalConfig {
        name: "cloud".into(),
        slots: 8,
        initial_slots: Some(0),
        work_dir: d.join("site"),
        background: None,
        launcher: launcher(m),
    })
    .unwrap();
    assert_eq!(c.load().unwrap().total, 0);
    c.submit(&sh(&d, 1, 4, 1, "true")).unwrap();
    assert_eq!(state(&c, 1), RemoteState::Queued);
    c.resize(4);
    assert_eq!(wait_final(&c, 1), RemoteState::Finished);
    c.resize(100);
    assert_eq!(c.load().unwrap().total, 8, "never more than its most");
    c.resize(-6);
    assert_eq!(c.load().unwrap().total, 2);
    assert!(matches!(
        c.submit(&sh(&d, 2, 9, 1, "true")),
        Err(BackendError::Rejected(_))
    ));
}

fn discarded_launches_are_compacted_out_of_the_files_and_the_rest_adopted(m: Mode) {
    let d = temp_dir(m, "compact");
    let c = cluster(m, &d, 64);
    let lines = |f: &str| {
        std::fs::read_to_string(d.join("site").join(f))
            .unwrap()
            .lines()
            .count()
    };
    // 1,000 ended launches (the most kept before a compaction), discarded by the server.
    let n = 1_000;
    for l in 1..=n {
        c.submit(&sh(&d, l, 1, 1, "exit 0")).unwrap();
    }
    for l in 1..=n {
        assert_eq!(wait_final(&c, l), RemoteState::Finished);
    }
    c.submit(&sh(&d, n + 1, 1, 1, "exit 6")).unwrap();
    assert_eq!(
        wait_final(&c, n + 1),
        RemoteState::Failed("process 0 exited with 6".into())
    );
    assert!(lines("launches.jsonl") > 3 * n as usize);
    assert_eq!(lines("exits"), n as usize + 1);
    let ids: Vec<String> = (1..=n).map(remote_id).collect();
    c.discard(&ids);
    // What is left: the one launch not discarded (its request and its end); no launch
    // runs, so `exits` is empty.
    assert_eq!(lines("launches.jsonl"), 2);
    assert_eq!(lines("exits"), 0);
    // Codes written after the compaction are read, by this cluster and the next one.
    c.submit(&sh(&d, n + 2, 1, 1, "sleep 0.3; exit 7")).unwrap();
    drop(c);
    std::thread::sleep(Duration::from_millis(600));
    let c = cluster(m, &d, 64);
    assert_eq!(
        state(&c, n + 1),
        RemoteState::Failed("process 0 exited with 6".into())
    );
    assert_eq!(
        wait_final(&c, n + 2),
        RemoteState::Failed("process 0 exited with 7".into())
    );
    assert_eq!(recorded_launches(&d.join("site")), vec![n + 1, n + 2]);
}

both!(
    processes_run_with_their_ranks_and_finish,
    processes_start_in_the_folder_of_their_output_unless_told_otherwise,
    a_missing_executable_or_an_oversize_request_is_rejected_before_anything_starts,
    a_failing_process_fails_the_component_with_its_code,
    components_that_do_not_fit_wait_in_fifo_order,
    cancel_kills_every_process_and_frees_the_slots,
    the_wall_time_is_enforced,
    background_load_takes_slots_outside_coalloc,
    a_new_cluster_adopts_what_the_last_one_left_running_or_queued,
    a_launch_that_ended_while_no_server_watched_is_read_from_its_files,
    a_log_line_cut_short_by_a_crash_is_skipped,
    discarded_launches_are_compacted_out_of_the_files_and_the_rest_adopted,
    a_cloud_site_grows_and_shrinks_with_its_vms,
);

/// The parent of process `pid`.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn alive(pid: i32) -> bool {
    unsafe { libc::kill(pid, 0) == 0 }
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(5), "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_launcher_outlives_its_cluster_writes_the_codes_and_serves_the_next_one() {
    let d = temp_dir(Mode::Launcher, "outlives");
    let c = cluster(Mode::Launcher, &d, 4);
    c.submit(&sh(&d, 1, 1, 2, "sleep 0.5; exit 6")).unwrap();
    let g = pgid(&d, 1);
    let launcher = parent_of(g).unwrap();
    assert_ne!(
        launcher,
        std::process::id() as i32,
        "not started by the launcher"
    );
    // The cluster goes away as with a killed server; the launcher stays for its processes.
    drop(c);
    let c = cluster(Mode::Launcher, &d, 4);
    assert_eq!(state(&c, 1), RemoteState::Running);
    c.submit(&sh(&d, 2, 1, 1, "sleep 0.2")).unwrap();
    assert_eq!(parent_of(pgid(&d, 2)), Some(launcher), "a second launcher");
    assert_eq!(wait_final(&c, 2), RemoteState::Finished);
    assert_eq!(
        wait_final(&c, 1),
        RemoteState::Failed("process 0 exited with 6".into())
    );
    // With no cluster connected and nothing running, it leaves.
    drop(c);
    wait_until("the launcher stayed", || !alive(launcher));
    assert!(!d.join("site/launcher.sock").exists());
}

#[test]
fn a_launch_ended_after_its_cluster_went_away_is_read_from_the_launchers_codes() {
    let d = temp_dir(Mode::Launcher, "gone");
    let c = cluster(Mode::Launcher, &d, 4);
    c.submit(&sh(&d, 1, 2, 2, "sleep 0.3; exit $COALLOC_LOCAL_RANK"))
        .unwrap();
    let launcher = parent_of(pgid(&d, 1)).unwrap();
    drop(c);
    // Nobody connected: the launcher reaps, writes both codes and leaves.
    wait_until("the launcher stayed", || !alive(launcher));
    let exits = std::fs::read_to_string(d.join("site/exits")).unwrap();
    let mut lines: Vec<&str> = exits.lines().collect();
    lines.sort();
    assert_eq!(lines, ["1 0 0", "1 1 1"]);
    let c = cluster(Mode::Launcher, &d, 4);
    assert_eq!(
        state(&c, 1),
        RemoteState::Failed("process 1 exited with 1".into())
    );
}

/// A process a component leaves behind (its parent ended) is the launcher's to reap, not
/// init's, which may reap it seconds later and keep its group alive to a waiting cancel.
#[test]
fn the_launcher_adopts_what_a_component_leaves_behind() {
    let d = temp_dir(Mode::Launcher, "orphans");
    let c = cluster(Mode::Launcher, &d, 4);
    let pid_file = d.join("orphan.pid");
    let script = format!("(sleep 30 & echo $! > {}); sleep 30", pid_file.display());
    c.submit(&sh(&d, 1, 1, 1, &script)).unwrap();
    let launcher = parent_of(pgid(&d, 1)).unwrap();
    let mut orphan = None;
    wait_until("the orphan's pid was not written", || {
        orphan = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok());
        orphan.is_some()
    });
    let orphan = orphan.unwrap();
    wait_until("the orphan was not adopted by the launcher", || {
        parent_of(orphan) == Some(launcher)
    });
    c.cancel(&remote_id(1)).unwrap();
    assert!(
        !group_alive(pgid(&d, 1)),
        "processes left when cancel returned"
    );
}

#[test]
fn a_killed_launcher_is_replaced_at_the_next_launch() {
    let d = temp_dir(Mode::Launcher, "replaced");
    let c = cluster(Mode::Launcher, &d, 4);
    c.submit(&sh(&d, 1, 1, 1, "sleep 0.2")).unwrap();
    let first = parent_of(pgid(&d, 1)).unwrap();
    assert_eq!(wait_final(&c, 1), RemoteState::Finished);
    unsafe { libc::kill(first, libc::SIGKILL) };
    wait_until("the launcher survived SIGKILL", || !alive(first));
    // The broken connection is found at the next launch: the request was not delivered, so
    // it goes to a new launcher, once.
    c.submit(&sh(&d, 2, 1, 1, "echo once")).unwrap();
    assert_eq!(wait_final(&c, 2), RemoteState::Finished);
    let second = parent_of(pgid(&d, 2));
    assert!(second.is_none() || second != Some(first));
    assert_eq!(
        std::fs::read_to_string(d.join("out/2.out")).unwrap(),
        "once\n"
    );
    assert_eq!(recorded_launches(&d.join("site")), [1, 2]);
}

/// The cluster's log as a server that stopped between the launcher's answer and writing it
/// down leaves it: the request of `launch` without its start.
fn forget_start(dir: &Path, launch: u64) {
    let path = dir.join("site/launches.jsonl");
    let log = std::fs::read_to_string(&path).unwrap();
    let started = format!("{{\"started\":{{\"launch\":{launch},");
    assert!(log.contains(&started), "{log}");
    let kept: String = log
        .lines()
        .filter(|l| !l.starts_with(&started))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, kept).unwrap();
}

/// The lines of the file a launch's processes append to once each time they run.
fn runs(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("runs")).unwrap_or_default();
    text.lines().map(str::to_string).collect()
}

#[test]
fn a_launch_whose_start_was_not_written_down_is_not_started_again_while_it_runs() {
    let d = temp_dir(Mode::Launcher, "unrecorded-running");
    let c = cluster(Mode::Launcher, &d, 4);
    let script = format!(
        "echo $COALLOC_LOCAL_RANK >> {}; sleep 0.6",
        d.join("runs").display()
    );
    c.submit(&sh(&d, 1, 2, 2, &script)).unwrap();
    let first = pgid(&d, 1);
    wait_until("the ranks did not run", || runs(&d).len() == 2);
    // The server stops before it writes the start down (the fail-over of
    // postgres_replicated.rs): the next one finds the request alone and asks again.
    drop(c);
    forget_start(&d, 1);
    let c = cluster(Mode::Launcher, &d, 4);
    assert_eq!(wait_final(&c, 1), RemoteState::Finished);
    assert_eq!(pgid(&d, 1), first, "another process group");
    let mut ranks = runs(&d);
    ranks.sort();
    assert_eq!(ranks, ["0", "1"], "started twice");
}

#[test]
fn a_launch_whose_start_was_not_written_down_and_that_ended_is_not_started_again() {
    let d = temp_dir(Mode::Launcher, "unrecorded-ended");
    let c = cluster(Mode::Launcher, &d, 4);
    let script = format!(
        "echo ran >> {}; sleep 0.2; exit 3",
        d.join("runs").display()
    );
    c.submit(&sh(&d, 1, 1, 1, &script)).unwrap();
    let launcher = parent_of(pgid(&d, 1)).unwrap();
    drop(c);
    forget_start(&d, 1);
    // It ends with nobody connected, and the launcher leaves with its record of it.
    wait_until("the launcher stayed", || !alive(launcher));
    let c = cluster(Mode::Launcher, &d, 4);
    assert_eq!(
        wait_final(&c, 1),
        RemoteState::Failed("process 0 exited with 3".into())
    );
    assert_eq!(runs(&d), ["ran"], "started twice");
}

#[test]
fn a_process_killed_by_a_signal_is_told_from_an_exit() {
    let d = temp_dir(Mode::Launcher, "signal");
    let c = cluster(Mode::Launcher, &d, 4);
    c.submit(&sh(&d, 1, 1, 1, "kill -TERM $$")).unwrap();
    assert_eq!(
        wait_final(&c, 1),
        RemoteState::Failed("process 0 was killed by signal 15".into())
    );
}

#[test]
fn a_launcher_that_cannot_start_is_tried_once_and_the_wrapper_starts_the_launches() {
    let d = temp_dir(Mode::Launcher, "broken");
    let tries = d.join("tries");
    let c = LocalCluster::new(LocalConfig {
        name: "test".into(),
        slots: 4,
        initial_slots: None,
        work_dir: d.join("site"),
        background: None,
        launcher: Some(LauncherCommand {
            program: "/bin/sh".into(),
            args: vec![
                "-c".into(),
                format!("echo tried >> {}", tries.display()),
                "sh".into(),
            ],
        }),
    })
    .unwrap();
    c.submit(&sh(&d, 1, 1, 1, "exit 0")).unwrap();
    c.submit(&sh(&d, 2, 1, 1, "exit 2")).unwrap();
    assert_eq!(wait_final(&c, 1), RemoteState::Finished);
    assert_eq!(
        wait_final(&c, 2),
        RemoteState::Failed("process 0 exited with 2".into())
    );
    assert_eq!(std::fs::read_to_string(&tries).unwrap(), "tried\n");
}

#[test]
fn components_start_with_no_signal_blocked_and_the_same_ignored_ones_in_both_modes() {
    // The launcher blocks SIGCHLD and ignores SIGPIPE for itself; its components inherit
    // neither (what they ignore is what they would under the wrapper).
    let mut ignored = Vec::new();
    for m in [Mode::Wrapper, Mode::Launcher] {
        let d = temp_dir(m, "signals");
        let c = cluster(m, &d, 4);
        c.submit(&sh(
            &d,
            1,
            1,
            1,
            "grep -E '^Sig(Blk|Ign)' /proc/self/status",
        ))
        .unwrap();
        assert_eq!(wait_final(&c, 1), RemoteState::Finished);
        let out = std::fs::read_to_string(d.join("out/1.out")).unwrap();
        let mut lines = out.lines();
        assert_eq!(lines.next(), Some("SigBlk:\t0000000000000000"), "{m:?}");
        ignored.push(lines.next().unwrap_or_default().to_string());
    }
    assert_eq!(ignored[0], ignored[1]);
}
