//! Fail-over under load, over hosts that are really apart (issue 32, "Show it"): five
//! network namespaces behind a bridge (scripts/netns/sites.sh, prefix `cf`, 10.226.0.0/24),
//! the PostgreSQL journal in the root namespace on the bridge, two `coalloc serve` (hosts
//! 1 and 2, HTTPS, the same configuration listing both) and three agent sites (hosts 3 to
//! 5, local clusters inside). 1,000 jobs of two components are submitted while the leader
//! is killed with `kill -9` three times and cut off from the network (its link down) twice;
//! the client follows the leader and counts only acknowledged submissions. Every
//! acknowledged job finishes, each of its components started once and passed the barrier
//! once; a deposed leader whose network comes back writes no journal entry after its
//! successor's first; the fail-over times (median, max) are printed.
//! Needs root, `ip` and PostgreSQL's binaries (skipped otherwise, unless
//! COALLOC_REQUIRE_POSTGRES=1).

mod common;

use coalloc_testkit::postgres::Cluster;
use common::COALLOC;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const NET: &str = "10.226";
const JOBS: usize = 1_000;

/// The five namespaces of sites.sh; taken down when dropped.
struct Hosts {
    state: PathBuf,
}

impl Hosts {
    fn up() -> Option<Hosts> {
        let state = std::env::temp_dir().join(format!("cf-sites-{}.list", std::process::id()));
        let h = Hosts { state };
        let ok = h.sites(&["up", "5"]);
        ok.then_some(h)
    }

    fn sites(&self, args: &[&str]) -> bool {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/netns/sites.sh");
        let out = Command::new("bash")
            .arg(script)
            .args(args)
            .env("CA_SITES_PREFIX", "cf")
            .env("CA_SITES_NET", NET)
            .env("CA_SITES_STATE", &self.state)
            .output()
            .unwrap();
        if !out.status.success() {
            eprintln!(
                "sites.sh {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        out.status.success()
    }

    /// Host `i`'s link to the bridge up or down (its root-namespace end).
    fn link(&self, i: usize, up: bool) {
        let st = Command::new("ip")
            .args([
                "link",
                "set",
                &format!("cf-s{i}-h"),
                if up { "up" } else { "down" },
            ])
            .status()
            .unwrap();
        assert!(st.success());
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        self.sites(&["down"]);
    }
}

fn addr(host: usize) -> String {
    format!("{NET}.0.{}", 10 + host)
}

/// A `coalloc serve` or `coalloc agent` inside host `host`'s namespace.
struct Proc {
    host: usize,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Proc {
    fn start(host: usize, args: &[&str], log: PathBuf) -> Proc {
        let mut p = Proc {
            host,
            args: args.iter().map(|a| a.to_string()).collect(),
            log,
            child: None,
        };
        p.spawn();
        p
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &format!("cf-site{}", self.host), COALLOC])
            .args(&self.args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Whether it exited by itself within `secs`.
    fn exited(&mut self, secs: u64) -> bool {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(secs) {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.child.is_none()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The API of both servers, over TLS to their shared certificate.
struct Api {
    urls: [String; 2],
    token: String,
    agent: ureq::Agent,
    /// Which of `urls` answered last.
    at: AtomicUsize,
}

impl Api {
    /// One call at the server that answered last, then at the other, until one that leads
    /// answers or `secs` pass: its status and body; `None` when none did.
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        secs: u64,
    ) -> Option<(u16, Value)> {
        let t = Instant::now();
        loop {
            let i = self.at.load(Ordering::Relaxed) % 2;
            let url = format!("{}{path}", self.urls[i]);
            let auth = format!("Bearer {}", self.token);
            let r = match method {
                "GET" => self.agent.get(&url).header("Authorization", &auth).call(),
                _ => self
                    .agent
                    .post(&url)
                    .header("Authorization", &auth)
                    .send(body.unwrap_or("")),
            };
            match r {
                Ok(mut r) if r.status().as_u16() != 503 => {
                    let status = r.status().as_u16();
                    let text = r.body_mut().read_to_string().unwrap_or_default();
                    return Some((status, serde_json::from_str(&text).unwrap_or(Value::Null)));
                }
                _ => {
                    self.at.fetch_add(1, Ordering::Relaxed);
                }
            }
            if t.elapsed() > Duration::from_secs(secs) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Whether server `i` leads (its health is 200).
    fn leads(&self, i: usize) -> bool {
        let url = format!("{}/v1/health", self.urls[i]);
        matches!(self.agent.get(&url).call(), Ok(r) if r.status() == 200)
    }
}

/// A job of two one-process components that record their start (`M/starts`) and their
/// passing the barrier (`M/runs`).
fn job(mark: &Path) -> String {
    let m = mark.display();
    let comp = json!({
        "count": 1, "job_type": "single", "executable": "/bin/sh",
        "arguments": ["-c", format!(
            "echo $COALLOC_JOB_ID.$COALLOC_COMPONENT $COALLOC_LAUNCH >> {m}/starts; \
             \"$COALLOC\" barrier || exit 1; echo $COALLOC_JOB_ID.$COALLOC_COMPONENT $COALLOC_LAUNCH >> {m}/runs")],
        "environment": { "COALLOC": COALLOC },
    });
    json!({ "kind": "unordered", "max_wall_time": "10m", "component": [comp.clone(), comp] })
        .to_string()
}

/// `job.component` to the launches recorded in `file`.
fn lines_of(file: &Path) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for l in std::fs::read_to_string(file).unwrap_or_default().lines() {
        let mut w = l.split_whitespace();
        let (Some(k), Some(launch)) = (w.next(), w.next()) else {
            continue;
        };
        m.entry(k.to_string()).or_default().push(launch.to_string());
    }
    m
}

fn median(v: &mut [u128]) -> u128 {
    v.sort();
    v[v.len() / 2]
}

#[test]
fn a_thousand_jobs_through_five_leader_failures_each_run_once() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    if coalloc_testkit::postgres::binaries().is_none() {
        // Says why, or fails when PostgreSQL is required.
        assert!(Cluster::start("failover").is_none());
        return;
    }
    // The bridge first: the database listens on its address.
    let Some(hosts) = Hosts::up() else {
        panic!("sites.sh up failed (see above)");
    };
    let pg = Cluster::start_on("failover", &format!("{NET}.0.1"), &format!("{NET}.0.0/24"))
        .expect("PostgreSQL");
    let db = pg
        .create_db("coalloc")
        .replace("127.0.0.1", &format!("{NET}.0.1"));
    let root = std::env::temp_dir().join(format!("coalloc-e2e-failover-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mark = root.join("mark");
    std::fs::create_dir_all(&mark).unwrap();
    let mut config = format!(
        "[server]\nbind = \"0.0.0.0:8443\"\nagent_bind = \"0.0.0.0:7443\"\njournal = \"{db}\"\n\
         monitor_interval = \"100ms\"\nheartbeat = \"300ms\"\n\
         urls = [\"https://{a}:8443\", \"https://{b}:8443\"]\n\
         agent_urls = [\"wss://{a}:7443\", \"wss://{b}:7443\"]\n",
        a = addr(1),
        b = addr(2)
    );
    for s in 3..=5 {
        config += &format!(
            "[[site]]\nname = \"s{s}\"\nprocessors = 16\nmanager = {{ type = \"agent\", grace = \"120s\" }}\n"
        );
    }
    config += "[scheduler]\npolicy = \"fcfs\"\nfit = \"worst\"\n";
    std::fs::write(root.join("server.toml"), &config).unwrap();
    let serve = |i: usize| {
        let config = root.join("server.toml").display().to_string();
        let dir = root.join(format!("server{i}")).display().to_string();
        let args = ["serve", "--config", &config, "--state-dir", &dir];
        Proc::start(i, &args, root.join(format!("server{i}.log")))
    };
    // The first leads (started alone); the token and the certificate are both servers'
    // (shared through the database).
    let first = serve(1);
    let info = root.join("server1/server.json");
    let t = Instant::now();
    let fingerprint = loop {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&info).unwrap_or_default())
            .unwrap_or(Value::Null);
        if v["standby"] == false || (v["url"].is_string() && v["standby"].is_null()) {
            break v["fingerprint"].as_str().unwrap().to_string();
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{}", first.log());
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut servers = [first, serve(2)];
    let token = std::fs::read_to_string(root.join("server1/token"))
        .unwrap()
        .trim()
        .to_string();
    let client = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build();
    let api = Api {
        urls: [
            format!("https://{}:8443", addr(1)),
            format!("https://{}:8443", addr(2)),
        ],
        token,
        agent: coalloc_pin::blocking::agent(&fingerprint, client).unwrap(),
        at: AtomicUsize::new(0),
    };

    // The agents, enrolled at the leader: their tokens list both servers.
    let mut agents = Vec::new();
    for s in 3..=5 {
        let (code, v) = api
            .call("POST", &format!("/v1/sites/s{s}/agent-token"), None, 20)
            .unwrap();
        assert_eq!(code, 200, "{v}");
        let dir = root.join(format!("agent{s}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("token"), v["token"].as_str().unwrap()).unwrap();
        std::fs::write(
            dir.join("agent.toml"),
            format!(
                "[agent]\nrelay_bind = \"{}:7100\"\n[[site]]\nname = \"s{s}\"\nprocessors = 16\nmanager = {{ type = \"local\" }}\n",
                addr(s)
            ),
        )
        .unwrap();
        let [token, config, state] =
            ["token", "agent.toml", "state"].map(|f| dir.join(f).display().to_string());
        let args = [
            "agent",
            "--token-file",
            &token,
            "--config",
            &config,
            "--state-dir",
            &state,
        ];
        agents.push(Proc::start(s, &args, dir.join("agent.log")));
    }

    // The submissions, on a thread of their own: only acknowledged ones count.
    let acked = Mutex::new(Vec::<u64>::new());
    let unanswered = AtomicUsize::new(0);
    let body = job(&mark);
    let mut times: Vec<u128> = Vec::new();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while acked.lock().unwrap().len() < JOBS {
                match api.call("POST", "/v1/jobs", Some(&body), 30) {
                    Some((201, v)) => acked.lock().unwrap().push(v["job"].as_u64().unwrap()),
                    Some((code, v)) => panic!("submission refused: {code} {v}"),
                    None => {
                        unanswered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        // Five faults of the leader, one per 150 acknowledged submissions.
        for (k, cut) in [false, true, false, true, false].into_iter().enumerate() {
            let t = Instant::now();
            while acked.lock().unwrap().len() < 150 * (k + 1) {
                assert!(
                    t.elapsed() < Duration::from_secs(180),
                    "submissions stalled"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let leader = (0..2).find(|&i| api.leads(i)).expect("a leader");
            let other = 1 - leader;
            let epoch_before = pg.psql("coalloc", "SELECT epoch FROM lease");
            let fault = Instant::now();
            if cut {
                hosts.link(servers[leader].host, false);
            } else {
                servers[leader].kill();
            }
            while !api.leads(other) {
                assert!(
                    fault.elapsed() < Duration::from_secs(20),
                    "no takeover:\n{}",
                    servers[other].log()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let took = fault.elapsed().as_millis();
            println!(
                "fault {} ({}): server {} leads {took} ms later",
                k + 1,
                if cut { "link cut" } else { "kill -9" },
                other + 1
            );
            times.push(took);
            if cut {
                // Deposed and cut off, it stops; back on the network, it wrote nothing
                // after its successor's first entry.
                assert!(servers[leader].exited(20), "{}", servers[leader].log());
                hosts.link(servers[leader].host, true);
                let late = pg.psql(
                    "coalloc",
                    &format!(
                        "SELECT count(*) FROM journal WHERE epoch = {epoch_before} AND seq > \
                         (SELECT coalesce(min(seq), 0) FROM journal WHERE epoch > {epoch_before})"
                    ),
                );
                assert_eq!(late, "0", "the deposed leader wrote after its successor");
            }
            servers[leader].spawn();
        }
    });
    let ids = acked.into_inner().unwrap();
    println!(
        "{} acknowledged, {} unanswered submissions",
        ids.len(),
        unanswered.load(Ordering::Relaxed)
    );
    let t = Instant::now();
    for id in &ids {
        loop {
            let (code, v) = api
                .call("GET", &format!("/v1/jobs/{id}"), None, 30)
                .unwrap();
            assert_eq!(code, 200, "job {id}: {v}");
            match v["state"].as_str() {
                Some("finished") => break,
                Some("failed" | "cancelled") => panic!("job {id}: {v}"),
                _ => {}
            }
            assert!(
                t.elapsed() < Duration::from_secs(300),
                "job {id} never ended: {v}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let (starts, runs) = (lines_of(&mark.join("starts")), lines_of(&mark.join("runs")));
    for id in &ids {
        for c in 0..2 {
            let k = format!("{id}.{c}");
            assert_eq!(
                starts.get(&k).map(Vec::len),
                Some(1),
                "{k} started: {:?}",
                starts.get(&k)
            );
            assert_eq!(
                runs.get(&k).map(Vec::len),
                Some(1),
                "{k} ran: {:?}",
                runs.get(&k)
            );
        }
    }
    // Nothing at all, acknowledged or not, started twice.
    let twice: Vec<_> = starts.iter().filter(|(_, l)| l.len() > 1).collect();
    assert!(twice.is_empty(), "started twice: {twice:?}");
    let mut t = times.clone();
    println!(
        "fail-over times (ms): {times:?}; median {}, max {}",
        median(&mut t),
        times.iter().max().unwrap()
    );
    assert!(times.iter().all(|&ms| ms < 10_000), "{times:?}");
    drop(agents);
    drop(servers);
    drop(hosts);
}
