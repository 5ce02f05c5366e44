//! GP in the server (seed 001 §2.2, issue 20 item 8): a global job at its deadline that
//! does not fit beside the sites' local load has local jobs preempted to make room (the
//! local backend's other users' load; a Slurm site's preemptible partition), and starts.

mod common;

use coalloc_testkit::server::{barrier_component, Server};
use common::COALLOC;
use serde_json::json;
use std::time::{SystemTime, UNIX_EPOCH};

const GP: &str =
    "[scheduler]\npolicy = \"rpp\"\n[scheduler.rpp]\npriority = \"gp\"\nignore = \"none\"\n";

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn at_its_deadline_a_gp_job_preempts_the_local_load_and_starts() {
    let mut config = String::from("[server]\nmonitor_interval = \"50ms\"\n");
    for name in ["alpha", "beta"] {
        config += &format!(
            "[[site]]\nname = \"{name}\"\nprocessors = 4\nmanager = {{ type = \"local\", background = 3 }}\n"
        );
    }
    let s = Server::start(COALLOC, "gp-local", &(config + GP));
    let other = |site: &str| coalloc_testkit::server::site(&s, site)["other"].as_u64();
    coalloc_testkit::server::wait_site(&s, "alpha", 10, "loaded", |v| v["other"] == 3);
    // Two components of 2: one processor is idle on each site, so the job fits only when
    // local jobs make room. Its deadline is 3 s away.
    let deadline = now_s() + 3;
    let job = json!({ "kind": "unordered", "max_wall_time": "5m", "deadline": deadline,
        "component": [barrier_component(COALLOC, 2, "", "true"), barrier_component(COALLOC, 2, "", "true")] });
    let id = s.submit(&job);
    std::thread::sleep(std::time::Duration::from_millis(1000));
    assert_eq!(s.job(id)["state"], "queued", "it waits for its deadline");
    assert_eq!((other("alpha"), other("beta")), (Some(3), Some(3)));
    let j = s.wait_for(id, 30, "finished", |j| j["state"] == "finished");
    assert_eq!(j["state"], "finished");
    // One processor freed on each site: the local load is down to 2.
    assert_eq!((other("alpha"), other("beta")), (Some(2), Some(2)));
    assert!(
        s.log()
            .contains("local jobs preempted for a global job (GP)"),
        "{}",
        s.log()
    );
}

/// On the Slurm rig (skipped unless `COALLOC_SLURM_RIG` is set): another user's job fills
/// every cluster but 4 CPUs; a GP job of two 16-CPU components cannot start until, at its
/// deadline, the local jobs of the preemptible partition on the sites it is placed on are
/// cancelled (`preempt_action = "cancel"`); the one on the site it does not use runs on.
#[test]
fn on_slurm_a_gp_job_cancels_local_jobs_of_the_preemptible_partition() {
    let Some(sc) = coalloc_testkit::rig::slurm::Scenario::begin("gp-slurm") else {
        return;
    };
    let rig = &sc.rig;
    let config = rig.config(GP.trim_start_matches("[scheduler]\n")).replace(
        "launch = \"batch\" }",
        "launch = \"batch\", preempt_partition = \"main\", preempt_action = \"cancel\" }",
    );
    let s = Server::start(COALLOC, "gp-slurm", &config);
    let mut loads = Vec::new();
    for (i, c) in rig.clusters.iter().enumerate() {
        let n = (c.cpus - 4).to_string();
        let id = rig.slurm(
            i,
            "sbatch",
            &[
                "--parsable",
                "-J",
                "someone-else",
                "-n",
                &n,
                "-o",
                "/dev/null",
                "--wrap",
                "sleep 600",
            ],
        );
        loads.push(id);
        coalloc_testkit::server::wait_site(&s, &c.name, 20, "loaded", |v| v["idle"] == 4);
    }
    let deadline = now_s() + 3;
    let job = json!({ "kind": "unordered", "max_wall_time": "5m", "deadline": deadline,
        "component": [barrier_component(COALLOC, 16, "", "true"), barrier_component(COALLOC, 16, "", "true")] });
    let id = s.submit(&job);
    let j = s.wait_ended(id, 90);
    assert_eq!(j["state"], "finished", "{j}");
    let used: Vec<String> = coalloc_testkit::server::component_sites(&j);
    for (i, c) in rig.clusters.iter().enumerate() {
        let running = rig
            .active_jobs(i)
            .unwrap()
            .iter()
            .any(|l| l.starts_with(&format!("{}|RUNNING|", loads[i])));
        assert_eq!(running, !used.contains(&c.name), "{}: {j}", c.name);
    }
}
