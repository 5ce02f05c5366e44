//! End to end with site agents on this host (the netns topology is `agents_netns.rs`): a
//! server whose sites s1 and s2 are reached through `coalloc agent` processes (local
//! backends behind them) beside a direct local site, alpha. The relay of barrier and
//! rendezvous calls, refusals (wrong credential, another site's name, a certificate the
//! agent did not pin), kill -9 of an agent at the barrier and while running, kill -9 of the
//! server, and a link gone silent past the grace period, during claiming and during a run.

mod common;

use base64::Engine;
use coalloc_testkit::agent::{gated_component, mark_dir, wait_link, AgentProc};
use coalloc_testkit::server::Server;
use coalloc_testkit::tools::free_port;
use common::COALLOC;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const GRACE: &str = "2s";

/// A server with agent sites s1 and s2 (`grace` each) and the direct local site alpha.
fn config(sizes: [u32; 3], grace: &str) -> String {
    format!(
        "[server]\nmonitor_interval = \"50ms\"\nagent_bind = \"127.0.0.1:0\"\nheartbeat = \"200ms\"\n\
         [[site]]\nname = \"s1\"\nprocessors = {}\nmanager = {{ type = \"agent\", grace = \"{grace}\" }}\n\
         [[site]]\nname = \"alpha\"\nprocessors = {}\nmanager = {{ type = \"local\" }}\n\
         [[site]]\nname = \"s2\"\nprocessors = {}\nmanager = {{ type = \"agent\", grace = \"{grace}\" }}\n\
         [scheduler]\npolicy = \"fcfs\"\nfit = \"worst\"\n",
        sizes[0], sizes[1], sizes[2]
    )
}

/// An agent's configuration: a local site of `n` slots, its relay on a free port.
fn agent_config(site: &str, n: u32) -> String {
    format!(
        "[agent]\nrelay_bind = \"127.0.0.1:{}\"\n[[site]]\nname = \"{site}\"\nprocessors = {n}\nmanager = {{ type = \"local\" }}\n",
        free_port()
    )
}

/// The shared gated component (coalloc_testkit::agent), under this file's short name.
fn comp(mark: &Path, count: u32, gate: bool, then: &str) -> Value {
    gated_component(COALLOC, mark, count, gate, then)
}

fn job(components: Vec<Value>) -> Value {
    json!({ "kind": "unordered", "max_wall_time": "3m", "component": components })
}

/// One recorded start: launch, site, pid, the URL the component was given.
type Start = (u64, String, u32, String);

/// The recorded starts by (job, component).
fn starts(mark: &Path) -> BTreeMap<(u64, usize), Vec<Start>> {
    let mut m: BTreeMap<_, Vec<_>> = BTreeMap::new();
    for line in std::fs::read_to_string(mark.join("starts"))
        .unwrap_or_default()
        .lines()
    {
        let w: Vec<&str> = line.split_whitespace().collect();
        m.entry((w[0].parse().unwrap(), w[1].parse().unwrap()))
            .or_default()
            .push((
                w[2].parse().unwrap(),
                w[3].to_string(),
                w[4].parse().unwrap(),
                w.get(5).unwrap_or(&"").to_string(),
            ));
    }
    m
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.split(") ").nth(1).unwrap_or("").starts_with('Z'))
        .unwrap_or(false)
}

fn site_of(s: &Server, name: &str) -> Value {
    s.get("/v1/sites")["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == name)
        .unwrap()
        .clone()
}

#[test]
fn components_on_agent_sites_reach_the_barrier_and_the_store_through_their_agent() {
    let s = Server::start(COALLOC, "agent-relay", &config([4, 4, 4], GRACE));
    let a1 = AgentProc::start(&s, "s1", &agent_config("s1", 4), None);
    let a2 = AgentProc::start(&s, "s2", &agent_config("s2", 4), None);
    wait_link(&s, "s1", true, 20);
    wait_link(&s, "s2", true, 20);
    let mark = mark_dir(&s);
    // One component per site (4 processors each fill a site); s1's puts, the others get.
    let id = s.submit(&job(vec![
        comp(&mark, 4, false, "\"$COALLOC\" kv put from-$COALLOC_SITE hi-$COALLOC_SITE"),
        comp(&mark, 4, false, "\"$COALLOC\" kv put from-$COALLOC_SITE hi-$COALLOC_SITE"),
        comp(&mark, 4, false, "\"$COALLOC\" kv put from-$COALLOC_SITE hi-$COALLOC_SITE && for x in s1 s2 alpha; do \"$COALLOC\" kv get from-$x --wait 20s || exit 1; done"),
    ]));
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}");
    let st = starts(&mark);
    let mut by_site = BTreeMap::new();
    for ((_, c), v) in &st {
        assert_eq!(v.len(), 1, "component {c} started once: {v:?}");
        by_site.insert(v[0].1.clone(), v[0].3.clone());
    }
    // Components of an agent site were told their agent's relay, not the server.
    assert_eq!(by_site["alpha"], s.url, "{by_site:?}");
    for site in ["s1", "s2"] {
        assert!(
            by_site[site].starts_with("http://127.0.0.1:") && by_site[site] != s.url,
            "{site}: {by_site:?}"
        );
    }
    // The third component read every site's value through whichever path it had.
    let c2 = st[&(id, 2)][0].1.clone();
    let out = if c2 == "alpha" {
        s.output(id, 2)
    } else {
        let a = if c2 == "s1" { &a1 } else { &a2 };
        std::fs::read_to_string(a.dir.join(format!("state/output/{id}/2.L3.out")))
            .unwrap_or_default()
    };
    for x in ["s1", "s2", "alpha"] {
        assert!(out.contains(&format!("hi-{x}")), "{c2}: {out:?}");
    }
    // Through the relay, a job's secret is needed, and only the barrier and the store pass.
    let relay = by_site["s1"].clone();
    let http = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let status = |path: &str, token: &str| {
        http.get(format!("{relay}{path}"))
            .header("Authorization", format!("Bearer {token}"))
            .call()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(status(&format!("/v1/jobs/{id}/kv/from-s1"), &s.token), 200);
    assert_eq!(
        status(&format!("/v1/jobs/{id}/kv/from-s1"), "not-a-secret"),
        403
    );
    assert_eq!(status("/v1/jobs", &s.token), 404, "the API is not relayed");
    assert_eq!(status(&format!("/v1/jobs/{id}"), &s.token), 404);
    // The sites table shows the agents' links.
    assert_eq!(site_of(&s, "s1")["backend"], "agent");
    assert_eq!(site_of(&s, "s1")["link"]["connected"], true);
}

#[test]
fn agents_with_a_wrong_credential_another_sites_name_or_an_unpinned_certificate_are_refused() {
    let s = Server::start(COALLOC, "agent-refused", &config([4, 4, 4], GRACE));
    let good = coalloc_testkit::agent::enrol(&s, "s1");
    let decode = |t: &str| -> Value {
        let body = t.trim().strip_prefix("coalloc-agent-1.").unwrap();
        serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(body)
                .unwrap(),
        )
        .unwrap()
    };
    let encode = |v: &Value| {
        format!(
            "coalloc-agent-1.{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
        )
    };
    let mut wrong_secret = decode(&good);
    wrong_secret["secret"] = json!("0".repeat(64));
    let mut other_site = decode(&good);
    other_site["site"] = json!("s2");
    coalloc_testkit::agent::enrol(&s, "s2"); // s2 has its own credential, which s1's is not
    let mut unpinned = decode(&good);
    unpinned["fingerprint"] = json!(format!("sha256:{}", "ab".repeat(32)));
    let cases = [
        ("s1", encode(&wrong_secret), "bad credential for site `s1`"),
        ("s2", encode(&other_site), "bad credential for site `s2`"),
        ("s1", encode(&unpinned), "certificate fingerprint mismatch"),
    ];
    for (site, token, why) in cases {
        let mut a = AgentProc::with_token(&s, site, &token, &agent_config(site, 4), None);
        let status = a
            .wait_exit(20)
            .unwrap_or_else(|| panic!("{site}: the agent did not stop: {}", a.log()));
        assert_eq!(status.code(), Some(2), "{}", a.log());
        assert!(a.log().contains(why), "{why}: {}", a.log());
        std::fs::remove_dir_all(&a.dir).unwrap();
    }
    // The server logged its refusals; nothing changed: no link up, the sites as before.
    let log = s.log();
    assert_eq!(log.matches("agent refused").count(), 2, "{log}");
    assert!(log.contains("bad credential for site `s2`"), "{log}");
    for site in ["s1", "s2"] {
        assert_eq!(site_of(&s, site)["link"]["connected"], false);
    }
    // The genuine token still works.
    let _a = AgentProc::with_token(&s, "s1", &good, &agent_config("s1", 4), None);
    wait_link(&s, "s1", true, 20);
}

#[test]
fn kill_9_of_an_agent_at_the_barrier_and_while_running_loses_nothing_and_starts_nothing_twice() {
    let s = Server::start(COALLOC, "agent-kill", &config([4, 4, 4], "20s"));
    let mut a1 = AgentProc::start(&s, "s1", &agent_config("s1", 4), None);
    let _a2 = AgentProc::start(&s, "s2", &agent_config("s2", 4), None);
    wait_link(&s, "s1", true, 20);
    wait_link(&s, "s2", true, 20);
    let mark = mark_dir(&s);
    // s1's component waits at the barrier while the other sites' wait for their go files.
    let then = format!("touch {}/running-$COALLOC_SITE; sleep 2", mark.display());
    let id = s.submit(&job(vec![
        comp(&mark, 4, true, &then),
        comp(&mark, 4, true, &then),
        comp(&mark, 4, true, &then),
    ]));
    let j = s.wait_for(id, 30, "on three sites", |j| {
        j["components"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["state"] == "started")
    });
    std::fs::write(mark.join("go-s1"), "").unwrap();
    s.wait_for(id, 30, "s1 at the barrier", |j| {
        j["components"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["site"] == "s1" && c["state"] == "ready")
    });
    a1.kill();
    std::thread::sleep(Duration::from_millis(800));
    a1.restart();
    wait_link(&s, "s1", true, 20);
    for site in ["alpha", "s2"] {
        std::fs::write(mark.join(format!("go-{site}")), "").unwrap();
    }
    // Committed; kill -9 the agent again while its component runs.
    let t = Instant::now();
    while !mark.join("running-s1").exists() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "s1 never ran: {}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    a1.kill();
    std::thread::sleep(Duration::from_millis(500));
    a1.restart();
    let j2 = s.wait_ended(id, 60);
    assert_eq!(j2["state"], "finished", "{j2}\n{}", a1.log());
    assert_eq!(j2["placement_tries"], 1, "{j2}");
    for (k, v) in starts(&mark) {
        assert_eq!(v.len(), 1, "{k:?} started once: {v:?}");
    }
    assert_eq!(j["components"].as_array().unwrap().len(), 3);
    assert!(a1.log().contains("connected to the server"), "{}", a1.log());
}

#[test]
fn kill_9_of_the_server_while_agents_hold_running_components_loses_no_job() {
    let mut s = Server::start(COALLOC, "agent-server-kill", &config([4, 4, 4], "20s"));
    let a1 = AgentProc::start(&s, "s1", &agent_config("s1", 4), None);
    let a2 = AgentProc::start(&s, "s2", &agent_config("s2", 4), None);
    wait_link(&s, "s1", true, 20);
    wait_link(&s, "s2", true, 20);
    let mark = mark_dir(&s);
    let then = format!("touch {}/running-$COALLOC_SITE; sleep 3", mark.display());
    let id = s.submit(&job(vec![
        comp(&mark, 4, false, &then),
        comp(&mark, 4, false, &then),
        comp(&mark, 4, false, &then),
    ]));
    let t = Instant::now();
    while !["s1", "s2", "alpha"]
        .iter()
        .all(|x| mark.join(format!("running-{x}")).exists())
    {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "not running: {}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    s.kill();
    std::thread::sleep(Duration::from_millis(500));
    s.restart();
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}\n{}\n{}", a1.log(), a2.log());
    // The same three launches, adopted: none placed or started again.
    let launches: Vec<u64> = j["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["launch"].as_u64().unwrap())
        .collect();
    assert_eq!(launches, [1, 2, 3], "{j}");
    for (k, v) in starts(&mark) {
        assert_eq!(v.len(), 1, "{k:?} started once: {v:?}");
    }
}

/// Freeze s1's agent past the grace period (its link goes silent), with the job claiming or
/// running: the job is placed again on the other sites and completes; thawed, the agent
/// reconnects and the component left on s1 is cancelled there.
fn silent_link(name: &str, during_run: bool) {
    // 6 processors fit on s1 and alpha only; s1 comes first. Re-placed: alpha and s2.
    let s = Server::start(COALLOC, name, &config([8, 8, 4], GRACE));
    let a1 = AgentProc::start(&s, "s1", &agent_config("s1", 8), None);
    let _a2 = AgentProc::start(&s, "s2", &agent_config("s2", 4), None);
    wait_link(&s, "s1", true, 20);
    wait_link(&s, "s2", true, 20);
    let mark = mark_dir(&s);
    // Components run until their site's go file appears, which happens after the freeze:
    // the first placement runs on, the one after the freeze ends a second later.
    let then = format!(
        "while [ ! -e {}/go-$COALLOC_SITE ]; do sleep 0.1; done; sleep 1",
        mark.display()
    );
    let gate = !during_run;
    let id = s.submit(&job(vec![
        comp(&mark, 6, gate, &then),
        comp(&mark, 4, gate, &then),
    ]));
    let first = s.wait_for(id, 30, "on s1", |j| {
        let c = j["components"].as_array().unwrap();
        c.iter().any(|c| c["site"] == "s1")
            && match during_run {
                true => j["state"] == "running",
                false => c.iter().all(|c| c["state"] == "started"),
            }
    });
    let orphan = starts(&mark)[&(id, 0)][0].clone();
    assert_eq!(orphan.1, "s1", "{first}");
    a1.signal("-STOP");
    wait_link(&s, "s1", false, 20);
    let t = Instant::now();
    while site_of(&s, "s1")["state"] != "unreachable" {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{}",
            site_of(&s, "s1")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for site in ["alpha", "s2"] {
        std::fs::write(mark.join(format!("go-{site}")), "").unwrap();
    }
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}");
    let mut used: Vec<String> = coalloc_testkit::server::component_sites(&j);
    used.sort();
    assert_eq!(used, ["alpha", "s2"], "{j}");
    let failures = if during_run {
        "completion_failures"
    } else {
        "placement_tries"
    };
    assert!(j[failures].as_u64().unwrap() >= 1, "{j}");
    assert!(
        alive(orphan.2),
        "the orphan runs on at the cut-off site until its agent is back"
    );
    a1.signal("-CONT");
    wait_link(&s, "s1", true, 30);
    let t = Instant::now();
    while alive(orphan.2) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the orphan {orphan:?} was not cancelled:\n{}\n{}",
            s.log(),
            a1.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        s.log()
            .contains("cancelling a launch the agent still holds"),
        "{}",
        s.log()
    );
}

#[test]
fn a_link_silent_past_its_grace_period_during_claiming_re_places_the_job_and_cancels_the_orphan() {
    silent_link("agent-silent-claim", false);
}

#[test]
fn a_link_silent_past_its_grace_period_during_a_run_re_places_the_job_and_cancels_the_orphan() {
    silent_link("agent-silent-run", true);
}

#[test]
fn a_launch_the_server_never_recorded_is_adopted_from_its_agent_after_a_restart() {
    let mut s = Server::start(COALLOC, "agent-unrecorded", &config([2, 2, 2], "20s"));
    let _a1 = AgentProc::start(&s, "s1", &agent_config("s1", 2), None);
    wait_link(&s, "s1", true, 20);
    let runs = s.dir.parent().unwrap().join("runs.log");
    let cmd = format!(
        "echo start $$ >> {0}; sleep 3; echo end $$ >> {0}",
        runs.display()
    );
    let mut c = comp(&mark_dir(&s), 1, false, &cmd);
    c["site"] = json!("s1");
    let id = s.submit(&json!({ "kind": "ordered", "max_wall_time": "2m", "component": [c] }));
    s.wait_for(id, 30, "running", |j| j["state"] == "running");
    s.kill();
    // A crash after the agent accepted the launch but before the server journaled its
    // answer leaves the journal without the launch's `launched` entry: make it so.
    assert_eq!(s.forget_launched_entries(), 1);
    s.restart();
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}");
    assert_eq!(j["components"][0]["site"], "s1", "{j}");
    // The agent's hello listed the launch: the restarted server adopted it (issue 32:
    // nothing started twice) rather than cancel it and start the component again.
    assert_eq!(j["components"][0]["launch"], 1, "{j}");
    std::thread::sleep(Duration::from_secs(1));
    let text = std::fs::read_to_string(&runs).unwrap();
    let count = |word: &str| text.lines().filter(|l| l.starts_with(word)).count();
    assert_eq!((count("start"), count("end")), (1, 1), "{text}");
    assert!(
        s.log().contains("adopting a submission its agent holds"),
        "{}",
        s.log()
    );
}

/// Launches whose jobs left the server's memory are discarded at the agent too: the local
/// backend behind it compacts its launch log (issue 23, item 4), so an agent site's files do
/// not grow for ever either.
#[test]
fn an_agent_sites_launch_log_is_compacted_once_its_jobs_are_gone() {
    let config = "[server]\nmonitor_interval = \"50ms\"\nagent_bind = \"127.0.0.1:0\"\n\
                  heartbeat = \"200ms\"\nmin_job_age = \"0s\"\n\
                  [[site]]\nname = \"s1\"\nprocessors = 16\nmanager = { type = \"agent\" }\n\
                  [scheduler]\npolicy = \"fcfs\"\n";
    let s = Server::start(COALLOC, "agent-discard", config);
    let a = AgentProc::start(&s, "s1", &agent_config("s1", 16), None);
    wait_link(&s, "s1", true, 20);
    let n = 1_100;
    let spec = coalloc_testkit::server::job(vec![coalloc_testkit::server::barrier_component(
        COALLOC, 1, "", "true",
    )]);
    let (code, v) = s.call(
        "POST",
        &format!("/v1/jobs?array=0-{}", n - 1),
        &s.token,
        Some(&spec.to_string()),
    );
    assert_eq!(code, 201, "{v}");
    let log = || {
        walk(&a.dir)
            .into_iter()
            .find(|p| p.ends_with("sites/s1/launches.jsonl"))
    };
    let t = Instant::now();
    loop {
        let active = s.get("/v1/jobs?state=all&limit=1")["jobs"]
            .as_array()
            .map_or(0, Vec::len);
        if active == 0 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "{n} jobs did not end"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut finished = 0;
    let mut after = 0;
    loop {
        let page = s.get(&format!(
            "/v1/history?state=finished&limit=1000&after={after}"
        ));
        finished += page["jobs"].as_array().unwrap().len();
        match page["next"].as_u64() {
            Some(next) => after = next,
            None => break,
        }
    }
    assert_eq!(finished, n as usize, "every job finished");
    // Every launch's request line and start line were written; after the discards of at
    // least 1,000 of them, the log was rewritten with the launches still wanted.
    let path = log().expect("the agent's local backend keeps a launch log");
    let t = Instant::now();
    loop {
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        if lines < n as usize {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{} still has {lines} lines",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The reservations named in a local site's launch log: (made, deleted).
fn reservation_log(log: &Path) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let (mut made, mut deleted) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(n) = v["reserved"]["name"].as_str() {
            made.push(n.to_owned());
        }
        if let Some(n) = v["unreserved"]["name"].as_str() {
            deleted.push(n.to_owned());
        }
    }
    (made, deleted)
}

#[test]
fn a_reserving_job_reserves_on_agent_sites_through_their_agents_and_leaves_nothing() {
    // Issue 31 item 3: s1 and s2 are agent sites that may reserve (their agents run local
    // clusters, which can); alpha is a local site.
    let config = config([4, 4, 4], GRACE).replace(
        "type = \"agent\", grace",
        "type = \"agent\", reserve = \"true\", grace",
    );
    let s = Server::start(COALLOC, "agent-reserve", &config);
    let a1 = AgentProc::start(&s, "s1", &agent_config("s1", 4), None);
    let a2 = AgentProc::start(&s, "s2", &agent_config("s2", 4), None);
    wait_link(&s, "s1", true, 20);
    wait_link(&s, "s2", true, 20);
    let mark = mark_dir(&s);
    let mut spec = job((0..3).map(|_| comp(&mark, 4, false, "true")).collect());
    spec["reserve"] = json!(true);
    let id = s.submit(&spec);
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}");
    let st = starts(&mark);
    let mut sites: Vec<String> = st.values().map(|v| v[0].1.clone()).collect();
    sites.sort();
    assert_eq!(sites, ["alpha", "s1", "s2"], "{st:?}");
    assert!(st.values().all(|v| v.len() == 1), "started once: {st:?}");
    // Each agent's cluster made the job's reservation of its component and deleted it
    // after the job ended.
    for (a, site) in [(&a1, "s1"), (&a2, "s2")] {
        let log = a.dir.join(format!("state/sites/{site}/launches.jsonl"));
        let t = std::time::Instant::now();
        loop {
            let (made, deleted) = reservation_log(&log);
            let mine = |names: &[String]| {
                names
                    .iter()
                    .filter(|n| n.starts_with(&format!("coalloc-J{id}-c")))
                    .count()
            };
            if mine(&made) == 1 && mine(&deleted) == 1 {
                break;
            }
            assert!(
                t.elapsed().as_secs() < 10,
                "{site}: made {made:?}, deleted {deleted:?} ({})",
                log.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
