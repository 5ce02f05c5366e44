//! Agents and components follow the leader (issue 32, item 2), end to end on loopback
//! against a throwaway PostgreSQL cluster: two `coalloc serve` on one database, each with
//! its own API and agent addresses and both listed in the configuration (`server.urls`,
//! `server.agent_urls`); a site's agent enrolled, and a user added, after the standby
//! started (so the standby knows them only through the database's shared files). A job
//! of three components, two of them at the barrier (one on a local site, talking to the
//! servers directly, one on the agent's site, through its agent) and the third held
//! back, when the leader is killed with `kill -9`: the standby takes over, the agent
//! reconnects to it, the held component is let go, and the job commits and ends with
//! every component started once. Skipped without PostgreSQL's binaries unless
//! COALLOC_REQUIRE_POSTGRES=1 (scripts/test.sh).

mod common;

use coalloc_testkit::agent::{gated_component, wait_link, AgentProc};
use coalloc_testkit::postgres::Cluster;
use coalloc_testkit::server::Server;
use coalloc_testkit::tools::free_port;
use common::COALLOC;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// One server's configuration: the shared part, with its own addresses.
fn config(shared: &str, api: u16, agents: u16) -> String {
    shared.replacen(
        "[server]\n",
        &format!("[server]\nbind = \"127.0.0.1:{api}\"\nagent_bind = \"127.0.0.1:{agents}\"\n"),
        1,
    )
}

/// A component pinned to `site` that records its start in `mark/starts`, waits for
/// `mark/go-SITE` when `gate`, checks in at the barrier and writes `mark/passed-SITE`.
fn pinned(mark: &std::path::Path, site: &str, gate: bool) -> Value {
    let m = mark.display();
    let mut c = gated_component(COALLOC, mark, 1, gate, &format!("touch {m}/passed-{site}"));
    c["site"] = json!(site);
    c
}

#[test]
fn agents_and_components_at_the_barrier_follow_the_standby_that_takes_over() {
    let Some(pg) = Cluster::start("follow") else {
        return;
    };
    let db = pg.create_db("coalloc");
    let (api_a, api_b, ag_a, ag_b) = (free_port(), free_port(), free_port(), free_port());
    let shared = format!(
        "[server]\njournal = \"{db}\"\nmonitor_interval = \"50ms\"\nheartbeat = \"200ms\"\n\
         urls = [\"http://127.0.0.1:{api_a}\", \"http://127.0.0.1:{api_b}\"]\n\
         agent_urls = [\"wss://127.0.0.1:{ag_a}\", \"wss://127.0.0.1:{ag_b}\"]\n\
         [[site]]\nname = \"alpha\"\nprocessors = 2\nmanager = {{ type = \"local\" }}\n\
         [[site]]\nname = \"beta\"\nprocessors = 2\nmanager = {{ type = \"local\" }}\n\
         [[site]]\nname = \"remote\"\nprocessors = 2\nmanager = {{ type = \"agent\", grace = \"60s\" }}\n\
         [scheduler]\npolicy = \"fcfs\"\n"
    );
    let mut a = Server::start(COALLOC, "follow-a", &config(&shared, api_a, ag_a));
    let b = Server::standby_with(&a, "follow-b", &config(&shared, api_b, ag_b));
    let t = Instant::now();
    while !b.log().contains("standby on") {
        assert!(t.elapsed() < Duration::from_secs(20), "{}", b.log());
        std::thread::sleep(Duration::from_millis(20));
    }

    // Known to the leader only, after the standby started: the database carries them.
    let v: Value = serde_json::from_str(&a.cli_ok(&["site", "add", "remote", "--json"])).unwrap();
    assert_eq!(v["server"], format!("wss://127.0.0.1:{ag_a}"), "{v}");
    assert_eq!(
        v["others"],
        json!([format!("wss://127.0.0.1:{ag_b}")]),
        "{v}"
    );
    let agent_config = format!(
        "[agent]\nrelay_bind = \"127.0.0.1:{}\"\n[[site]]\nname = \"remote\"\nprocessors = 2\nmanager = {{ type = \"local\" }}\n",
        free_port()
    );
    let agent = AgentProc::with_token(
        &a,
        "remote",
        v["token"].as_str().unwrap(),
        &agent_config,
        None,
    );
    wait_link(&a, "remote", true, 20);
    let alice = a.cli_ok(&["user", "add", "alice"]).trim().to_string();

    // Two components at the barrier (alpha's, remote's), beta's held back by its gate.
    let mark = a.dir.parent().unwrap().join("mark");
    std::fs::create_dir_all(&mark).unwrap();
    let id = a.submit(&json!({ "kind": "ordered", "max_wall_time": "3m", "component": [
        pinned(&mark, "alpha", false), pinned(&mark, "remote", false), pinned(&mark, "beta", true),
    ]}));
    a.wait_for(id, 30, "two components at the barrier", |j| {
        j["components"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["state"] == "ready")
            .count()
            == 2
    });
    // The starts say what each was told: alpha's every server, remote's its agent's relay.
    let starts = std::fs::read_to_string(mark.join("starts")).unwrap();
    let urls = format!("http://127.0.0.1:{api_a},http://127.0.0.1:{api_b}");
    assert!(
        starts
            .lines()
            .any(|l| l.contains(" alpha ") && l.ends_with(&urls)),
        "{starts}"
    );

    let killed = Instant::now();
    a.kill();
    let mut b = b;
    b.wait_leading(10);
    println!(
        "takeover after kill -9: {} ms",
        killed.elapsed().as_millis()
    );
    wait_link(&b, "remote", true, 20);
    println!(
        "agent linked to the new leader: {} ms after the kill",
        killed.elapsed().as_millis()
    );
    // Alice's token, issued by the dead leader, is good at the new one.
    let (code, v) = b.call("GET", "/v1/jobs", &alice, None);
    assert_eq!(code, 200, "{v}");

    std::fs::write(mark.join("go-beta"), "").unwrap();
    let end = b.wait_ended(id, 90);
    assert_eq!(
        end["state"],
        "finished",
        "{end}\n{}\n{}",
        b.log(),
        agent.log()
    );
    for site in ["alpha", "remote", "beta"] {
        let passed = mark.join(format!("passed-{site}"));
        assert!(
            passed.exists(),
            "{site}'s component did not pass the barrier"
        );
    }
    // Every component started once.
    let mut seen: Vec<(String, String)> = starts_of(&mark);
    seen.sort();
    assert_eq!(
        seen,
        [("0", "alpha"), ("1", "remote"), ("2", "beta")]
            .map(|(c, s)| (c.to_string(), s.to_string()))
            .to_vec(),
        "{}",
        std::fs::read_to_string(mark.join("starts")).unwrap()
    );
    drop(agent);
}

/// `(component, site)` of every recorded start.
fn starts_of(mark: &std::path::Path) -> Vec<(String, String)> {
    std::fs::read_to_string(mark.join("starts"))
        .unwrap()
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[1].to_string(), w[3].to_string())
        })
        .collect()
}
