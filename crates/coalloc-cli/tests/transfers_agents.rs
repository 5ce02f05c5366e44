//! Input files moved between agent sites (seed 000 §2.5's third-party transfer): the
//! replica is on agent site s1, the component fits only on agent site s2; the server pulls
//! the file over s1's link and appends it over s2's (the sites need not see each other), and
//! s2's agent checks the BLAKE3 before the file becomes a replica there; the component's
//! output comes back to the server for `coalloc logs` (seed 003 §5.2). Agents run on this
//! host (`agents.rs` has the others).

mod common;

use coalloc_testkit::agent::{mark_dir, wait_link, AgentProc};
use coalloc_testkit::server::{barrier_component, Server};
use coalloc_testkit::tools::free_port;
use common::{coalloc, stdout, COALLOC};
use serde_json::{json, Value};

fn config() -> String {
    "[server]\nmonitor_interval = \"50ms\"\nagent_bind = \"127.0.0.1:0\"\nheartbeat = \"200ms\"\n\
     [[site]]\nname = \"s1\"\nprocessors = 4\nmanager = { type = \"agent\", grace = \"5s\" }\n\
     bandwidth = { s2 = \"100MB\", alpha = \"1MB\" }\n\
     [[site]]\nname = \"alpha\"\nprocessors = 4\nmanager = { type = \"local\" }\n\
     [[site]]\nname = \"s2\"\nprocessors = 8\nmanager = { type = \"agent\", grace = \"5s\" }\n\
     [scheduler]\npolicy = \"fcfs\"\nfit = \"ctf\"\nclaiming = \"icp\"\n"
        .into()
}

fn agent_config(site: &str, n: u32) -> String {
    format!(
        "[agent]\nrelay_bind = \"127.0.0.1:{}\"\n[[site]]\nname = \"{site}\"\nprocessors = {n}\nmanager = {{ type = \"local\" }}\n",
        free_port()
    )
}

#[test]
fn a_file_on_one_agent_site_is_relayed_to_another_and_checked_there() {
    let s = Server::start(COALLOC, "transfer-agents", &config());
    let a1 = AgentProc::start(&s, "s1", &agent_config("s1", 4), None);
    let a2 = AgentProc::start(&s, "s2", &agent_config("s2", 8), None);
    wait_link(&s, "s1", true, 20);
    wait_link(&s, "s2", true, 20);
    // The replica is a file of s1's (here: in its agent's folder); registered from "the
    // login node", where the CLI reads its size and checksum.
    let src = a1.dir.join("grid.dat");
    let data: Vec<u8> = (0..2_500_000u32).map(|i| (i % 241) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let state = s.dir.to_string_lossy().to_string();
    let src_s = src.to_string_lossy().to_string();
    stdout(&coalloc(&[
        "file",
        "register",
        "s1",
        "grid.dat",
        &src_s,
        "--state-dir",
        &state,
    ]));
    let mark = mark_dir(&s);
    let check = format!(
        "cmp -s \"$COALLOC_INPUT_FILE\" '{src_s}' && echo $COALLOC_SITE > {}/same && echo out-from-$COALLOC_SITE",
        mark.display()
    );
    let job = json!({
        "kind": "unordered", "max_wall_time": "2m",
        "input_file": {"name": "grid.dat", "size": data.len(), "distribution": "whole"},
        "component": [barrier_component(COALLOC, 8, "", &check)],
    });
    let id = s.submit(&job);
    let j = s.wait_ended(id, 90);
    assert_eq!(j["state"], "finished", "{j}\n{}", s.log());
    assert_eq!(
        std::fs::read_to_string(mark.join("same")).unwrap().trim(),
        "s2"
    );
    let out = stdout(&coalloc(&[
        "file",
        "ls",
        "grid.dat",
        "--json",
        "--state-dir",
        &state,
    ]));
    let files: Value = serde_json::from_str(&out).unwrap();
    let cached = files["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["site"] == "s2")
        .unwrap_or_else(|| panic!("no replica on s2: {files}"))
        .clone();
    assert_eq!(cached["origin"], "cached");
    let path = cached["path"].as_str().unwrap();
    assert!(
        path.starts_with(&a2.dir.join("state").to_string_lossy().to_string()),
        "{path}"
    );
    assert_eq!(std::fs::read(path).unwrap(), data);
    // The component's output came back from s2's agent: `coalloc logs` shows it (the copy
    // follows the launch's end).
    let t = std::time::Instant::now();
    loop {
        let out = coalloc(&["logs", &id.to_string(), "--state-dir", &state]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains("out-from-s2") {
            assert!(text.contains("component 0"), "{text}");
            break;
        }
        assert!(
            t.elapsed().as_secs() < 20,
            "no output back: {text}\n{}",
            s.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn files_staged_in_and_out_of_a_component_on_an_agent_site() {
    let s = Server::start(COALLOC, "stage-agents", &config());
    let _a1 = AgentProc::start(&s, "s1", &agent_config("s1", 4), None);
    let a2 = AgentProc::start(&s, "s2", &agent_config("s2", 8), None);
    wait_link(&s, "s2", true, 20);
    let input = s.dir.parent().unwrap().join("params.txt");
    std::fs::write(&input, "alpha=0.5\n").unwrap();
    // 8 processors: only s2 has them. The component reads its staged-in file in its scratch
    // folder and writes an output that is staged out; the input is cleaned up.
    let comp = json!({
        "count": 8, "job_type": "single", "executable": "/bin/sh",
        "arguments": ["-c", "tr a-z A-Z < in/params.txt > result.txt && pwd > where.txt && \"$COALLOC\" barrier"],
        "environment": { "COALLOC": COALLOC },
        "attribute": [
            {"name": "file_stage_in", "op": "=", "value": [[input.to_string_lossy(), "in/params.txt"]]},
            {"name": "file_stage_out", "op": "=", "value": [["result.txt", "res/result.txt"], ["where.txt", "where.txt"]]},
            {"name": "file_clean_up", "op": "=", "value": ["in/params.txt"]},
        ],
    });
    let id = s.submit(&json!({"kind": "unordered", "max_wall_time": "2m", "component": [comp]}));
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}\n{}", s.log());
    let out = s.dir.join("output").join(id.to_string());
    let t = std::time::Instant::now();
    while !out.join("where.txt").exists() {
        assert!(
            t.elapsed().as_secs() < 20,
            "nothing staged out:\n{}",
            s.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // The outputs are copied in order; where.txt is the last.
    while std::fs::read_to_string(out.join("where.txt"))
        .unwrap_or_default()
        .is_empty()
    {
        assert!(t.elapsed().as_secs() < 20, "where.txt stays empty");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        std::fs::read_to_string(out.join("res/result.txt")).unwrap(),
        "ALPHA=0.5\n"
    );
    // It ran in a scratch folder of its own under s2's agent, where the input is cleaned up.
    let wd = std::fs::read_to_string(out.join("where.txt")).unwrap();
    let scratch = a2.dir.join("state/scratch").to_string_lossy().to_string();
    assert!(wd.trim().starts_with(&scratch), "{wd} vs {scratch}");
    assert!(!std::path::Path::new(wd.trim())
        .join("in/params.txt")
        .exists());
    assert!(std::path::Path::new(wd.trim()).join("result.txt").exists());
}
