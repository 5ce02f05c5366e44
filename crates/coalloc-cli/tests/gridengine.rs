//! End to end on real Grid Engine cells: `coalloc serve` with one site per cell of the rig
//! in scripts/gridengine/ (two cells on loopback: delta 32 slots, epsilon 16), and with a
//! Slurm cluster of scripts/slurm/ beside them. The Poisson example co-allocated over a
//! Slurm cluster and a Grid Engine cell at once; placement around a background load
//! submitted straight to Grid Engine; an execution host crash before the barrier and after
//! the commit (abort, re-placement, the site unusable and usable again); cancel; `kill -9`
//! of the server; and bad input (a component larger than any cell, an unknown parallel
//! environment, a dead qmaster).
//!
//! Skipped (a line on stderr) unless `COALLOC_GE_RIG` names the rig's base directory
//! (failing instead with `COALLOC_REQUIRE_GE=1`); the mixed test also needs
//! `COALLOC_SLURM_RIG`:
//!
//! ```sh
//! scripts/gridengine/up.sh /tmp/coalloc-ge; scripts/slurm/up.sh /tmp/coalloc-slurm
//! COALLOC_GE_RIG=/tmp/coalloc-ge COALLOC_SLURM_RIG=/tmp/coalloc-slurm \
//!     cargo test -p coalloc-cli --test gridengine
//! ```

mod common;

use coalloc_testkit::rig::gridengine::{GeRig, GeScenario};
use coalloc_testkit::rig::slurm::Scenario;
use coalloc_testkit::rig::SERVER;
use coalloc_testkit::server::{
    barrier_component as comp, component_sites as sites_of, job, remotes, site, wait_site, Server,
};
use common::COALLOC;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Duration;

const FCFS_WORST: &str = "policy = \"fcfs\"\nfit = \"worst\"";

/// Every cell lists no job (polled for up to `secs`).
fn assert_no_ge_jobs(rig: &GeRig, secs: u64) {
    for i in 0..rig.cells.len() {
        rig.until_empty(i, Duration::from_secs(secs));
    }
}

#[test]
fn poisson_is_co_allocated_over_a_slurm_cluster_and_a_grid_engine_cell() {
    let Some(ge) = GeScenario::begin("ge-poisson") else {
        return;
    };
    let Some(slurm) = Scenario::begin("ge-poisson") else {
        return;
    };
    let alpha = slurm.rig.index("alpha");
    let config = format!(
        "{SERVER}{}{}[scheduler]\n{FCFS_WORST}\n",
        slurm.rig.site(alpha, "batch"),
        ge.rig.site(0, "")
    );
    let s = Server::start(COALLOC, "ge-poisson", &config);
    // 40 of alpha's 64 CPUs first (worst fit: the larger idle site); then 30 no longer fit
    // on alpha and go to delta's 32 slots: one strip per resource manager.
    let strip = |count: u32| {
        json!({
            "count": count, "job_type": "single", "executable": COALLOC,
            "arguments": ["poisson", "--n", "48"],
        })
    };
    let id = s.submit(&json!({
        "name": "poisson", "kind": "unordered", "max_wall_time": "5m",
        "component": [strip(40), strip(30)],
    }));
    let j = s.wait_ended(id, 90);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(
        sites_of(&j),
        vec!["alpha".to_string(), ge.rig.cells[0].name.clone()],
        "{j}"
    );
    assert_eq!(j["placement_tries"], 1, "{j}");
    let delta_job = &remotes(&s, id)[1].1;
    assert_eq!(
        ge.rig.job_state(0, delta_job),
        "0/0",
        "Grid Engine job {delta_job}"
    );
    let out = s.output(id, 0);
    let line = out
        .lines()
        .find(|l| l.starts_with("poisson: n="))
        .unwrap_or_else(|| panic!("component 0 printed no result: {out:?}"));
    assert!(
        line.starts_with("poisson: n=48 components=2 iterations=") && line.ends_with(" ok"),
        "{line}"
    );
    let err: f64 = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("max_error="))
        .and_then(|e| e.parse().ok())
        .unwrap_or_else(|| panic!("no max_error in {line}"));
    // The discretization error of the 5-point scheme at n = 48 (about 1e-4).
    assert!(err > 0.0 && err < 5e-4, "{line}");
    assert!(
        s.output(id, 1).contains("poisson: component 1 done"),
        "{:?}",
        s.output(id, 1)
    );
}

#[test]
fn background_load_submitted_straight_to_grid_engine_steers_placement_away() {
    let Some(sc) = GeScenario::begin("ge-background") else {
        return;
    };
    let rig = &sc.rig;
    let (delta, epsilon) = (rig.cells[0].name.clone(), rig.cells[1].name.clone());
    let s = Server::start(COALLOC, "ge-background", &rig.config(FCFS_WORST));
    let one = || job(vec![comp(COALLOC, 8, "", "echo on $COALLOC_SITE")]);
    let control = s.wait_ended(s.submit(&one()), 60);
    assert_eq!(control["state"], "finished", "{control}");
    assert_eq!(sites_of(&control), vec![delta.clone()], "{control}");
    // Another user's job holds all of delta's slots but 4, straight through qsub.
    let load = rig.foreign_job(0, rig.cells[0].slots - 4, 600);
    wait_site(&s, &delta, 20, "loaded", |v| {
        v["idle"] == 4 && v["other"] == rig.cells[0].slots - 4 && v["coalloc"] == 0
    });
    let id = s.submit(&one());
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(sites_of(&j), vec![epsilon.clone()], "{j}");
    assert!(s.output(id, 0).contains(&format!("on {epsilon}")));
    assert_eq!(
        rig.job_state(0, &load),
        "r",
        "the load is untouched by coalloc"
    );
}

/// An execution host crash of the cell running one component, before the barrier
/// (`after_commit` false) or after it: the job is re-placed on the other cell and
/// completes, the crashed cell is unusable (threshold 1) until an operator says otherwise,
/// and is used again afterwards.
fn crash(name: &str, after_commit: bool) {
    let Some(sc) = GeScenario::begin(name) else {
        return;
    };
    let rig = &sc.rig;
    let s = Server::start(
        COALLOC,
        name,
        &rig.config(&format!(
            "{FCFS_WORST}\nsite_errors = 1\ncompletion_errors = 1\nmax_submit_failures = 5\nmax_completion_failures = 3"
        )),
    );
    let (delta, victim) = (rig.cells[0].name.clone(), rig.cells[1].name.clone());
    // 20 slots go to delta (32 idle), then 10 to epsilon (16 idle against delta's 12);
    // after epsilon's crash both fit on delta. Before the barrier the components wait
    // longer than the crash takes to be seen (max_unheard, 6 s on the rig).
    let (before, then) = if after_commit {
        // Long enough that delta's component is still running when the crash is seen.
        ("", "sleep 25; echo done on $COALLOC_SITE")
    } else {
        ("sleep 25;", "echo done on $COALLOC_SITE")
    };
    let id = s.submit(&job(vec![
        comp(COALLOC, 20, before, then),
        comp(COALLOC, 10, before, then),
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
    assert_eq!(sites_of(&j), vec![delta.clone(), victim.clone()], "{j}");
    let first = remotes(&s, id);
    rig.crash_host(1);

    let j = s.wait_ended(id, 120);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(sites_of(&j), vec![delta.clone(), delta.clone()], "{j}");
    assert!(j["placement_tries"].as_u64().unwrap() >= 2, "{j}");
    if after_commit {
        assert_eq!(j["completion_failures"], 1, "{j}");
    } else {
        assert!(j["submit_failures"].as_u64().unwrap() >= 1, "{j}");
        assert_eq!(j["completion_failures"], 0, "{j}");
    }
    // The abort was atomic: the first launch on delta was deleted (killed: 137).
    let st = rig.job_state(0, &first[0].1);
    assert!(st.ends_with("/137"), "delta job {}: {st}", first[0].1);
    for c in 0..2 {
        assert!(
            s.output(id, c).contains(&format!("done on {delta}")),
            "component {c}: {:?}",
            s.output(id, c)
        );
    }
    let vs = site(&s, &victim);
    assert_eq!(vs["usable"], false, "{vs}");
    let counter = if after_commit {
        "completion_errors"
    } else {
        "submit_errors"
    };
    assert_eq!(vs[counter], 1, "{vs}");

    // The host comes back; the site stays unusable until an operator says so.
    rig.delete_all();
    rig.restore();
    wait_site(&s, &victim, 30, "healthy with its slots back", |x| {
        x["healthy"] == true && x["total"] == rig.cells[1].slots && x["idle"] == rig.cells[1].slots
    });
    let both = || {
        job(vec![
            comp(COALLOC, 30, "", "echo done on $COALLOC_SITE"),
            comp(COALLOC, 12, "", "true"),
        ])
    };
    let all = s.submit(&both());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(s.job(all)["state"], "queued");
    let (st, r) = s.call(
        "PUT",
        &format!("/v1/sites/{victim}/usable"),
        &s.token,
        Some("{\"usable\": true}"),
    );
    assert_eq!(st, 200, "{r}");
    let j = s.wait_ended(all, 60);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(sites_of(&j), vec![delta, victim], "{j}");
}

#[test]
fn an_execution_host_crash_before_the_barrier_aborts_and_re_places_the_job() {
    crash("ge-crash-claiming", false);
}

#[test]
fn an_execution_host_crash_after_the_commit_re_places_the_job() {
    crash("ge-crash-running", true);
}

#[test]
fn cancel_leaves_no_job_in_any_cell() {
    let Some(sc) = GeScenario::begin("ge-cancel") else {
        return;
    };
    let rig = &sc.rig;
    let s = Server::start(COALLOC, "ge-cancel", &rig.config(FCFS_WORST));
    let running = s.submit(&job(vec![
        comp(COALLOC, 20, "", "exec sleep 600"),
        comp(COALLOC, 10, "", "exec sleep 600"),
    ]));
    s.wait_for(running, 60, "running", |j| j["state"] == "running");
    let claiming = s.submit(&job(vec![
        comp(COALLOC, 6, "sleep 600;", "true"),
        comp(COALLOC, 6, "sleep 600;", "true"),
    ]));
    s.wait_for(claiming, 60, "started", |j| {
        j["components"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["state"] == "started")
    });
    let mut launched = remotes(&s, running);
    launched.extend(remotes(&s, claiming));
    let names: BTreeSet<&str> = launched.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 2, "not on both cells: {launched:?}");
    for id in [running, claiming] {
        let (st, v) = s.call("DELETE", &format!("/v1/jobs/{id}"), &s.token, None);
        assert_eq!(st, 200, "{v}");
    }
    for id in [running, claiming] {
        assert_eq!(s.wait_ended(id, 20)["state"], "failed");
    }
    assert_no_ge_jobs(rig, 15);
    for x in s.get("/v1/sites")["sites"].as_array().unwrap() {
        assert_eq!(x["coalloc"], 0, "{x}");
    }
}

#[test]
fn kill_9_of_the_server_adopts_grid_engine_jobs_and_starts_none_twice() {
    let Some(sc) = GeScenario::begin("ge-restart") else {
        return;
    };
    let rig = &sc.rig;
    let mut s = Server::start(COALLOC, "ge-restart", &rig.config(FCFS_WORST));
    let starts = s.dir.parent().unwrap().join("ge-starts.log");
    let _ = std::fs::remove_file(&starts);
    let record = format!(
        "echo $COALLOC_JOB_ID.$COALLOC_COMPONENT >> {}; sleep 4",
        starts.display()
    );
    // 48 slots, 24 per job: two jobs at a time; four jobs.
    let ids: Vec<u64> = (0..4)
        .map(|_| {
            s.submit(&job(vec![
                comp(COALLOC, 12, "", &record),
                comp(COALLOC, 12, "", &record),
            ]))
        })
        .collect();
    s.wait_for(ids[0], 60, "running", |j| j["state"] == "running");
    let before = remotes(&s, ids[0]);
    s.kill_and_restart();
    let j = s.job(ids[0]);
    assert_ne!(j["state"], "queued", "{j}");
    assert_eq!(remotes(&s, ids[0]), before, "adopted by id: {j}");
    for id in &ids {
        let j = s.wait_ended(*id, 90);
        assert_eq!(j["state"], "finished", "{j}");
        assert_eq!(j["submit_failures"], 0, "{j}");
        assert_eq!(j["completion_failures"], 0, "{j}");
    }
    coalloc_testkit::server::assert_started_once(&starts, &ids, 2);
    assert_no_ge_jobs(rig, 10);
}

#[test]
fn bad_input_is_a_clear_error_or_a_site_error_never_a_panic() {
    let Some(sc) = GeScenario::begin("ge-bad") else {
        return;
    };
    let rig = &sc.rig;
    // delta with a parallel environment it does not have; a third cell whose qmaster is
    // dead (a port where none listens).
    let dead_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = format!(
        "{SERVER}{}{}{}[scheduler]\n{FCFS_WORST}\nsite_errors = 1\nmax_submit_failures = 5\n",
        rig.site(0, ", pe = \"nope\"")
            .replace(", pe = \"coalloc\"", ""),
        rig.site(1, ""),
        rig.site(1, &format!(", qmaster_port = {dead_port}"))
            .replace(
                &format!("name = \"{}\"", rig.cells[1].name),
                "name = \"ghost\""
            ),
    );
    let s = Server::start(COALLOC, "ge-bad", &config);
    // The dead qmaster: unhealthy, not used.
    wait_site(&s, "ghost", 30, "unhealthy", |x| x["healthy"] == false);
    // Larger than every cell: refused at submission with a reason.
    let (st, v) = s.call(
        "POST",
        "/v1/jobs",
        &s.token,
        Some(&job(vec![comp(COALLOC, rig.cells[0].slots + 1, "", "true")]).to_string()),
    );
    assert!((400..500).contains(&st), "{st}: {v}");
    assert!(
        v.to_string().contains("processors") || v.to_string().contains("fit"),
        "{v}"
    );
    // 8 slots: worst fit picks delta, whose `qsub -pe nope` is refused: a site error, the
    // component is placed again on epsilon and the job completes; nothing is lost.
    let id = s.submit(&job(vec![comp(COALLOC, 8, "", "echo on $COALLOC_SITE")]));
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(sites_of(&j), vec![rig.cells[1].name.clone()], "{j}");
    assert!(j["submit_failures"].as_u64().unwrap() >= 1, "{j}");
    let d = site(&s, &rig.cells[0].name);
    assert_eq!(d["usable"], false, "{d}");
    assert!(
        j["last_abort"]
            .as_str()
            .unwrap_or("")
            .contains("parallel environment"),
        "the reason is not shown: {j}"
    );
    assert!(s.pid().is_some(), "the server is alive");
    assert_no_ge_jobs(rig, 10);
}

/// A Grid Engine cell behind a site agent works like any other site: the agent serves the
/// cell (its `[[site]]` table is the same one a server would have) and the job's component
/// there checks in through the agent's relay.
#[test]
fn a_grid_engine_cell_behind_a_site_agent_runs_its_component() {
    use coalloc_testkit::agent::{wait_link, AgentProc};
    use coalloc_testkit::tools::free_port;
    let Some(ge) = GeScenario::begin("ge-agent") else {
        return;
    };
    let cell = &ge.rig.cells[0];
    let config = format!(
        "{SERVER}agent_bind = \"127.0.0.1:0\"\nheartbeat = \"200ms\"\n\
         [[site]]\nname = \"{}\"\nprocessors = {}\nmanager = {{ type = \"agent\" }}\n\
         [[site]]\nname = \"alpha\"\nprocessors = 4\nmanager = {{ type = \"local\" }}\n\
         [scheduler]\n{FCFS_WORST}\n",
        cell.name, cell.slots
    );
    let s = Server::start(COALLOC, "ge-agent", &config);
    let agent_config = format!(
        "[agent]\nrelay_bind = \"127.0.0.1:{}\"\n{}",
        free_port(),
        ge.rig.site(0, "")
    );
    let a = AgentProc::start(&s, &cell.name, &agent_config, None);
    wait_link(&s, &cell.name, true, 30);
    let mut on_cell = comp(COALLOC, 2, "", "echo through-the-agent");
    on_cell["site"] = json!(cell.name);
    let mut local = comp(COALLOC, 1, "", "true");
    local["site"] = json!("alpha");
    let id = s.submit(&json!({
        "kind": "ordered", "max_wall_time": "2m", "component": [on_cell, local],
    }));
    let j = s.wait_ended(id, 120);
    assert_eq!(j["state"], "finished", "{j}\n{}", a.log());
    assert_eq!(sites_of(&j), [cell.name.clone(), "alpha".into()], "{j}");
    let out: String = std::fs::read_dir(a.dir.join(format!("state/output/{id}")))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".out"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(out.contains("through-the-agent"), "{out:?}");
    assert_no_ge_jobs(&ge.rig, 30);
}
