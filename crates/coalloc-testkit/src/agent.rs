//! Site agents for end-to-end tests: enrol a site on a test [`Server`], run `coalloc agent`
//! for it (the server's binary, on this host or inside a network namespace of the agent rig,
//! [`crate::rig::agents`]), `kill -9` it, freeze it, start it again; and the components and
//! waits the agent tests share.

use crate::server::Server;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A `coalloc agent` process of one site.
pub struct AgentProc {
    /// The `coalloc` binary it runs (the server's).
    pub bin: PathBuf,
    pub site: String,
    pub dir: PathBuf,
    pub token: PathBuf,
    pub config: PathBuf,
    /// Run inside this network namespace (`ip netns exec`).
    pub netns: Option<String>,
    child: Option<Child>,
}

/// Enrol `site` on `server`: the token's text.
pub fn enrol(server: &Server, site: &str) -> String {
    let out = Command::new(&server.bin)
        .args(["site", "add", site, "--state-dir"])
        .arg(&server.dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "site add {site}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

impl AgentProc {
    /// Enrol `site` and start its agent with `config` (an agent configuration file's text).
    pub fn start(server: &Server, site: &str, config: &str, netns: Option<&str>) -> AgentProc {
        let token = enrol(server, site);
        AgentProc::with_token(server, site, &token, config, netns)
    }

    /// Start an agent with this token text (maybe a wrong one).
    pub fn with_token(
        server: &Server,
        site: &str,
        token: &str,
        config: &str,
        netns: Option<&str>,
    ) -> AgentProc {
        let dir = server.dir.parent().unwrap().join(format!("agent-{site}"));
        std::fs::create_dir_all(&dir).unwrap();
        let (tok, cfg) = (dir.join("token"), dir.join("agent.toml"));
        std::fs::write(&tok, token).unwrap();
        std::fs::write(&cfg, config).unwrap();
        let mut a = AgentProc {
            bin: server.bin.clone(),
            site: site.to_string(),
            dir,
            token: tok,
            config: cfg,
            netns: netns.map(str::to_owned),
            child: None,
        };
        a.spawn();
        a
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("agent.log"))
            .unwrap();
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&self.bin);
                c
            }
            None => Command::new(&self.bin),
        };
        cmd.arg("agent")
            .arg("--token-file")
            .arg(&self.token)
            .arg("--config")
            .arg(&self.config)
            .arg("--state-dir")
            .arg(self.dir.join("state"))
            .stdout(Stdio::null())
            .stderr(log);
        self.child = Some(cmd.spawn().unwrap());
    }

    /// A component's standard output at this agent's site (the agent's state directory).
    pub fn output(&self, job: u64, component: usize) -> String {
        let dir = self.dir.join(format!("state/output/{job}"));
        let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let n = e.file_name().to_string_lossy().to_string();
                n.starts_with(&format!("{component}.L")) && n.ends_with(".out")
            })
            .map(|e| e.path())
            .collect();
        names.sort();
        names
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("agent.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// `kill -9` the agent (its components and its local launcher go on).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Freeze (SIGSTOP) or thaw (SIGCONT) the agent: a link that goes silent.
    pub fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// Wait for the agent to exit by itself.
    pub fn wait_exit(&mut self, secs: u64) -> Option<ExitStatus> {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(secs) {
            if let Some(s) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Wait until the agent's log contains `text`.
    pub fn wait_log(&self, text: &str, secs: u64) {
        let t = Instant::now();
        while !self.log().contains(text) {
            assert!(
                t.elapsed() < Duration::from_secs(secs),
                "agent {}: no `{text}` in its log:\n{}",
                self.site,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A one-process component of `count` processors that records its start (a line in
/// `MARK/starts`: job, component, launch, site, pid, the URL it was given), waits for the
/// file `MARK/go-SITE` when `gate`, checks in at the barrier (`coalloc barrier`, `coalloc`
/// being the binary), and runs `then`.
pub fn gated_component(
    coalloc: &str,
    mark: &Path,
    count: u32,
    gate: bool,
    then: &str,
) -> serde_json::Value {
    let m = mark.display();
    let wait = if gate {
        format!("while [ ! -e {m}/go-$COALLOC_SITE ]; do sleep 0.05; done;")
    } else {
        String::new()
    };
    serde_json::json!({
        "count": count, "job_type": "single", "executable": "/bin/sh",
        "arguments": ["-c", format!(
            "echo $COALLOC_JOB_ID $COALLOC_COMPONENT $COALLOC_LAUNCH $COALLOC_SITE $$ $COALLOC_URL >> {m}/starts; \
             {wait} \"$COALLOC\" barrier || exit 1; {then}")],
        "environment": { "COALLOC": coalloc },
    })
}

/// A folder for a test's marks, beside the server's state directory.
pub fn mark_dir(s: &Server) -> PathBuf {
    let d = s.dir.parent().unwrap().join("mark");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Wait until site `site` of `server` has its agent's link up (and the site is healthy
/// again: its monitor read the site through the link), or down.
pub fn wait_link(server: &Server, site: &str, connected: bool, secs: u64) {
    let t = Instant::now();
    loop {
        let v = server.get("/v1/sites");
        let s = v["sites"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == site)
            .unwrap()
            .clone();
        if s["link"]["connected"].as_bool() == Some(connected)
            && (!connected || s["healthy"] == true)
        {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "site {site}: link never {}: {s}\n{}",
            if connected { "up" } else { "down" },
            server.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
