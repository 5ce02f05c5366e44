//! End to end on real, independent Slurm clusters: `coalloc serve` with one Slurm site per
//! cluster of the rig in scripts/slurm/ (three clusters on loopback: alpha 64 CPUs, beta 32,
//! gamma 2 nodes of 16). Co-allocation of the Poisson example across the three, placement
//! around a background load submitted straight to Slurm, node crashes before the barrier and after
//! the commit (abort, re-placement, the site made unusable and usable again), cancel, and a
//! `kill -9` of the server during a run.
//!
//! Skipped (a line on stderr) unless `COALLOC_SLURM_RIG` names the rig's base directory;
//! failing when it is set but the rig is not up:
//!
//! ```sh
//! scripts/slurm/up.sh /tmp/coalloc-slurm
//! COALLOC_SLURM_RIG=/tmp/coalloc-slurm cargo test -p coalloc-cli --test slurm
//! scripts/slurm/down.sh /tmp/coalloc-slurm
//! ```
//!
//! The scenarios share the clusters, so each holds the rig's lock ([`Scenario`]), and leaves
//! every cluster as it found it (daemons running, no job, nodes idle), even when it fails.

mod common;

use coalloc_testkit::rig::slurm::{Rig, Scenario};
use coalloc_testkit::server::{
    barrier_component as comp, component_sites as sites_of, job, remotes, site, wait_site, Server,
};
use common::COALLOC;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Slurm's word on a job of cluster `i`: `JobState=` of `scontrol show job -o`.
fn slurm_state(rig: &Rig, i: usize, id: &str) -> String {
    let line = rig.slurm(i, "scontrol", &["show", "job", "-o", id]);
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("JobState="))
        .unwrap_or("?")
        .to_string()
}

/// Every cluster has no queued or running job (polled for up to `secs`).
fn assert_no_slurm_jobs(rig: &Rig, secs: u64) {
    let t = Instant::now();
    loop {
        let left: Vec<String> = (0..rig.clusters.len())
            .flat_map(|i| {
                rig.active_jobs(i)
                    .unwrap()
                    .into_iter()
                    .map(move |j| format!("{}: {j}", rig.clusters[i].name))
            })
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "jobs left in Slurm: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// No process on this machine names a file of this server's state directory on its command
/// line (the allocation launch's `salloc` and `srun` name the components' output files
/// there); polled for up to `secs`.
fn assert_no_clients(s: &Server, secs: u64) {
    let needle = s.dir.display().to_string();
    let t = Instant::now();
    loop {
        let left: Vec<String> = std::fs::read_dir("/proc")
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .bytes()
                            .all(|b| b.is_ascii_digit())
                    })
                    .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
                    .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                    .filter(|c| c.contains(&needle) && !c.contains("coalloc serve"))
                    .collect()
            })
            .unwrap_or_default();
        if left.is_empty() {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "client processes left: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `cluster:id:name` of every job the clusters still show (finished ones included).
fn slurm_jobs_seen(rig: &Rig) -> BTreeSet<String> {
    (0..rig.clusters.len())
        .flat_map(|i| {
            rig.slurm(i, "squeue", &["-h", "-t", "all", "-o", "%i:%j"])
                .lines()
                .map(|l| format!("{}:{}", rig.clusters[i].name, l.trim()))
                .collect::<Vec<_>>()
        })
        .collect()
}

const FCFS_WORST: &str = "policy = \"fcfs\"\nfit = \"worst\"";

#[test]
fn poisson_is_co_allocated_over_three_slurm_clusters() {
    poisson("batch");
}

#[test]
fn poisson_is_co_allocated_over_three_slurm_clusters_as_allocations() {
    poisson("allocation");
}

fn poisson(launch: &str) {
    let Some(sc) = Scenario::begin(&format!("poisson-{launch}")) else {
        return;
    };
    let s = Server::start(
        COALLOC,
        &format!("slurm-poisson-{launch}"),
        &sc.rig.config_launching(FCFS_WORST, launch),
    );
    // 40 CPUs fit on alpha only; then 30 no longer fit there: one component per cluster.
    let strip = |count: u32| {
        json!({
            "count": count, "job_type": "single", "executable": COALLOC,
            "arguments": ["poisson", "--n", "48"],
        })
    };
    let id = s.submit(&json!({
        "name": "poisson", "kind": "unordered", "max_wall_time": "5m",
        "component": [strip(40), strip(30), strip(30)],
    }));
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}");
    let used: BTreeSet<String> = sites_of(&j).into_iter().collect();
    assert_eq!(
        used,
        ["alpha", "beta", "gamma"].map(String::from).into(),
        "{j}"
    );
    assert_eq!(j["placement_tries"], 1, "{j}");
    assert!(j["barrier_release"].as_i64().unwrap() >= j["submit"].as_i64().unwrap());
    // Each component ran as a Slurm job on its own cluster, and completed there.
    for (name, remote) in remotes(&s, id) {
        let i = sc.rig.index(&name);
        assert_eq!(
            slurm_state(&sc.rig, i, &remote),
            "COMPLETED",
            "{name} {remote}"
        );
    }
    let out = s.output(id, 0);
    let line = out
        .lines()
        .find(|l| l.starts_with("poisson: n="))
        .unwrap_or_else(|| panic!("component 0 printed no result: {out:?}"));
    assert!(
        line.starts_with("poisson: n=48 components=3 iterations=") && line.ends_with(" ok"),
        "{line}"
    );
    let err: f64 = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("max_error="))
        .and_then(|e| e.parse().ok())
        .unwrap_or_else(|| panic!("no max_error in {line}"));
    // The discretization error of the 5-point scheme at n = 48 (about 1e-4); the example
    // itself only demands 1e-2.
    assert!(err > 0.0 && err < 5e-4, "{line}");
    for c in 1..3 {
        assert!(
            s.output(id, c)
                .contains(&format!("poisson: component {c} done")),
            "component {c}: {:?}",
            s.output(id, c)
        );
    }
}

#[test]
fn background_load_submitted_straight_to_slurm_steers_placement_away() {
    let Some(sc) = Scenario::begin("background") else {
        return;
    };
    let rig = &sc.rig;
    let alpha = rig.index("alpha");
    let s = Server::start(COALLOC, "slurm-background", &rig.config(FCFS_WORST));
    let two = || {
        job(vec![
            comp(COALLOC, 16, "", "echo on $COALLOC_SITE"),
            comp(COALLOC, 16, "", "true"),
        ])
    };
    // Without load the worst fit picks the biggest cluster, alpha.
    let control = s.submit(&two());
    let j = s.wait_ended(control, 60);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(sites_of(&j)[0], "alpha", "{j}");

    // Another user's job fills alpha but 4 CPUs, straight through sbatch.
    let load = rig.slurm(
        alpha,
        "sbatch",
        &[
            "--parsable",
            "-J",
            "someone-else",
            "-n",
            "60",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 600",
        ],
    );
    assert!(load.parse::<u64>().is_ok(), "sbatch said {load:?}");
    wait_site(&s, "alpha", 20, "loaded", |v| {
        v["idle"] == 4 && v["other"] == 60 && v["coalloc"] == 0
    });
    let id = s.submit(&two());
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}");
    let placed = sites_of(&j);
    assert!(!placed.contains(&"alpha".to_string()), "{j}");
    assert_eq!(placed.len(), 2);
    assert!(s.output(id, 0).contains(&format!("on {}", placed[0])));
    // The load is untouched by coalloc.
    assert_eq!(slurm_state(rig, alpha, &load), "RUNNING");
}

/// The node-crash scenarios: kill the cluster hosting one component, before the barrier
/// (`after_commit` false) or after it; the job is re-placed on the other clusters and
/// completes, the site is unusable (threshold 1) until an operator says otherwise, and is
/// used again afterwards.
fn crash(name: &str, after_commit: bool, launch: &str) {
    let Some(sc) = Scenario::begin(name) else {
        return;
    };
    let rig = &sc.rig;
    let s = Server::start(
        COALLOC,
        &format!("slurm-{name}"),
        &rig.config_launching(
            &format!(
                "{FCFS_WORST}\nsite_errors = 1\ncompletion_errors = 1\nmax_submit_failures = 5\nmax_completion_failures = 3"
            ),
            launch,
        ),
    );
    // 34 CPUs go to alpha (30 left), the 20s to beta and gamma; after a crash of beta or
    // gamma, alpha and the other still hold all three. Before the barrier, the components
    // wait long enough that the crash is always reported before the victim's component
    // reaches the barrier: its task outlives the killed slurmd and slurmstepd, and one that
    // checked in first would fail as a completion error of the site (a component that was
    // at the barrier), not a submission error (seen once under load with 5 s).
    let (before, then) = if after_commit {
        ("", "sleep 6; echo done on $COALLOC_SITE")
    } else {
        ("sleep 15;", "echo done on $COALLOC_SITE")
    };
    let id = s.submit(&job(vec![
        comp(COALLOC, 34, before, then),
        comp(COALLOC, 20, before, then),
        comp(COALLOC, 20, before, then),
    ]));
    let j = if after_commit {
        s.wait_for(id, 60, "running", |j| j["state"] == "running")
    } else {
        s.wait_for(id, 60, "started, before the barrier", |j| {
            j["state"] != "running"
                && j["components"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|c| c["state"] == "started")
        })
    };
    let first = remotes(&s, id);
    let placed = sites_of(&j);
    assert_eq!(
        placed.iter().collect::<BTreeSet<_>>().len(),
        3,
        "not spread over three clusters: {j}"
    );
    let victim = if after_commit { "gamma" } else { "beta" };
    let v = rig.index(victim);
    rig.crash_nodes(v);

    let j = s.wait_ended(id, 90);
    assert_eq!(j["state"], "finished", "{j}");
    let now = sites_of(&j);
    assert!(
        !now.contains(&victim.to_string()),
        "re-placed on {victim}: {j}"
    );
    assert!(j["placement_tries"].as_u64().unwrap() >= 2, "{j}");
    if after_commit {
        assert_eq!(j["completion_failures"], 1, "{j}");
    } else {
        assert!(j["submit_failures"].as_u64().unwrap() >= 1, "{j}");
        assert_eq!(j["completion_failures"], 0, "{j}");
    }
    // The abort was atomic: the first launches on the other clusters were cancelled, or,
    // when the crash was reported late enough that they had checked in at the barrier, were
    // told there that the job was aborted and ended with it (their `sleep; echo` cannot fail
    // otherwise): the CI run of `ee7ad4d`, gamma's component FAILED with "job aborted: …
    // NODE_FAIL" while alpha's was CANCELLED.
    for (site_name, remote) in &first {
        if site_name != victim {
            let st = slurm_state(rig, rig.index(site_name), remote);
            assert!(
                st == "CANCELLED" || (!after_commit && st == "FAILED"),
                "{site_name} job {remote}: {st}"
            );
        } else {
            let st = slurm_state(rig, v, remote);
            assert_eq!(st, "NODE_FAIL", "{site_name} job {remote}");
        }
    }
    for (c, site_now) in now.iter().enumerate().take(3) {
        assert!(
            s.output(id, c).contains(&format!("done on {site_now}")),
            "component {c}: {:?}",
            s.output(id, c)
        );
    }
    // One error reached the threshold of 1: the site is unusable.
    let vs = site(&s, victim);
    assert_eq!(vs["usable"], false, "{vs}");
    let counter = if after_commit {
        "completion_errors"
    } else {
        "submit_errors"
    };
    assert_eq!(vs[counter], 1, "{vs}");

    // The cluster comes back: its node is idle again, but the site stays unusable until an
    // operator says so; a job that needs all three clusters waits for it.
    rig.restart_missing(v).unwrap();
    wait_site(&s, victim, 20, "healthy with its CPUs back", |x| {
        x["healthy"] == true && x["total"] == 32 && x["idle"] == 32
    });
    let all = s.submit(&job(vec![
        comp(COALLOC, 40, "", "echo done on $COALLOC_SITE"),
        comp(COALLOC, 30, "", "echo done on $COALLOC_SITE"),
        comp(COALLOC, 30, "", "echo done on $COALLOC_SITE"),
    ]));
    std::thread::sleep(Duration::from_secs(2));
    let w = s.job(all);
    assert_eq!(w["state"], "queued", "{w}");
    assert_eq!(site(&s, victim)["usable"], false);
    let (st, r) = s.call(
        "PUT",
        &format!("/v1/sites/{victim}/usable"),
        &s.token,
        Some("{\"usable\": true}"),
    );
    assert_eq!(st, 200, "{r}");
    let vs = site(&s, victim);
    assert_eq!(vs["usable"], true, "{vs}");
    assert_eq!(vs[counter], 0, "{vs}");
    let j = s.wait_ended(all, 60);
    assert_eq!(j["state"], "finished", "{j}");
    let used: BTreeSet<String> = sites_of(&j).into_iter().collect();
    assert!(used.contains(victim), "{j}");
    assert_eq!(used.len(), 3, "{j}");
}

#[test]
fn a_node_crash_before_the_barrier_aborts_and_re_places_the_job() {
    crash("crash-claiming", false, "batch");
}

#[test]
fn a_node_crash_before_the_barrier_aborts_and_re_places_the_job_of_allocations() {
    crash("crash-claiming-alloc", false, "allocation");
}

#[test]
fn a_node_crash_after_the_commit_re_places_the_job() {
    crash("crash-running", true, "batch");
}

#[test]
fn a_controller_outage_makes_the_site_unusable_until_it_answers_again() {
    let Some(sc) = Scenario::begin("outage") else {
        return;
    };
    let rig = &sc.rig;
    let g = rig.index("gamma");
    let s = Server::start(COALLOC, "slurm-outage", &rig.config(FCFS_WORST));
    let on = |site: &str, then: &str| {
        let mut c = comp(COALLOC, 8, "", then);
        c["site"] = json!(site);
        c
    };
    let ordered =
        |comps: Vec<Value>| json!({ "kind": "ordered", "max_wall_time": "5m", "component": comps });
    // A job on all three clusters, past its barrier, outlives gamma's controller.
    let then = "sleep 6; echo done on $COALLOC_SITE";
    let a = s.submit(&ordered(vec![
        on("alpha", then),
        on("beta", then),
        on("gamma", then),
    ]));
    s.wait_for(a, 60, "running", |j| j["state"] == "running");
    let first = remotes(&s, a);
    rig.stop_controller(g);
    // The resource manager does not answer: gamma is unhealthy, hence unusable. A poll
    // of a dead controller is a failing `sinfo` then a failing `squeue`, each up to about
    // MessageTimeout (5 s on the rig) or the backend's 10 s command timeout: seen 5 to 20 s.
    wait_site(&s, "gamma", 45, "unhealthy", |x| {
        x["healthy"] == false && x["usable"] == false
    });
    // A job that needs gamma waits; nothing is submitted to a dead controller.
    let b = s.submit(&ordered(vec![on("gamma", "echo done on $COALLOC_SITE")]));
    std::thread::sleep(Duration::from_secs(2));
    let jb = s.job(b);
    assert_eq!(jb["state"], "queued", "{jb}");
    assert_eq!(jb["submit_failures"], 0, "{jb}");
    assert_eq!(s.job(a)["state"], "running");
    rig.restart_missing(g).unwrap();
    // Healthy again, gamma is usable without an operator (no error was counted), the
    // waiting job runs there, and the first job ends well with its original launches.
    wait_site(&s, "gamma", 30, "usable again", |x| {
        x["healthy"] == true && x["usable"] == true
    });
    let jb = s.wait_ended(b, 60);
    assert_eq!(jb["state"], "finished", "{jb}");
    assert_eq!(sites_of(&jb), vec!["gamma".to_string()]);
    assert!(s.output(b, 0).contains("done on gamma"));
    let ja = s.wait_ended(a, 60);
    assert_eq!(ja["state"], "finished", "{ja}");
    assert_eq!(remotes(&s, a), first, "{ja}");
    assert_eq!(ja["submit_failures"], 0, "{ja}");
    assert_eq!(ja["completion_failures"], 0, "{ja}");
    for (c, name) in ["alpha", "beta", "gamma"].iter().enumerate() {
        assert!(s.output(a, c).contains(&format!("done on {name}")));
    }
    let gs = site(&s, "gamma");
    assert_eq!(
        (
            gs["submit_errors"].as_u64(),
            gs["completion_errors"].as_u64()
        ),
        (Some(0), Some(0)),
        "{gs}"
    );
}

#[test]
fn cancel_leaves_no_job_in_any_cluster() {
    cancel("batch");
}

#[test]
fn cancel_leaves_no_job_in_any_cluster_of_allocations() {
    cancel("allocation");
}

fn cancel(launch: &str) {
    let Some(sc) = Scenario::begin(&format!("cancel-{launch}")) else {
        return;
    };
    let rig = &sc.rig;
    let s = Server::start(
        COALLOC,
        &format!("slurm-cancel-{launch}"),
        &rig.config_launching(FCFS_WORST, launch),
    );
    // One job past its barrier, one held before it; both spread over the clusters.
    let running = s.submit(&job(vec![
        comp(COALLOC, 30, "", "exec sleep 600"),
        comp(COALLOC, 20, "", "exec sleep 600"),
        comp(COALLOC, 20, "", "exec sleep 600"),
    ]));
    s.wait_for(running, 60, "running", |j| j["state"] == "running");
    let claiming = s.submit(&job(vec![
        comp(COALLOC, 12, "sleep 600;", "true"),
        comp(COALLOC, 12, "sleep 600;", "true"),
    ]));
    s.wait_for(claiming, 60, "started", |j| {
        j["components"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["state"] == "started")
    });
    let mut launched: Vec<(String, String)> = remotes(&s, running);
    launched.extend(remotes(&s, claiming));
    let names: BTreeSet<&str> = launched.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 3, "not on every cluster: {launched:?}");
    for (name, remote) in &launched {
        assert_eq!(slurm_state(rig, rig.index(name), remote), "RUNNING");
    }
    for id in [running, claiming] {
        let (st, v) = s.call("DELETE", &format!("/v1/jobs/{id}"), &s.token, None);
        assert_eq!(st, 200, "{v}");
    }
    for id in [running, claiming] {
        let j = s.wait_ended(id, 20);
        assert_eq!(j["state"], "failed", "{j}");
    }
    assert_no_slurm_jobs(rig, 15);
    for (name, remote) in &launched {
        assert_eq!(slurm_state(rig, rig.index(name), remote), "CANCELLED");
    }
    // No client (salloc, srun) of this server is left either.
    assert_no_clients(&s, 15);
    let v = s.get("/v1/sites");
    for x in v["sites"].as_array().unwrap() {
        assert_eq!(x["coalloc"], 0, "{x}");
    }
}

#[test]
fn kill_9_of_the_server_adopts_slurm_jobs_and_starts_none_twice() {
    restart("batch");
}

#[test]
fn kill_9_of_the_server_adopts_slurm_allocations_and_starts_none_twice() {
    restart("allocation");
}

fn restart(launch: &str) {
    let Some(sc) = Scenario::begin(&format!("restart-{launch}")) else {
        return;
    };
    let rig = &sc.rig;
    let mut s = Server::start(
        COALLOC,
        &format!("slurm-restart-{launch}"),
        &rig.config_launching(FCFS_WORST, launch),
    );
    let starts = s.dir.parent().unwrap().join("starts.log");
    let record = format!(
        "echo $COALLOC_JOB_ID.$COALLOC_COMPONENT >> {}; sleep 4",
        starts.display()
    );
    let seen_before = slurm_jobs_seen(rig);
    // 128 CPUs, 48 per job: two jobs at a time; four jobs.
    let ids: Vec<u64> = (0..4)
        .map(|_| {
            s.submit(&job(vec![
                comp(COALLOC, 24, "", &record),
                comp(COALLOC, 24, "", &record),
            ]))
        })
        .collect();
    s.wait_for(ids[0], 60, "running", |j| j["state"] == "running");
    let before: Vec<(String, String)> = remotes(&s, ids[0]);
    s.kill_and_restart();
    // The running job is adopted by its Slurm ids, not submitted again.
    let j = s.job(ids[0]);
    assert_ne!(j["state"], "queued", "{j}");
    assert_eq!(remotes(&s, ids[0]), before, "{j}");
    for id in &ids {
        let j = s.wait_ended(*id, 90);
        assert_eq!(j["state"], "finished", "{j}");
        assert_eq!(j["submit_failures"], 0, "{j}");
        assert_eq!(j["completion_failures"], 0, "{j}");
    }
    coalloc_testkit::server::assert_started_once(&starts, &ids, 2);
    // And Slurm ran exactly one job (batch or allocation) per component.
    let new: Vec<String> = slurm_jobs_seen(rig)
        .difference(&seen_before)
        .cloned()
        .collect();
    assert_eq!(new.len(), 8, "{new:?}");
    assert_no_slurm_jobs(rig, 10);
    assert_no_clients(&s, 10);
}
