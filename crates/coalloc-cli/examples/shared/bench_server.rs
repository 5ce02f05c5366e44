//! A `coalloc serve` process for the benchmarks under examples/ (included with `#[path]`):
//! start it on a fresh state directory, call its API with its token, stop it.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    pub child: Child,
    pub url: String,
    pub token: String,
    pub state: PathBuf,
    agent: ureq::Agent,
}

impl Server {
    pub fn start(coalloc: &str, dir: &Path, config: &str) -> Server {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("config.toml"), config).unwrap();
        Server::restart(coalloc, dir)
    }

    /// Start a server on the configuration and state directory `start` made in `dir`.
    pub fn restart(coalloc: &str, dir: &Path) -> Server {
        let cfg = dir.join("config.toml");
        let state = dir.join("state");
        let _ = std::fs::remove_file(state.join("server.json"));
        let child = Command::new(coalloc)
            .args(["serve", "--config"])
            .arg(&cfg)
            .arg("--state-dir")
            .arg(&state)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        let url = loop {
            if let Ok(v) = std::fs::read_to_string(state.join("server.json")) {
                if let Ok(v) = serde_json::from_str::<Value>(&v) {
                    break v["url"].as_str().unwrap().to_string();
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "server did not start"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let token = std::fs::read_to_string(state.join("token"))
            .unwrap()
            .trim()
            .to_string();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .new_agent();
        Server {
            child,
            url,
            token,
            state,
            agent,
        }
    }

    pub fn call(&self, method: &str, path: &str, body: Option<&str>) -> Value {
        let url = format!("{}{path}", self.url);
        let auth = format!("Bearer {}", self.token);
        let r = match method {
            "GET" => self.agent.get(&url).header("Authorization", &auth).call(),
            "DELETE" => self
                .agent
                .delete(&url)
                .header("Authorization", &auth)
                .call(),
            "PUT" => self
                .agent
                .put(&url)
                .header("Authorization", &auth)
                .send(body.unwrap_or("")),
            _ => self
                .agent
                .post(&url)
                .header("Authorization", &auth)
                .send(body.unwrap_or("")),
        };
        let text = r.unwrap().body_mut().read_to_string().unwrap();
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

pub fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
