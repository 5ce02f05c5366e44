//! End to end over sites that are really apart (scripts/agents/: network namespaces, two
//! real Slurm clusters with their own munge keys, a compute side that cannot reach the
//! server): the server in the root namespace, each site's `coalloc agent` in its site's
//! namespace. The Poisson solver co-allocated over the three sites; a job on the cut-off
//! compute side that needs only the relay; kill -9 of an agent and of the server; a link cut
//! with `ip link set … down` past the grace period, during claiming and during a run.

mod common;

use coalloc_testkit::agent::{gated_component as gated, mark_dir, wait_link, AgentProc};
use coalloc_testkit::rig::agents::AgentRig;
use coalloc_testkit::server::{component_sites, Server};
use common::COALLOC;
use serde_json::json;
use std::time::{Duration, Instant};

const RELAY_PORT: u16 = 7100;

fn server(rig: &AgentRig, name: &str, grace: &str) -> Server {
    let sizes = [("s1", 32), ("s2", 32), ("s3", 16)];
    let mut c = format!(
        "[server]\nmonitor_interval = \"100ms\"\nagent_bind = \"{}:0\"\nheartbeat = \"300ms\"\n",
        rig.server_addr()
    );
    for (site, n) in sizes {
        c += &format!(
            "[[site]]\nname = \"{site}\"\nprocessors = {n}\nmanager = {{ type = \"agent\", grace = \"{grace}\" }}\n"
        );
    }
    Server::start(
        COALLOC,
        name,
        &(c + "[scheduler]\npolicy = \"fcfs\"\nfit = \"worst\"\n"),
    )
}

/// Start the agents of the rig's three sites.
fn agents(rig: &AgentRig, s: &Server) -> Vec<AgentProc> {
    let out: Vec<AgentProc> = rig
        .sites
        .iter()
        .map(|site| {
            // Where the site's processes run, for the Poisson strips' own listening address.
            let host = match &site.compute_netns {
                Some(_) => format!("{}.2", site.compute_addr.rsplit_once('.').unwrap().0),
                None => site.compute_addr.clone(),
            };
            let manager = match &site.slurm_conf {
                Some(conf) => format!("{{ type = \"slurm\", slurm_conf = \"{}\" }}", conf.display()),
                None => "{ type = \"local\" }".into(),
            };
            let n = if site.kind == "local" { 16 } else { 32 };
            let config = format!(
                "[agent]\nrelay_bind = \"{}:{RELAY_PORT}\"\nenvironment = {{ COALLOC_POISSON_HOST = \"{host}\" }}\n\
                 [[site]]\nname = \"{}\"\nprocessors = {n}\nmanager = {manager}\n",
                site.compute_addr, site.name
            );
            AgentProc::start(s, &site.name, &config, Some(&site.netns))
        })
        .collect();
    for site in &rig.sites {
        wait_link(s, &site.name, true, 30);
    }
    out
}

#[test]
fn poisson_is_co_allocated_over_three_sites_through_their_agents() {
    let Some(rig) = AgentRig::begin("agents-poisson") else {
        return;
    };
    let s = server(&rig, "netns-poisson", "30s");
    let a = agents(&rig, &s);
    let strip = |site: &str, count: u32| {
        json!({
            "site": site, "count": count, "job_type": "single", "executable": COALLOC,
            "arguments": ["poisson", "--n", "48"],
        })
    };
    let id = s.submit(&json!({
        "name": "poisson", "kind": "ordered", "max_wall_time": "5m",
        "component": [strip("s1", 30), strip("s2", 30), strip("s3", 16)],
    }));
    let j = s.wait_ended(id, 120);
    let out = a[0].output(id, 0);
    assert_eq!(j["state"], "finished", "{j}\n{out}\n{}", a[1].log());
    assert_eq!(component_sites(&j), ["s1", "s2", "s3"], "{j}");
    let line = out
        .lines()
        .find(|l| l.starts_with("poisson: n="))
        .unwrap_or_else(|| panic!("component 0 printed no result: {out:?}"));
    assert!(
        line.starts_with("poisson: n=48 components=3 iterations=") && line.ends_with(" ok"),
        "{line}"
    );
    // Each Slurm component ran as a Slurm job of its own cluster.
    for (i, site) in [(0, "s1"), (1, "s2")] {
        let remote = j["components"][i]["remote"].as_str().unwrap().to_string();
        let state = rig.slurm(site, "scontrol", &["show", "job", "-o", &remote]);
        assert!(
            state.contains("JobState=COMPLETED"),
            "{site} {remote}: {state}"
        );
    }
}

#[test]
fn a_job_on_the_cut_off_compute_side_needs_only_the_relay() {
    let Some(rig) = AgentRig::begin("agents-relay") else {
        return;
    };
    let s = server(&rig, "netns-relay", "30s");
    let _a = agents(&rig, &s);
    let s2 = rig.site("s2").clone();
    let compute = s2.compute_netns.clone().expect("s2 has a compute side");
    // From the compute side: the server is out of reach, the agent's relay is not.
    let agent_port = std::fs::read_to_string(s.dir.join("agent-address")).unwrap();
    let agent_port = agent_port.trim().rsplit(':').next().unwrap().to_string();
    let tcp = |addr: &str, port: &str| {
        AgentRig::exec(
            &compute,
            "timeout",
            &[
                "3",
                "bash",
                "-c",
                &format!("exec 3<>/dev/tcp/{addr}/{port}"),
            ],
        )
        .status
        .success()
    };
    assert!(
        !tcp(&rig.server_addr(), &agent_port),
        "the compute side reaches the server"
    );
    assert!(tcp(&s2.compute_addr, &RELAY_PORT.to_string()), "no relay");
    let probe = format!(
        "(timeout 3 bash -c 'exec 3<>/dev/tcp/{}/{agent_port}' && echo direct:reached || echo direct:unreachable)",
        rig.server_addr()
    );
    let c = |site: &str, then: String| {
        json!({
            "site": site, "count": 2, "job_type": "single", "executable": "/bin/bash",
            "arguments": ["-c", format!("\"$COALLOC\" barrier || exit 1; {then}")],
            "environment": { "COALLOC": COALLOC },
        })
    };
    let id = s.submit(&json!({
        "kind": "ordered", "max_wall_time": "2m",
        "component": [
            c("s2", format!("{probe}; \"$COALLOC\" kv put from-s2 hello && \"$COALLOC\" kv get from-s3 --wait 30s")),
            c("s3", "\"$COALLOC\" kv put from-s3 there && \"$COALLOC\" kv get from-s2 --wait 30s".into()),
        ],
    }));
    let j = s.wait_ended(id, 90);
    assert_eq!(j["state"], "finished", "{j}\n{}", s.log());
    let a = &_a;
    let out = a[1].output(id, 0);
    assert!(out.contains("direct:unreachable"), "{out}");
    assert!(out.contains("there"), "{out}");
    assert!(a[2].output(id, 1).contains("hello"));
}

/// An unmodified MPI program (examples/mpi/ring.c, built with `mpicc`) across the three
/// sites' namespaces: two Slurm clusters (one with its compute side behind its login node)
/// and a local site. Each component's PMI traffic goes to its own agent; MPI's own traffic
/// goes between the compute sides, over the routes the rig gives them.
#[test]
fn an_unmodified_mpi_program_runs_across_the_sites_namespaces() {
    use coalloc_testkit::mpi::{check_ranks, mpi_component_at, one_at_a_time, ring};
    let Some(rig) = AgentRig::begin("agents-mpi") else {
        return;
    };
    let Some(ring) = ring() else { return };
    let ring = ring.to_str().unwrap();
    let _one = one_at_a_time();
    let s = server(&rig, "netns-mpi", "30s");
    let a = agents(&rig, &s);
    let sizes = [2u32, 2, 2];
    let comps: Vec<serde_json::Value> = ["s1", "s2", "s3"]
        .iter()
        .zip(sizes)
        .map(|(site, n)| mpi_component_at(site, n, ring, &[]))
        .collect();
    let id = s.submit(&json!({ "kind": "ordered", "max_wall_time": "2m", "component": comps }));
    let j = s.wait_ended(id, 120);
    assert_eq!(
        j["state"],
        "finished",
        "{j}\n{}\n{}",
        a[0].output(id, 0),
        a[1].log()
    );
    assert_eq!(component_sites(&j), ["s1", "s2", "s3"], "{j}");
    check_ranks(|c| a[c].output(id, c), &sizes);
}

fn wait_file(p: &std::path::Path, secs: u64) {
    let t = Instant::now();
    while !p.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "no {}",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn kill_9_of_a_slurm_sites_agent_and_of_the_server_loses_nothing_and_starts_nothing_twice() {
    let Some(rig) = AgentRig::begin("agents-kill") else {
        return;
    };
    let mut s = server(&rig, "netns-kill", "30s");
    let mut a = agents(&rig, &s);
    let mark = mark_dir(&s);
    let then = format!("touch {}/running-$COALLOC_SITE; sleep 4", mark.display());
    let c = |site: &str| {
        let mut v = gated(COALLOC, &mark, 8, true, &then);
        v["site"] = json!(site);
        v
    };
    let id = s.submit(&json!({
        "kind": "ordered", "max_wall_time": "3m", "component": [c("s1"), c("s2"), c("s3")],
    }));
    s.wait_for(id, 60, "started everywhere", |j| {
        j["components"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["state"] == "started")
    });
    // s1's component checks in; its agent dies while it waits at the barrier.
    std::fs::write(mark.join("go-s1"), "").unwrap();
    s.wait_for(id, 30, "s1 ready", |j| {
        j["components"][0]["state"] == "ready"
    });
    a[0].kill();
    std::thread::sleep(Duration::from_secs(1));
    a[0].restart();
    wait_link(&s, "s1", true, 30);
    for site in ["s2", "s3"] {
        std::fs::write(mark.join(format!("go-{site}")), "").unwrap();
    }
    for site in ["s1", "s2", "s3"] {
        wait_file(&mark.join(format!("running-{site}")), 60);
    }
    // Running: kill -9 the server and s2's agent together; both come back.
    s.kill();
    a[1].kill();
    std::thread::sleep(Duration::from_millis(500));
    s.restart();
    a[1].restart();
    let j = s.wait_ended(id, 90);
    assert_eq!(j["state"], "finished", "{j}\n{}", s.log());
    let starts = std::fs::read_to_string(mark.join("starts")).unwrap();
    assert_eq!(
        starts.lines().count(),
        3,
        "each component started once:\n{starts}"
    );
    let launches: Vec<u64> = j["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["launch"].as_u64().unwrap())
        .collect();
    assert_eq!(launches, [1, 2, 3], "{j}");
    assert!(rig.active_jobs("s1").is_empty() && rig.active_jobs("s2").is_empty());
}

/// Cut s1's link (`ip link set … down`) past the grace period with the job claiming or
/// running: it is placed again on s2 and s3 and completes; with the link back, the
/// component left on s1 is cancelled at s1's Slurm.
fn cut_link(name: &str, during_run: bool) {
    let Some(rig) = AgentRig::begin(name) else {
        return;
    };
    let s = server(&rig, name, "3s");
    let _a = agents(&rig, &s);
    let mark = mark_dir(&s);
    // Components run until their site's go file appears, which happens after the cut:
    // the first placement runs on, the one after the cut ends a second later.
    let then = format!(
        "while [ ! -e {}/go-$COALLOC_SITE ]; do sleep 0.1; done; sleep 1",
        mark.display()
    );
    let then = then.as_str();
    let gate = !during_run;
    // 20 processors go to s1 (first of the two largest), 10 to s2; re-placed: s2 and s3.
    let id = s.submit(&json!({
        "kind": "unordered", "max_wall_time": "3m",
        "component": [gated(COALLOC, &mark, 20, gate, then), gated(COALLOC, &mark, 10, gate, then)],
    }));
    let j = s.wait_for(id, 60, "started", |j| match during_run {
        true => j["state"] == "running",
        false => j["components"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["state"] == "started"),
    });
    assert_eq!(component_sites(&j), ["s1", "s2"], "{j}");
    let orphan = j["components"][0]["remote"].as_str().unwrap().to_string();
    assert_eq!(rig.active_jobs("s1"), std::slice::from_ref(&orphan));
    rig.link("s1", false);
    let t = Instant::now();
    loop {
        let site = s.get("/v1/sites")["sites"][0].clone();
        if site["state"] == "unreachable" {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{site}");
        std::thread::sleep(Duration::from_millis(100));
    }
    for site in ["s2", "s3"] {
        std::fs::write(mark.join(format!("go-{site}")), "").unwrap();
    }
    let j = s.wait_ended(id, 90);
    assert_eq!(j["state"], "finished", "{j}\n{}", s.log());
    let mut used = component_sites(&j);
    used.sort();
    assert_eq!(used, ["s2", "s3"], "{j}");
    assert_eq!(
        rig.active_jobs("s1"),
        std::slice::from_ref(&orphan),
        "the orphan runs on, cut off"
    );
    rig.link("s1", true);
    wait_link(&s, "s1", true, 60);
    let t = Instant::now();
    while !rig.active_jobs("s1").is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the orphan {orphan} is still in s1's squeue\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_link_cut_during_claiming_re_places_the_job_and_the_orphan_is_cancelled_at_its_slurm() {
    cut_link("agents-cut-claim", false);
}

#[test]
fn a_link_cut_during_a_run_re_places_the_job_and_the_orphan_is_cancelled_at_its_slurm() {
    cut_link("agents-cut-run", true);
}

#[test]
fn each_slurm_site_refuses_a_client_that_holds_the_other_sites_munge_key() {
    let Some(rig) = AgentRig::begin("agents-munge") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("coalloc-munge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (a, b) in [("s1", "s2"), ("s2", "s1")] {
        let (sa, sb) = (rig.site(a), rig.site(b));
        let conf_b = std::fs::read_to_string(sb.slurm_conf.as_ref().unwrap()).unwrap();
        let socket_a = rig.base().join(a).join("munge/munge.socket");
        let forged: String = conf_b
            .lines()
            .map(|l| match l.starts_with("AuthInfo=") {
                true => format!("AuthInfo=socket={}\n", socket_a.display()),
                false => format!("{l}\n"),
            })
            .collect();
        let conf = dir.join(format!("{a}-at-{b}.conf"));
        std::fs::write(&conf, forged).unwrap();
        let sinfo = |c: &std::path::Path| {
            AgentRig::exec(
                &sa.netns,
                "env",
                &[
                    &format!("SLURM_CONF={}", c.display()),
                    "sinfo",
                    "-h",
                    "-o",
                    "%C",
                ],
            )
        };
        // b's controller is reachable from a's namespace with b's own key...
        let control = sinfo(sb.slurm_conf.as_ref().unwrap());
        assert!(control.status.success(), "{a} -> {b}: {control:?}");
        // ...and refuses a's.
        let refused = sinfo(&conf);
        assert!(
            !refused.status.success(),
            "{b} accepted a client of {a}: {refused:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
