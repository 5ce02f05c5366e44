//! The client side of the server's HTTP API: finds the server through its state directory
//! (`--state-dir`, else `COALLOC_STATE_DIR`, else `~/.coalloc`; the way HyperQueue's server
//! directory works) and talks to it, as the first of these that applies (issue 20 item 6):
//!
//! 1. `COALLOC_SOCKET=PATH`: over that Unix socket, the server knowing the caller by uid;
//! 2. `COALLOC_TOKEN=TOKEN` (a token `coalloc user add` issued): over HTTP to `COALLOC_URL`,
//!    else the state directory's server;
//! 3. the state directory's `token`, when this user may read it (the admin): over HTTP;
//! 4. the server's Unix socket (`server.json`'s `socket`, else `DIR/coalloc.sock`).
//!
//! `COALLOC_URL` may list several servers, comma-separated: an active server and its
//! standbys on one PostgreSQL journal (issue 32, item 2). The client asks each in turn for
//! `/v1/health` and talks to the first that answers 200 (a standby answers 503, naming the
//! leader), trying again for up to [`TAKEOVER`] while none does (a takeover under way). A
//! request is not repeated at another server once sent: a submission is never made twice.
//!
//! An `https://` server is trusted by its certificate's fingerprint (see
//! [`crate::tls_http`]): `COALLOC_FINGERPRINT`, else the pin `coalloc login` stored, else
//! `server.json`'s on the server's own host. A token never goes over plain HTTP beyond
//! loopback (127.0.0.0/8, ::1): such a call is refused before it is made.

use crate::error::CliError;
use crate::tls_http;
use clap::Args;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// Where the server keeps its state (every client command takes it).
#[derive(Args, Debug, Clone)]
pub struct StateArgs {
    /// The server's state directory [default: $COALLOC_STATE_DIR, else ~/.coalloc].
    #[arg(long, value_name = "DIR", global = true)]
    pub state_dir: Option<PathBuf>,
}

impl StateArgs {
    pub fn dir(&self) -> PathBuf {
        resolve_state_dir(self.state_dir.clone())
    }
}

/// `--state-dir`, else `COALLOC_STATE_DIR`, else `~/.coalloc`.
pub fn resolve_state_dir(given: Option<PathBuf>) -> PathBuf {
    given
        .or_else(|| std::env::var_os("COALLOC_STATE_DIR").map(PathBuf::from))
        .unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."))
                .join(".coalloc")
        })
}

/// How long a client given several servers waits for one of them to lead: a standby takes
/// over within 5 s of the leader's death.
pub const TAKEOVER: Duration = Duration::from_secs(10);

/// A connection to a running server.
pub struct Client {
    /// Where requests go (`http://localhost` on the Unix socket).
    pub url: String,
    /// The Unix socket, when requests go over it.
    socket: Option<PathBuf>,
    token: String,
    /// The pinned certificate, when requests go over HTTPS.
    fingerprint: Option<String>,
    agent: ureq::Agent,
}

impl Client {
    /// Find the server of a state directory.
    pub fn connect(args: &StateArgs) -> Result<Client, CliError> {
        Client::at(&args.dir())
    }

    pub fn at(dir: &std::path::Path) -> Result<Client, CliError> {
        let not_running = || {
            CliError::bad(format!(
                "no server is running with state directory {} (start one with `coalloc serve --state-dir {}`)",
                dir.display(),
                dir.display()
            ))
        };
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let info = || -> Result<Value, CliError> {
            let text =
                std::fs::read_to_string(dir.join("server.json")).map_err(|_| not_running())?;
            serde_json::from_str(&text).map_err(|_| not_running())
        };
        let config = || {
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(60)))
                .build()
        };
        let over_socket = |path: PathBuf| Client {
            url: "http://localhost".into(),
            agent: crate::unix_http::agent(path.clone(), config()),
            socket: Some(path),
            token: String::new(),
            fingerprint: None,
        };
        if let Some(path) = env("COALLOC_SOCKET") {
            return Ok(over_socket(path.into()));
        }
        let token = match env("COALLOC_TOKEN") {
            Some(t) => Some(t),
            None => std::fs::read_to_string(dir.join("token"))
                .ok()
                .map(|t| t.trim().to_string()),
        };
        let Some(token) = token else {
            let socket = info()
                .ok()
                .and_then(|v| v["socket"].as_str().map(PathBuf::from))
                .unwrap_or_else(|| dir.join("coalloc.sock"));
            if !socket.exists() {
                return Err(not_running());
            }
            return Ok(over_socket(socket));
        };
        let urls: Vec<String> = match env("COALLOC_URL") {
            Some(u) => u
                .split(',')
                .map(|u| u.trim().trim_end_matches('/').to_string())
                .filter(|u| !u.is_empty())
                .collect(),
            None => vec![info()?["url"].as_str().ok_or_else(not_running)?.to_string()],
        };
        let connect = |url: &String| Client::over_http(dir, url, &token, &info, config());
        match &urls[..] {
            [] => Err(not_running()),
            [one] => connect(one),
            many => Client::leader(many, connect),
        }
    }

    /// The client of the first of `urls` whose `/v1/health` answers 200, asking again for up
    /// to [`TAKEOVER`] while none does.
    fn leader(
        urls: &[String],
        connect: impl Fn(&String) -> Result<Client, CliError>,
    ) -> Result<Client, CliError> {
        let t = std::time::Instant::now();
        loop {
            let mut seen = Vec::new();
            for url in urls {
                let c = match connect(url) {
                    Ok(c) => c,
                    Err(e) => {
                        seen.push(format!("{url}: {e}"));
                        continue;
                    }
                };
                match c.agent.get(format!("{url}/v1/health")).call() {
                    Ok(r) if r.status().as_u16() == 200 => return Ok(c),
                    Ok(mut r) => {
                        let text = r.body_mut().read_to_string().unwrap_or_default();
                        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                        let why = v["error"].as_str().unwrap_or(&text).to_string();
                        seen.push(format!("{url}: {} {why}", r.status().as_u16()));
                    }
                    Err(e) => seen.push(tls_http::explain(url, &e)),
                }
            }
            if t.elapsed() >= TAKEOVER {
                return Err(CliError::bad(format!(
                    "none of the servers in COALLOC_URL leads:\n  {}",
                    seen.join("\n  ")
                )));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The client of the server at `url` over HTTP(S) with `token`; `info`: the state
    /// directory `dir`'s `server.json`.
    fn over_http(
        dir: &std::path::Path,
        url: &str,
        token: &str,
        info: &dyn Fn() -> Result<Value, CliError>,
        config: ureq::config::Config,
    ) -> Result<Client, CliError> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let url = url.to_string();
        let fingerprint = if url.starts_with("https://") {
            let served = info().ok().filter(|v| v["url"].as_str() == Some(&url));
            let pin = match env("COALLOC_FINGERPRINT") {
                Some(f) => Some(tls_http::normalize(&f)?),
                None => tls_http::known(dir)
                    .remove(&url)
                    .or_else(|| served.and_then(|v| v["fingerprint"].as_str().map(str::to_owned))),
            };
            Some(pin.ok_or_else(|| {
                CliError::bad(format!(
                    "the server at {url} is not trusted yet: run `coalloc login {url}` to see and pin its certificate's fingerprint (or set COALLOC_FINGERPRINT)"
                ))
            })?)
        } else if tls_http::is_loopback(&url) {
            None
        } else {
            return Err(CliError::bad(format!(
                "refusing to send a bearer token over plain HTTP to {url}, beyond this machine's loopback: use the server's https:// URL (a server bound beyond loopback serves HTTPS) and `coalloc login` it"
            )));
        };
        let agent = match &fingerprint {
            Some(f) => tls_http::agent(f, config)?,
            None => config.new_agent(),
        };
        Ok(Client {
            url,
            socket: None,
            token: token.to_string(),
            fingerprint,
            agent,
        })
    }

    /// An agent of `config` to this server (for the long-lived requests).
    fn agent_of(&self, config: ureq::config::Config) -> Result<ureq::Agent, CliError> {
        match (&self.socket, &self.fingerprint) {
            (Some(p), _) => Ok(crate::unix_http::agent(p.clone(), config)),
            (None, Some(f)) => tls_http::agent(f, config),
            (None, None) => Ok(config.new_agent()),
        }
    }

    fn unreachable(&self, e: ureq::Error) -> CliError {
        CliError::bad(tls_http::explain(&self.place(), &e))
    }

    /// Where the server is, for messages.
    pub fn place(&self) -> String {
        match &self.socket {
            Some(p) => format!("unix:{}", p.display()),
            None => self.url.clone(),
        }
    }

    fn answer(
        &self,
        r: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Value, CliError> {
        let mut r = r.map_err(|e| self.unreachable(e))?;
        let status = r.status().as_u16();
        let text = r
            .body_mut()
            .read_to_string()
            .map_err(|e| CliError::Internal(format!("reading the answer: {e}")))?;
        let v: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status >= 400 {
            let msg = v["error"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| v.to_string());
            return Err(if status >= 500 {
                CliError::Internal(format!("server: {msg}"))
            } else {
                CliError::bad(msg)
            });
        }
        Ok(v)
    }

    pub fn get(&self, path: &str) -> Result<Value, CliError> {
        let r = self
            .agent
            .get(format!("{}{path}", self.url))
            .header("Authorization", format!("Bearer {}", self.token))
            .call();
        self.answer(r)
    }

    /// A GET with a query string (its values encoded).
    pub fn get_query(&self, path: &str, query: &[(&str, String)]) -> Result<Value, CliError> {
        let r = self
            .agent
            .get(format!("{}{path}", self.url))
            .query_pairs(query.iter().map(|(k, v)| (*k, v.as_str())))
            .header("Authorization", format!("Bearer {}", self.token))
            .call();
        self.answer(r)
    }

    /// Every page of a job listing (`/v1/jobs`, `/v1/history`), one after the other:
    /// `each` gets each page's jobs as it comes, so no answer holds every job.
    pub fn pages(
        &self,
        path: &str,
        query: &[(&str, String)],
        mut each: impl FnMut(&[Value]) -> Result<(), CliError>,
    ) -> Result<(), CliError> {
        let mut after: Option<u64> = None;
        loop {
            let mut q = query.to_vec();
            if let Some(a) = after {
                q.push(("after", a.to_string()));
            }
            let page = self.get_query(path, &q)?;
            each(page["jobs"].as_array().map_or(&[][..], Vec::as_slice))?;
            match page["next"].as_u64() {
                Some(n) if Some(n) != after => after = Some(n),
                _ => return Ok(()),
            }
        }
    }

    /// A long-lived GET (the event stream): the answer's body as it comes, with no overall
    /// time limit.
    pub fn stream(&self, path: &str) -> Result<impl std::io::BufRead, CliError> {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(10)))
            .build();
        let agent = self.agent_of(config)?;
        let r = agent
            .get(format!("{}{path}", self.url))
            .header("Authorization", format!("Bearer {}", self.token))
            .header("Accept", "text/event-stream")
            .call()
            .map_err(|e| self.unreachable(e))?;
        if r.status().as_u16() >= 400 {
            return self
                .answer(Ok(r))
                .map(|_| unreachable!("an error status is an error"));
        }
        Ok(std::io::BufReader::new(r.into_body().into_reader()))
    }

    /// A GET whose answer is bytes, not JSON (a job's output): the body as it comes, with
    /// no overall time limit when `follow` (the answer lasts as long as a component runs).
    pub fn read(
        &self,
        path: &str,
        query: &[(&str, String)],
        follow: bool,
    ) -> Result<impl std::io::Read, CliError> {
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(10)));
        if !follow {
            config = config.timeout_global(Some(Duration::from_secs(60)));
        }
        let config = config.build();
        let agent = self.agent_of(config)?;
        let r = agent
            .get(format!("{}{path}", self.url))
            .query_pairs(query.iter().map(|(k, v)| (*k, v.as_str())))
            .header("Authorization", format!("Bearer {}", self.token))
            .call()
            .map_err(|e| self.unreachable(e))?;
        if r.status().as_u16() >= 400 {
            return self
                .answer(Ok(r))
                .map(|_| unreachable!("an error status is an error"));
        }
        Ok(r.into_body().into_reader())
    }

    pub fn delete(&self, path: &str) -> Result<Value, CliError> {
        let r = self
            .agent
            .delete(format!("{}{path}", self.url))
            .header("Authorization", format!("Bearer {}", self.token))
            .call();
        self.answer(r)
    }

    pub fn send(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &str,
    ) -> Result<Value, CliError> {
        let url = format!("{}{path}", self.url);
        let b = match method {
            "PUT" => self.agent.put(url),
            _ => self.agent.post(url),
        };
        let r = b
            .header("Authorization", format!("Bearer {}", self.token))
            .header("Content-Type", content_type)
            .send(body);
        self.answer(r)
    }
}
