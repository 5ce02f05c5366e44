//! An upgrade keeps its state directory (issue 34 item 6): a server of this build starts on
//! a state directory whose `snapshot.bin` is of the previous form (`coalsnp3`, written by the
//! build before 1f2ba89; `tests/fixtures/snapshot-form3/make.sh` made it), reads it, and
//! carries on: the queued jobs are there as they were (two waiting out a back-off after an
//! aborted start), the cancelled job that had left memory answers from the history, the next
//! job gets the next number after the forgotten one's, the site taken down is still down,
//! and the next snapshot is written in this build's form and read back.

mod common;

use coalloc_testkit::server::{barrier_component, job, site, Server};
use common::COALLOC;
use std::path::Path;
use std::time::Duration;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/snapshot-form3");

/// (number, name, state) of every job in memory.
fn jobs(s: &Server) -> Vec<(u64, String, String)> {
    s.get("/v1/jobs?state=all")["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["id"].as_u64().unwrap(),
                j["name"].as_str().unwrap_or("").to_owned(),
                j["state"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn form(dir: &Path) -> String {
    let bytes = std::fs::read(dir.join("snapshot.bin")).unwrap();
    String::from_utf8_lossy(&bytes[bytes.len() - 8..]).into_owned()
}

#[test]
fn a_snapshot_of_the_previous_form_is_read_and_the_server_carries_on() {
    let config = std::fs::read_to_string(Path::new(FIXTURE).join("config.toml")).unwrap();
    let mut s = Server::start(COALLOC, "snapshot-form3", &config);
    assert!(
        s.terminate(Duration::from_secs(20)),
        "the server did not stop"
    );
    // The old build's state directory in place of this one's.
    for f in ["journal.sqlite-wal", "journal.sqlite-shm", "snapshot.bin"] {
        let _ = std::fs::remove_file(s.dir.join(f));
    }
    for f in ["snapshot.bin", "journal.sqlite"] {
        std::fs::copy(Path::new(FIXTURE).join(f), s.dir.join(f)).unwrap();
    }
    assert_eq!(form(&s.dir), "coalsnp3");
    s.restart();
    assert!(
        s.log()
            .contains("the snapshot is of an older form (3); read and converted"),
        "{}",
        s.log()
    );
    let queued = |n: &str| n == "queued";
    let before = jobs(&s);
    let names: Vec<(u64, &str)> = before.iter().map(|j| (j.0, j.1.as_str())).collect();
    assert_eq!(
        names,
        vec![
            (1, "done-1"),
            (2, "done-2"),
            (3, "queued-3"),
            (5, "queued-5"),
            (6, "queued-6")
        ]
    );
    assert!(before.iter().all(|j| queued(&j.2)), "{before:?}");
    // Jobs 1 and 2 had a start aborted (their programs never reached the barrier).
    let j1 = s.job(1);
    assert!(
        j1["last_abort"]
            .as_str()
            .is_some_and(|a| a.contains("ended before reaching the barrier")),
        "{j1}"
    );
    // Job 4 was cancelled and had left memory: the history answers.
    let j4 = s.job(4);
    assert_eq!(
        (j4["state"].as_str(), j4["name"].as_str()),
        (Some("failed"), Some("cancelled-4")),
        "{j4}"
    );
    // The site taken down stays down; the next job is numbered after the old ones.
    let alpha = site(&s, "alpha");
    assert_eq!(
        (alpha["usable"].as_bool(), alpha["out_reason"].as_str()),
        (Some(false), Some("down: fixture: keep the queue")),
        "{alpha}"
    );
    let next = s.submit(&job(vec![barrier_component(COALLOC, 1, "", "true")]));
    assert_eq!(next, 7);
    s.cli_ok(&["site", "resume", "alpha"]);
    let j = s.wait_ended(next, 60);
    assert_eq!(j["state"], "finished", "{j}");

    // The next snapshot is in this build's form, and a restart reads it.
    assert!(
        s.terminate(Duration::from_secs(20)),
        "the server did not stop"
    );
    assert_eq!(form(&s.dir), "coalsnp8");
    s.restart();
    let after: Vec<u64> = jobs(&s).iter().map(|j| j.0).collect();
    assert_eq!(after, vec![1, 2, 3, 5, 6, 7]);
    assert_eq!(s.job(7)["state"], "finished");
    assert!(s.terminate(Duration::from_secs(20)));
    let _ = std::fs::remove_dir_all(s.dir.parent().unwrap());
}
