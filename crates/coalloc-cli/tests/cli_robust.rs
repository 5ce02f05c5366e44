//! The CLI never panics on its reader or its arguments (issue 20 item 7): a closed pipe
//! ends a command quietly, a non-UTF-8 argument is refused with a message, and scripts get
//! `--json` on every client command and `submit --parsable` (the job id alone, as sbatch).

mod common;

use coalloc_testkit::server::{barrier_component, job, three_clusters, Server};
use common::COALLOC;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

/// Run `coalloc ARGS` with its standard output closed before it writes anything.
fn with_closed_stdout(args: &[&OsStr]) -> std::process::Output {
    let mut child = Command::new(COALLOC)
        .args(args)
        .current_dir(common::repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

fn assert_quiet_end(what: &str, out: &std::process::Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert!(
        out.status.success() || out.status.signal() == Some(SIGPIPE),
        "{what}: {:?} {err}",
        out.status
    );
}

/// SIGPIPE's number on Linux.
const SIGPIPE: i32 = 13;

#[test]
fn a_closed_pipe_ends_client_and_offline_commands_quietly() {
    let s = Server::start(
        COALLOC,
        "pipe",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    for _ in 0..3 {
        s.submit(&job(vec![barrier_component(COALLOC, 1, "", "true")]));
    }
    let state = s.dir.as_os_str();
    for args in [
        vec![OsStr::new("status"), OsStr::new("--json")],
        vec![OsStr::new("status")],
        vec![OsStr::new("sites")],
    ] {
        let mut all = args.clone();
        all.extend([OsStr::new("--state-dir"), state]);
        assert_quiet_end(&format!("{args:?}"), &with_closed_stdout(&all));
    }
    let check = [
        OsStr::new("job"),
        OsStr::new("check"),
        OsStr::new("examples/jobs/poisson.toml"),
    ];
    assert_quiet_end("job check", &with_closed_stdout(&check));
}

#[test]
fn a_non_utf8_argument_is_refused_with_a_message() {
    let bad = OsStr::from_bytes(b"caf\xe9");
    for args in [
        vec![
            OsStr::new("submit"),
            OsStr::new("--policy"),
            bad,
            OsStr::new("x.toml"),
        ],
        vec![OsStr::new("status"), bad],
        vec![OsStr::new("job"), OsStr::new("check"), bad],
        vec![OsStr::new("site"), OsStr::new("drain"), bad],
    ] {
        let out = Command::new(COALLOC).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.trim().is_empty(), "{args:?}: no message");
    }
}

#[test]
fn submit_parsable_prints_the_id_alone_and_client_commands_speak_json() {
    let s = Server::start(
        COALLOC,
        "parsable",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let state = s.dir.to_str().unwrap().to_string();
    let run = |args: &[&str]| {
        let out = Command::new(COALLOC)
            .args(args)
            .args(["--state-dir", &state])
            .current_dir(common::repo())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let file = s.dir.parent().unwrap().join("one.json");
    let spec = job(vec![barrier_component(
        COALLOC,
        1,
        "",
        "echo hello; sleep 30",
    )]);
    std::fs::write(&file, spec.to_string()).unwrap();
    let file = file.to_str().unwrap();
    let printed = run(&["submit", "--parsable", file]);
    let id: u64 = printed
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{printed:?}"));
    assert_eq!(printed, format!("{id}\n"));
    s.wait_for(id, 20, "running", |j| j["state"] == "running");
    // Released from the barrier, the component writes its line a moment later.
    let t = std::time::Instant::now();
    while !s.output(id, 0).contains("hello") {
        assert!(t.elapsed().as_secs() < 20, "no output");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let logs: serde_json::Value =
        serde_json::from_str(&run(&["logs", &id.to_string(), "--json"])).expect("logs --json");
    assert!(
        logs["launches"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hello"),
        "{logs}"
    );
    let cancelled: serde_json::Value =
        serde_json::from_str(&run(&["cancel", &id.to_string(), "--json"])).expect("cancel --json");
    assert_eq!(cancelled["cancelled"][0]["job"], id, "{cancelled}");
    for cmd in [&["status", "--json"][..], &["sites", "--json"]] {
        let text = run(cmd);
        serde_json::from_str::<serde_json::Value>(&text).unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    }
}
