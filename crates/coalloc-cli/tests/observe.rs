//! What operators look at, against real programs: Debian's `prometheus` scraping
//! `/metrics` of a running server and answering through its own query API.

mod common;

use coalloc_testkit::server::{barrier_component, three_clusters, Server};
use coalloc_testkit::tools::{free_port, temp_dir, tool, Guard};
use common::COALLOC;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Prometheus' answer to an instant query: its result vector.
fn query(agent: &ureq::Agent, base: &str, q: &str) -> Vec<Value> {
    let r = agent
        .get(format!("{base}/api/v1/query"))
        .query("query", q)
        .call();
    let Ok(mut r) = r else { return Vec::new() };
    let v: Value = r.body_mut().read_json().unwrap_or(Value::Null);
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn value(sample: &Value) -> f64 {
    sample["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
}

#[test]
fn prometheus_scrapes_the_coallocation_latency_and_each_sites_idle_processors() {
    let Some(prometheus) = tool(&["prometheus"]) else {
        return;
    };
    let s = Server::start(
        COALLOC,
        "prom",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let dir = temp_dir("prometheus");
    let target = s.url.trim_start_matches("http://");
    let config = format!(
        "global:\n  scrape_interval: 500ms\nscrape_configs:\n  - job_name: coalloc\n    \
         authorization:\n      credentials_file: {token}\n    static_configs:\n      \
         - targets: ['{target}']\n",
        token = s.dir.join("token").display()
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let _prom = Guard(
        std::process::Command::new(prometheus)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    // Two co-allocated jobs pass their barriers while Prometheus scrapes.
    for _ in 0..2 {
        let comps: Vec<Value> = (0..3)
            .map(|_| barrier_component(COALLOC, 2, "", "sleep 1"))
            .collect();
        s.submit(&json!({ "kind": "unordered", "max_wall_time": "1m", "component": comps }));
    }
    let base = format!("http://127.0.0.1:{port}");
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .new_agent();
    let t = Instant::now();
    let (latency, idle) = loop {
        let latency = query(&agent, &base, "coalloc_coallocation_latency_seconds_count");
        let idle = query(
            &agent,
            &base,
            "count_over_time(coalloc_site_idle_processors[1m])",
        );
        let done = latency.first().is_some_and(|l| value(l) >= 2.0)
            && idle.len() == 3
            && idle.iter().all(|i| value(i) >= 3.0);
        if done {
            break (latency, idle);
        }
        assert!(
            t.elapsed() < Duration::from_secs(40),
            "no samples: latency {latency:?}, idle {idle:?}\n{}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(latency[0]["metric"]["job"], "coalloc", "{latency:?}");
    let mut sites: Vec<String> = idle
        .iter()
        .map(|i| i["metric"]["site"].as_str().unwrap_or("").to_string())
        .collect();
    sites.sort();
    assert_eq!(sites, ["alpha", "beta", "gamma"]);
    // The histogram's buckets are there too, and its sum is a latency (well under a minute).
    let buckets = query(&agent, &base, "coalloc_coallocation_latency_seconds_bucket");
    assert!(buckets.len() > 10, "{buckets:?}");
    let sum = query(&agent, &base, "coalloc_coallocation_latency_seconds_sum");
    assert!((0.0..60.0).contains(&value(&sum[0])), "{sum:?}");
    // Jobs by state and the queues by priority are there too.
    assert_eq!(query(&agent, &base, "coalloc_jobs").len(), 6);
    assert_eq!(query(&agent, &base, "coalloc_queued_jobs").len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `coalloc events` (and `--json`) print a job's story as it happens.
#[test]
fn coalloc_events_prints_the_stream_in_the_terminal_and_as_json_lines() {
    let s = Server::start(
        COALLOC,
        "events",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let spawn = |extra: &[&str]| {
        std::process::Command::new(COALLOC)
            .arg("events")
            .args(extra)
            .arg("--state-dir")
            .arg(&s.dir)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The stream is open before the job is submitted: wait for both readers to connect.
    let json = Guard(spawn(&["--json", "--job", "1"]));
    let text = Guard(spawn(&["--job", "1"]));
    std::thread::sleep(Duration::from_millis(500));
    let comps: Vec<Value> = (0..2)
        .map(|_| barrier_component(COALLOC, 1, "", "true"))
        .collect();
    let id = s.submit(&json!({ "kind": "unordered", "max_wall_time": "1m", "component": comps }));
    assert_eq!(id, 1);
    s.wait_ended(id, 30);
    // The server's stop ends the streams, and both commands with them.
    drop(s);
    let read = |mut g: Guard| {
        let out = g.0.stdout.take().unwrap();
        let text = std::io::read_to_string(out).unwrap();
        assert!(g.0.wait().unwrap().success());
        text
    };
    let lines = read(json);
    let events: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    for want in [
        "submitted",
        "placed",
        "component_started",
        "committed",
        "finished",
    ] {
        assert!(names.contains(&want), "{want}: {names:?}");
    }
    assert!(
        events.iter().all(|e| e["job"] == 1 && e["time"].is_i64()),
        "{lines}"
    );
    let human = read(text);
    assert!(
        human
            .lines()
            .any(|l| l.contains("committed") && l.contains("job 1")),
        "{human}"
    );
    assert_eq!(human.lines().count(), events.len(), "{human}\n{lines}");
}
