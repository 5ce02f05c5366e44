//! A cloud site on the server, end to end (seed 004 §III-B): a full local cluster makes the
//! On-Demand policy lease VMs from the local provider, the component runs on them, and the
//! VMs go back once idle; a command provider's programs are called with the VM and node.

mod common;

use coalloc_testkit::server::{barrier_component, Server};
use common::COALLOC;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn config(manager: &str) -> String {
    format!(
        "[server]\nmonitor_interval = \"50ms\"\n\
         [[site]]\nname = \"alpha\"\nprocessors = 4\nmanager = {{ type = \"local\" }}\n\
         [[site]]\nname = \"cloud\"\nkind = \"cloud\"\n\
         cloud = {{ vm_processors = 2, min_vms = 0, max_vms = 3, lease_latency = \"300ms\", price_per_vm_hour = 0 }}\n\
         manager = {{ {manager} }}\n\
         [scheduler]\npolicy = \"fcfs\"\nfit = \"first\"\nprovisioning = \"on-demand\"\n\
         [scheduler.on_demand]\nidle_time = \"1s\"\n"
    )
}

fn one(count: u32, then: &str) -> Value {
    json!({ "kind": "unordered", "component": [barrier_component(COALLOC, count, "", then)] })
}

fn cloud(s: &Server) -> Value {
    s.get("/v1/sites")["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "cloud")
        .unwrap()["cloud"]
        .clone()
}

fn wait_cloud(s: &Server, secs: u64, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let t = Instant::now();
    loop {
        let c = cloud(s);
        if pred(&c) {
            return c;
        }
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "cloud not {what}: {c}\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_full_cluster_makes_the_server_lease_run_on_and_release_cloud_vms() {
    let s = Server::start(
        COALLOC,
        "cloud-local",
        &config("type = \"local\", provider = \"local\""),
    );
    assert_eq!(cloud(&s)["vms"], 0, "a provisioned cloud starts empty");
    let filler = s.submit(&one(4, "sleep 3"));
    s.wait_for(filler, 30, "running", |j| j["state"] == "running");
    let t = Instant::now();
    let burst = s.submit(&one(4, "echo on $COALLOC_SITE"));
    let c = wait_cloud(&s, 20, "grown", |c| c["capacity"] == 4);
    // Not before the lease latency.
    assert!(t.elapsed() >= Duration::from_millis(300), "{c}");
    assert_eq!(c["nodes"].as_array().unwrap().len(), 2, "{c}");
    let j = s.wait_ended(burst, 30);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(j["sites"], json!(["cloud"]), "{j}");
    assert_eq!(s.output(burst, 0).trim(), "on cloud");
    // Idle for the idle time, the VMs go back; a private cloud costs nothing.
    let c = wait_cloud(&s, 20, "released", |c| c["vms"] == 0);
    assert_eq!(c["leases"], 2, "{c}");
    assert_eq!(c["cost"], 0.0, "{c}");
    assert_eq!(s.job(filler)["sites"], json!(["alpha"]));
}

#[test]
fn a_command_provider_runs_its_programs_and_survives_a_restart() {
    let dir = std::env::temp_dir().join(format!("coalloc-provider-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("calls.log");
    let manager = format!(
        "type = \"local\", provider = \"command\", \
         lease_program = \"f() {{ echo lease $1 $2 >> {l}; sleep 0.2; echo node-$2; }}; f\", \
         release_program = \"f() {{ echo release $1 $2 $3 >> {l}; }}; f\"",
        l = log.display()
    );
    let mut s = Server::start(COALLOC, "cloud-command", &config(&manager));
    let filler = s.submit(&one(4, "sleep 4"));
    s.wait_for(filler, 30, "running", |j| j["state"] == "running");
    let burst = s.submit(&one(2, "sleep 3; echo on $COALLOC_SITE"));
    wait_cloud(&s, 20, "grown", |c| c["capacity"] == 2);
    // Killed once the burst runs on the VM (killed while its submission was under way, it
    // would be placed again after its back-off, wherever there is room then).
    s.wait_for(burst, 30, "running", |j| j["state"] == "running");
    // A restart keeps the leased VM: the site still has its processors. (A lease under way
    // at the kill would be asked for again, with the same VM number: lease programs must
    // be idempotent per VM.)
    s.kill_and_restart();
    let j = s.wait_ended(burst, 30);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(j["sites"], json!(["cloud"]), "{j}");
    wait_cloud(&s, 20, "released", |c| c["vms"] == 0);
    // The site counts the VM gone when it decides to release it; the release program may
    // still be running.
    let t = Instant::now();
    let calls = loop {
        let calls = std::fs::read_to_string(&log).unwrap();
        if calls.lines().count() >= 2 || t.elapsed() > Duration::from_secs(10) {
            break calls;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(lines.len(), 2, "{calls}");
    let vm = lines[0].split(' ').nth(2).unwrap();
    assert_eq!(lines[0], format!("lease cloud {vm}"));
    assert_eq!(lines[1], format!("release cloud {vm} node-{vm}"));
}
