//! A real `coalloc serve` process for end-to-end tests and the benchmarks: its own state
//! directory and configuration, HTTP calls with its token, `kill -9` and restart; and the
//! job shapes and checks the tests build on it.
//!
//! A library cannot name the binary (`CARGO_BIN_EXE_coalloc` exists only in the `coalloc`
//! package's own tests and examples), so whoever starts a server, or builds a component that
//! calls `coalloc barrier`, passes the binary's path: coalloc-cli's tests pass
//! `env!("CARGO_BIN_EXE_coalloc")`, the benchmarks the path they were given.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod standby;

/// The site of every component of a job as `GET /v1/jobs/{id}` shows it (`-` if none yet).
pub fn component_sites(j: &serde_json::Value) -> Vec<String> {
    j["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["site"].as_str().unwrap_or("-").to_string())
        .collect()
}

/// A one-process component of `count` processors: `before` (a shell snippet), the check-in
/// at the start barrier with `coalloc barrier` (`coalloc` is the binary), then `then`.
pub fn barrier_component(coalloc: &str, count: u32, before: &str, then: &str) -> Value {
    serde_json::json!({
        "count": count, "job_type": "single", "executable": "/bin/sh",
        "arguments": ["-c", format!("{before} \"$COALLOC\" barrier || exit 1; {then}")],
        "environment": { "COALLOC": coalloc },
    })
}

/// An unordered job of these components, 5 minutes of wall time.
pub fn job(components: Vec<Value>) -> Value {
    json!({ "kind": "unordered", "max_wall_time": "5m", "component": components })
}

/// `GET /v1/sites`' entry of site `name`.
pub fn site(s: &Server, name: &str) -> Value {
    let v = s.get("/v1/sites");
    v["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no site {name}: {v}"))
}

/// Polls site `name` until `pred` holds (for up to `secs`).
pub fn wait_site(s: &Server, name: &str, secs: u64, what: &str, pred: impl Fn(&Value) -> bool) {
    let t = Instant::now();
    loop {
        let v = site(s, name);
        if pred(&v) {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "site {name}: not {what}: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// (site, resource manager's id) of every component's current launch.
pub fn remotes(s: &Server, id: u64) -> Vec<(String, String)> {
    let j = s.job(id);
    j["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["site"].as_str().unwrap_or("-").to_string(),
                c["remote"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect()
}

/// A `coalloc serve` process. Its files: `ROOT/config.toml`, the state directory
/// `ROOT/state` ([`Server::dir`]) and, for a test's server, its log `ROOT/server.log`.
pub struct Server {
    /// The `coalloc` binary it runs (also for [`Server::cli`] and the agents).
    pub bin: PathBuf,
    /// The state directory.
    pub dir: PathBuf,
    pub config: PathBuf,
    pub url: String,
    pub token: String,
    child: Option<Child>,
    agent: ureq::Agent,
    /// Environment variables the server is started with (test hooks).
    pub env: Vec<(String, String)>,
    /// A benchmark's server ([`Server::start_in`]): its log on this process's stderr at
    /// `RUST_LOG=warn`, no time limit on a call, and its jobs left alone when dropped.
    bench: bool,
}

/// Three local clusters of `slots` each, with whatever the `[scheduler]` table says.
pub fn three_clusters(slots: [u32; 3], scheduler: &str) -> String {
    let mut s =
        String::from("[server]\nmonitor_interval = \"50ms\"\nsample_interval = \"200ms\"\n");
    for (name, n) in ["alpha", "beta", "gamma"].iter().zip(slots) {
        s += &format!(
            "[[site]]\nname = \"{name}\"\nprocessors = {n}\nmanager = {{ type = \"local\" }}\n"
        );
    }
    s + "[scheduler]\n" + scheduler + "\n"
}

impl Server {
    /// A test's server: binary `coalloc` serving `config` on a fresh folder named after the
    /// test under the system's temporary folder.
    pub fn start(coalloc: impl AsRef<Path>, name: &str, config: &str) -> Server {
        Server::start_with_env(coalloc, name, config, &[])
    }

    /// [`Server::start`] with these environment variables (test hooks), also at restarts
    /// unless [`Server::env`] is changed.
    pub fn start_with_env(
        coalloc: impl AsRef<Path>,
        name: &str,
        config: &str,
        env: &[(&str, &str)],
    ) -> Server {
        let dir = std::env::temp_dir().join(format!("coalloc-e2e-{name}-{}", std::process::id()));
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Server::fresh(coalloc.as_ref(), &dir, config, env, false)
    }

    /// A benchmark's server: `config` served on the folder `dir`, emptied first. Its log
    /// goes to this process's stderr (warnings only); dropped, it is stopped with its jobs
    /// left as they are (cancelling a queue of a million would take a while).
    pub fn start_in(coalloc: impl AsRef<Path>, dir: &Path, config: &str) -> Server {
        let env = vec![("RUST_LOG".to_string(), "warn".to_string())];
        Server::fresh(coalloc.as_ref(), dir, config, env, true)
    }

    /// A benchmark's server again on the folder [`Server::start_in`] made (after the first
    /// was killed).
    pub fn restart_in(coalloc: impl AsRef<Path>, dir: &Path) -> Server {
        let env = vec![("RUST_LOG".to_string(), "warn".to_string())];
        let mut s = Server::new(coalloc.as_ref(), dir, env, true);
        s.spawn();
        s
    }

    fn fresh(
        coalloc: &Path,
        dir: &Path,
        config: &str,
        env: Vec<(String, String)>,
        bench: bool,
    ) -> Server {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let mut s = Server::new(coalloc, dir, env, bench);
        std::fs::write(&s.config, config).unwrap();
        s.spawn();
        s
    }

    fn new(coalloc: &Path, dir: &Path, env: Vec<(String, String)>, bench: bool) -> Server {
        let limit = (!bench).then_some(Duration::from_secs(30));
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(limit)
            .build()
            .new_agent();
        Server {
            bin: coalloc.to_path_buf(),
            dir: dir.join("state"),
            config: dir.join("config.toml"),
            url: String::new(),
            token: String::new(),
            child: None,
            agent,
            env,
            bench,
        }
    }

    fn spawn(&mut self) {
        self.launch();
        self.wait_served(Duration::from_secs(20));
    }

    /// Start `coalloc serve` on this server's configuration and state directory.
    fn launch(&mut self) {
        let _ = std::fs::remove_file(self.dir.join("server.json"));
        let log = if self.bench {
            Stdio::inherit()
        } else {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.parent().unwrap().join("server.log"))
                .unwrap()
                .into()
        };
        let child = Command::new(&self.bin)
            .args(["serve", "--config"])
            .arg(&self.config)
            .arg("--state-dir")
            .arg(&self.dir)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// Wait up to `limit` for the server to serve (its `server.json`, not a standby's); then
    /// its URL and token are known.
    fn wait_served(&mut self, limit: Duration) {
        let t = Instant::now();
        while !self.served() {
            assert!(
                t.elapsed() < limit,
                "the server did not start: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the server serves (its `server.json`, not a standby's); if so, its URL and
    /// token are read.
    fn served(&mut self) -> bool {
        let Ok(text) = std::fs::read_to_string(self.dir.join("server.json")) else {
            return false;
        };
        match serde_json::from_str::<Value>(&text) {
            // A standby's (issue 32, item 2) says it waits.
            Ok(v) if v["standby"] != true => {
                self.url = v["url"].as_str().unwrap().to_string();
                self.token = std::fs::read_to_string(self.dir.join("token"))
                    .unwrap()
                    .trim()
                    .to_string();
                true
            }
            _ => false,
        }
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.parent().unwrap().join("server.log")).unwrap_or_default()
    }

    /// `kill -9` the server, then start it again on the same state directory.
    pub fn kill_and_restart(&mut self) {
        self.kill();
        self.restart();
    }

    /// `kill -9` the server (its launchers and components go on).
    pub fn kill(&mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// Run `coalloc serve` on this server's configuration and state directory (it must not
    /// be running) expecting it to refuse to start; what it printed on stderr.
    pub fn serve_refused(&self) -> String {
        let out = Command::new(&self.bin)
            .args(["serve", "--config"])
            .arg(&self.config)
            .arg("--state-dir")
            .arg(&self.dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "the server started: {err}");
        err
    }

    /// Start the server again on the same state directory, after [`Server::kill`].
    pub fn restart(&mut self) {
        self.spawn();
    }

    /// Edit a stopped server's journal into the state a crash between a launch's acceptance
    /// and its journaling leaves: its `launched` entries deleted. How many were.
    pub fn forget_launched_entries(&self) -> usize {
        let journal = rusqlite::Connection::open(self.dir.join("journal.sqlite")).unwrap();
        journal
            .execute(
                r#"DELETE FROM journal WHERE entry LIKE '%"e":"launched"%'"#,
                [],
            )
            .unwrap()
    }

    /// How many entries of kind `e` (`finished`, `launched`, ...) the journal holds.
    pub fn journal_entries(&self, e: &str) -> usize {
        let journal = rusqlite::Connection::open(self.dir.join("journal.sqlite")).unwrap();
        let n: i64 = journal
            .query_row(
                "SELECT count(*) FROM journal WHERE entry LIKE ?1",
                [format!("%\"e\":\"{e}\"%")],
                |r| r.get(0),
            )
            .unwrap();
        n as usize
    }

    /// SIGTERM the server; whether it exited within `within` (else it is killed with -9).
    pub fn terminate(&mut self, within: Duration) -> bool {
        let Some(mut c) = self.child.take() else {
            return true;
        };
        unsafe_kill(c.id() as i32, 15);
        let t = Instant::now();
        while t.elapsed() < within {
            if let Ok(Some(_)) = c.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
        false
    }

    /// `METHOD path` with `token` and `body`: the status and the answer (JSON, or the text
    /// as a JSON string).
    pub fn call(&self, method: &str, path: &str, token: &str, body: Option<&str>) -> (u16, Value) {
        let url = format!("{}{path}", self.url);
        let auth = format!("Bearer {token}");
        let r = match (method, body) {
            ("GET", _) => self.agent.get(&url).header("Authorization", &auth).call(),
            ("DELETE", _) => self
                .agent
                .delete(&url)
                .header("Authorization", &auth)
                .call(),
            ("PUT", b) => self
                .agent
                .put(&url)
                .header("Authorization", &auth)
                .send(b.unwrap_or("")),
            (_, b) => self
                .agent
                .post(&url)
                .header("Authorization", &auth)
                .send(b.unwrap_or("")),
        };
        let mut r = r.unwrap();
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string().unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// `GET /metrics`: the Prometheus text.
    pub fn metrics(&self) -> String {
        match self.call("GET", "/metrics", &self.token, None) {
            (200, Value::String(text)) => text,
            (code, v) => panic!("/metrics: {code} {v}"),
        }
    }

    /// `coalloc submit --reserve --start START --parsable FILE` (issue 31): the job's id.
    pub fn submit_reserved(&self, file: &Path, start: &str) -> u64 {
        let out = self.cli_ok(&[
            "submit",
            "--reserve",
            "--start",
            start,
            "--parsable",
            file.to_str().unwrap(),
        ]);
        out.trim().parse().unwrap()
    }

    /// The promised start of reserving job `id` once every component is started into its
    /// reservation (within `secs`); every component promises the same.
    pub fn promised_start(&self, id: u64, secs: u64) -> i64 {
        // A job's view may list no component for a moment (after a restart, or queued
        // again): that is not "every component started".
        let j = self.wait_for(id, secs, "started into its reservations", |j| {
            j["components"].as_array().is_some_and(|c| {
                !c.is_empty()
                    && c.iter().all(|c| {
                        c["reservation_state"] == "started" && c["promised_start"].is_i64()
                    })
            })
        });
        let starts: Vec<i64> = j["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["promised_start"].as_i64().unwrap())
            .collect();
        assert!(starts.windows(2).all(|w| w[0] == w[1]), "{j}");
        starts[0]
    }

    /// Wait until every component of job `id` was submitted at its site and the resource
    /// manager's id for it journaled (`remote` in its view). A component started into its
    /// reservation shows `started` before that: a `kill -9` in between leaves a launch the
    /// restart cannot find, which it fails and places again (at a new start), by design.
    pub fn wait_submitted(&self, id: u64, secs: u64) -> Value {
        self.wait_for(id, secs, "submitted everywhere", |j| {
            j["components"]
                .as_array()
                .is_some_and(|c| !c.is_empty() && c.iter().all(|c| c["remote"].is_string()))
        })
    }

    /// Mark every site unusable, so that what is submitted next stays queued.
    pub fn hold_the_queue(&self) {
        let sites = self.get("/v1/sites");
        for site in sites["sites"].as_array().unwrap() {
            let path = format!("/v1/sites/{}/usable", site["name"].as_str().unwrap());
            let (code, v) = self.call("PUT", &path, &self.token, Some(r#"{"usable": false}"#));
            assert_eq!(code, 200, "{v}");
        }
    }

    /// `coalloc ARGS --state-dir DIR` against this server.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(&self.bin)
            .args(args)
            .arg("--state-dir")
            .arg(&self.dir)
            .output()
            .unwrap()
    }

    /// The standard output of `coalloc ARGS` against this server, which must succeed.
    pub fn cli_ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "coalloc {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `METHOD path` with the server's own token, whatever its status: the answer.
    pub fn api(&self, method: &str, path: &str, body: Option<&str>) -> Value {
        self.call(method, path, &self.token, body).1
    }

    /// `GET path`, which must answer 200.
    pub fn get(&self, path: &str) -> Value {
        let (s, v) = self.call("GET", path, &self.token, None);
        assert_eq!(s, 200, "GET {path}: {v}");
        v
    }

    /// Submit a native JSON job; its number.
    pub fn submit(&self, job: &Value) -> u64 {
        let (s, v) = self.call("POST", "/v1/jobs", &self.token, Some(&job.to_string()));
        assert_eq!(s, 201, "submit: {v}");
        v["job"].as_u64().unwrap()
    }

    pub fn job(&self, id: u64) -> Value {
        self.get(&format!("/v1/jobs/{id}"))
    }

    /// Wait until the job has ended; the job.
    pub fn wait_ended(&self, id: u64, secs: u64) -> Value {
        let t = Instant::now();
        loop {
            let j = self.job(id);
            if matches!(j["state"].as_str(), Some("finished" | "failed")) {
                return j;
            }
            assert!(
                t.elapsed() < Duration::from_secs(secs),
                "job {id} did not end: {j}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until `pred` holds for the job.
    pub fn wait_for(&self, id: u64, secs: u64, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let t = Instant::now();
        loop {
            let j = self.job(id);
            if pred(&j) {
                return j;
            }
            assert!(
                t.elapsed() < Duration::from_secs(secs),
                "job {id}: not {what}: {j}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The component's output files' text (every launch).
    pub fn output(&self, job: u64, component: usize) -> String {
        let dir = self.dir.join("output").join(job.to_string());
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.sort();
        files
            .iter()
            .filter(|p| {
                let n = p.file_name().unwrap().to_string_lossy().to_string();
                n.starts_with(&format!("{component}.L")) && n.ends_with(".out")
            })
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        if !self.bench {
            // A test's server: cancel what is left, then stop.
            if let Some(jobs) = self.api("GET", "/v1/jobs", None)["jobs"].as_array() {
                for j in jobs {
                    let _ = self.api("DELETE", &format!("/v1/jobs/{}", j["id"]), None);
                }
            }
        }
        unsafe_kill(c.id() as i32, 15);
        let _ = c.wait();
    }
}

fn unsafe_kill(pid: i32, sig: i32) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

/// Processes whose command line contains `needle` (from /proc).
pub fn processes_with(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .starts_with(needle)
                })
                .unwrap_or(false)
        })
        .filter(|pid| {
            // Not zombies.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| !s.split(") ").nth(1).unwrap_or("").starts_with('Z'))
                .unwrap_or(false)
        })
        .collect()
}

/// Each component of each job of `ids` (`components` each) wrote its
/// `$COALLOC_JOB_ID.$COALLOC_COMPONENT` line into `starts` exactly once: nothing was lost and
/// nothing started twice.
pub fn assert_started_once(starts: &Path, ids: &[u64], components: usize) {
    let text = std::fs::read_to_string(starts).unwrap_or_default();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort();
    let mut want: Vec<String> = ids
        .iter()
        .flat_map(|i| (0..components).map(move |c| format!("{i}.{c}")))
        .collect();
    want.sort();
    assert_eq!(
        lines,
        want.iter().map(String::as_str).collect::<Vec<_>>(),
        "starts: {text}"
    );
}
