//! Job arrays end to end against a real `coalloc serve`: `coalloc submit --array`, each
//! element's COALLOC_ARRAY_INDEX, the array shown as one row and cancelled as one.

mod common;

use coalloc_testkit::server::{barrier_component, job, three_clusters, Server};
use common::COALLOC;
use serde_json::Value;

#[test]
fn an_arrays_elements_all_run_with_their_index_and_are_cancelled_as_one() {
    let s = Server::start(COALLOC, "arrays", &three_clusters([4, 4, 4], ""));
    let file = s.dir.parent().unwrap().join("element.json");
    let spec = job(vec![
        barrier_component(
            COALLOC,
            1,
            "",
            "echo index=$COALLOC_ARRAY_INDEX of $COALLOC_ARRAY_JOB_ID",
        ),
        barrier_component(COALLOC, 1, "", "true"),
    ]);
    std::fs::write(&file, spec.to_string()).unwrap();
    let file = file.to_str().unwrap();
    // Six elements, indexes 0 to 5: jobs 1 to 6, every one runs with its index.
    let out = s.cli_ok(&["submit", "--array", "0-5", file, "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["submitted"][0]["array"], "1_[0-5]", "{v}");
    for (i, id) in (1..=6).enumerate() {
        let j = s.wait_ended(id, 120);
        assert_eq!(j["state"], "finished", "{j}");
        assert_eq!(j["array"], format!("1_{i}"));
        assert_eq!(s.output(id, 0).trim(), format!("index={i} of 1"));
    }
    // Ten more behind unusable sites, indexes 10 to 19: one row while they wait.
    s.hold_the_queue();
    assert!(s
        .cli_ok(&["submit", "--array", "10-19", file])
        .contains("submitted array 7_[10-19]"));
    let table = s.cli_ok(&["status"]);
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{table}");
    assert!(rows[0].starts_with("7_[10-19]  "), "{table}");
    // Some elements, then the rest of the array, each in one request.
    assert_eq!(
        s.cli_ok(&["cancel", "7_[12-13]"]).trim(),
        "cancelled 2 jobs of array 7_[12-13]"
    );
    let table = s.cli_ok(&["status"]);
    let rows: Vec<&str> = table
        .lines()
        .skip(1)
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(rows, ["7_[10-11]", "7_[14-19]"], "{table}");
    assert_eq!(
        s.cli_ok(&["cancel", "7"]).trim(),
        "cancelled 8 jobs of array 7"
    );
    for id in 7..=16 {
        let j = s.job(id);
        assert_eq!(j["state"], "failed", "{j}");
        assert_eq!(j["last_abort"], "cancelled", "{j}");
    }
    assert_eq!(s.cli_ok(&["status"]).lines().count(), 1, "only the header");
    // A plain job is still cancelled by its number; a bad one is refused before any request.
    let plain = s.submit(&job(vec![barrier_component(COALLOC, 1, "", "true")]));
    assert_eq!(
        s.cli_ok(&["cancel", &plain.to_string()]).trim(),
        format!("cancelled job {plain}")
    );
    let bad = s.cli(&["cancel", "7_[x]"]);
    assert_eq!(bad.status.code(), Some(2));
}
