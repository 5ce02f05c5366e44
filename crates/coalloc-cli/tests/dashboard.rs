//! The web dashboard in a real browser: Debian's headless Chromium, driven through its
//! chromedriver (WebDriver over HTTP), opens `/ui` of a running server, and the live table
//! shows a running job's components on their sites as the event stream tells them. A
//! screenshot is kept in the test's output folder (`target/tmp/dashboard/`).

mod common;

use base64::Engine as _;
use coalloc_testkit::server::{barrier_component, component_sites, three_clusters, Server};
use coalloc_testkit::tools::{free_port, temp_dir, tool, Guard};
use common::COALLOC;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A WebDriver session, deleted (which quits the browser) when dropped.
struct Session {
    base: String,
    id: String,
    agent: ureq::Agent,
}

impl Session {
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.id);
        let r = match (method, body) {
            ("GET", _) => self.agent.get(&url).call(),
            ("DELETE", _) => self.agent.delete(&url).call(),
            (_, b) => self.agent.post(&url).send_json(b.unwrap_or(json!({}))),
        };
        r.unwrap().body_mut().read_json().unwrap()
    }

    /// Run a script in the page; its value.
    fn eval(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )["value"]
            .clone()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let url = format!("{}/session/{}", self.base, self.id);
        let _ = self.agent.delete(&url).call();
    }
}

/// The rows of the live jobs table: job, state, and each component's site and text.
const ROWS: &str = "return [...document.querySelectorAll('#jobs tbody tr[data-job]')].map(r => ({
    job: Number(r.dataset.job), state: r.dataset.state,
    comps: [...r.querySelectorAll('.comp')].map(c => ({site: c.dataset.site, text: c.textContent}))}))";

#[test]
fn the_dashboard_shows_a_running_jobs_components_and_their_sites_live() {
    let (Some(_), Some(driver)) = (tool(&["chromium"]), tool(&["chromedriver"])) else {
        return;
    };
    let s = Server::start(
        COALLOC,
        "ui",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let dir = temp_dir("dashboard");
    let port = free_port();
    let log = std::fs::File::create(dir.join("chromedriver.log")).unwrap();
    let _driver = Guard(
        std::process::Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .new_agent();
    let t = Instant::now();
    while agent.get(format!("{base}/status")).call().is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "chromedriver did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let profile = dir.join("profile");
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1366,860",
    ]
    .map(String::from)
    .into_iter()
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect::<Vec<_>>();
    let caps = json!({ "capabilities": { "alwaysMatch": { "browserName": "chrome",
        "goog:chromeOptions": { "binary": "/usr/bin/chromium", "args": args } } } });
    let made: Value = agent
        .post(format!("{base}/session"))
        .send_json(caps)
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    let id = made["value"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session: {made}"))
        .to_string();
    let session = Session { base, id, agent };
    session.call(
        "POST",
        "/url",
        Some(json!({ "url": format!("{}/ui#token={}", s.url, s.token) })),
    );
    // The page is up and connected to the event stream before the job exists.
    let wait = |what: &str, secs: u64, ok: &dyn Fn() -> bool| {
        let t = Instant::now();
        while !ok() {
            assert!(t.elapsed() < Duration::from_secs(secs), "{what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait("the page did not connect", 20, &|| {
        session.eval("return document.querySelector('#status').textContent") == "live"
    });
    assert_eq!(session.eval(ROWS), json!([]));
    // A three-component job that runs for a while after its barrier.
    let comps: Vec<Value> = (0..3)
        .map(|_| {
            barrier_component(
                COALLOC,
                2,
                "",
                "echo dashboard-output-$COALLOC_COMPONENT; sleep 30",
            )
        })
        .collect();
    let job = s.submit(&json!({ "kind": "unordered", "max_wall_time": "1m", "component": comps }));
    let api = s.wait_for(job, 30, "running", |j| j["state"] == "running");
    let sites = component_sites(&api);
    wait("the live table did not show the running job", 20, &|| {
        let rows = session.eval(ROWS);
        let row = &rows[0];
        let shown: Vec<&str> = row["comps"]
            .as_array()
            .map(|c| c.iter().filter_map(|c| c["site"].as_str()).collect())
            .unwrap_or_default();
        row["job"] == job && row["state"] == "running" && shown == sites
    });
    let rows = session.eval(ROWS);
    for (i, c) in rows[0]["comps"].as_array().unwrap().iter().enumerate() {
        let text = c["text"].as_str().unwrap();
        assert!(
            text.starts_with(&format!("c{i} · {} · ", sites[i])),
            "{rows}"
        );
    }
    // The job's timeline, from the events the page saw.
    session.eval("document.querySelector('#jobs tbody tr[data-job]').click(); return null");
    wait("no timeline", 10, &|| {
        let text = session.eval("return document.querySelector('#timeline').textContent");
        text.as_str()
            .is_some_and(|t| t.contains("barrier released") && t.contains("checked in"))
    });
    // The selected job's output, read over GET /v1/jobs/ID/output: every component's line.
    wait("no output", 10, &|| {
        let text = session.eval("return document.querySelector('#output')?.textContent ?? ''");
        text.as_str()
            .is_some_and(|t| (0..3).all(|i| t.contains(&format!("dashboard-output-{i}"))))
    });
    // Let the load charts gather a few samples, then keep a screenshot.
    std::thread::sleep(Duration::from_secs(5));
    let shot = session.call("GET", "/screenshot", None);
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["value"].as_str().unwrap())
        .unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("dashboard.png"), &png).unwrap();
    eprintln!("screenshot: {}", out.join("dashboard.png").display());
    drop(session);
    let _ = std::fs::remove_dir_all(&dir);
}
