//! A tiny stand-in for the coalloc server's runtime routes (barrier check-in and rendezvous
//! store, contract in coalloc-runtime's crate documentation), on std::net only. A copy of
//! coalloc-runtime's tests/mock/mod.rs (test crates cannot share a module across packages).

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What the mock holds: its script of barrier answers, the store, and what it was sent.
#[derive(Default)]
pub struct State {
    /// Answers given to barrier posts, in order; `{"state":"released"}` once exhausted.
    pub barrier_script: VecDeque<String>,
    /// Bodies of every barrier post received.
    pub check_ins: Vec<String>,
    /// The rendezvous store (keys decoded).
    pub kv: HashMap<String, Vec<u8>>,
}

pub struct Mock {
    pub url: String,
    pub job: u64,
    pub secret: String,
    pub state: Arc<(Mutex<State>, Condvar)>,
}

impl Mock {
    /// Listen on 127.0.0.1:0 for job `job` with secret `secret`.
    pub fn start(job: u64, secret: &str, barrier_script: &[&str]) -> Mock {
        Mock::start_on("127.0.0.1:0", job, secret, barrier_script)
    }

    /// Listen on `addr` (a server coming back on its old port after a restart).
    pub fn start_on(addr: &str, job: u64, secret: &str, barrier_script: &[&str]) -> Mock {
        let listener = TcpListener::bind(addr).expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new((
            Mutex::new(State {
                barrier_script: barrier_script.iter().map(|s| s.to_string()).collect(),
                ..State::default()
            }),
            Condvar::new(),
        ));
        let (st, sec) = (state.clone(), secret.to_owned());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (st, sec) = (st.clone(), sec.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, job, &sec, &st);
                });
            }
        });
        Mock {
            url,
            job,
            secret: secret.to_owned(),
            state,
        }
    }

    /// The environment a component with this index would be given.
    pub fn env(&self, component: usize, sizes: &[u32]) -> Vec<(String, String)> {
        let offset: u32 = sizes[..component].iter().sum();
        let total: u32 = sizes.iter().sum();
        let sizes_text: Vec<String> = sizes.iter().map(u32::to_string).collect();
        [
            ("COALLOC_URL", self.url.clone()),
            (
                "COALLOC_BARRIER_URL",
                format!("{}/v1/jobs/{}/barrier", self.url, self.job),
            ),
            ("COALLOC_SECRET", self.secret.clone()),
            ("COALLOC_JOB_ID", self.job.to_string()),
            ("COALLOC_LAUNCH", (100 + component).to_string()),
            ("COALLOC_COMPONENT", component.to_string()),
            ("COALLOC_COMPONENTS", sizes.len().to_string()),
            ("COALLOC_SIZES", sizes_text.join(",")),
            ("COALLOC_RANK_OFFSET", offset.to_string()),
            ("COALLOC_TOTAL", total.to_string()),
            ("COALLOC_SITE", format!("site{component}")),
            ("COALLOC_PROCESSES", sizes[component].to_string()),
            ("COALLOC_LOCAL_RANK", "0".into()),
            ("COALLOC_RANK", offset.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

fn serve(
    conn: TcpStream,
    job: u64,
    secret: &str,
    state: &(Mutex<State>, Condvar),
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let target = parts.next().unwrap_or("").to_owned();
    let (mut length, mut auth) = (0usize, None);
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        let (name, value) = h.split_once(':').unwrap_or((h.as_str(), ""));
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "authorization" => auth = Some(value.trim().to_owned()),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let (status, answer) = route(&method, &target, auth, body, job, secret, state);
    let mut conn = conn;
    write!(
        conn,
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        answer.len()
    )?;
    conn.write_all(&answer)?;
    conn.flush()
}

fn route(
    method: &str,
    target: &str,
    auth: Option<String>,
    body: Vec<u8>,
    job: u64,
    secret: &str,
    state: &(Mutex<State>, Condvar),
) -> (u16, Vec<u8>) {
    let err = |s: u16, m: &str| (s, format!("{{\"error\":\"{m}\"}}").into_bytes());
    match auth {
        None => return err(401, "no secret"),
        Some(a) if a != format!("Bearer {secret}") => return err(403, "wrong secret"),
        Some(_) => {}
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let prefix = format!("/v1/jobs/{job}/");
    let Some(rest) = path.strip_prefix(&prefix) else {
        return err(404, "no such job");
    };
    let (lock, cv) = state;
    if rest == "barrier" && method == "POST" {
        let mut st = lock.lock().unwrap();
        st.check_ins
            .push(String::from_utf8_lossy(&body).into_owned());
        let a = st
            .barrier_script
            .pop_front()
            .unwrap_or_else(|| r#"{"state":"released"}"#.to_owned());
        return (200, a.into_bytes());
    }
    let Some(key) = rest.strip_prefix("kv/").map(decode) else {
        return err(404, "no such route");
    };
    match method {
        "PUT" => {
            lock.lock().unwrap().kv.insert(key, body);
            cv.notify_all();
            (204, Vec::new())
        }
        "GET" => {
            let wait: u64 = query
                .strip_prefix("wait_ms=")
                .and_then(|w| w.parse().ok())
                .unwrap_or(0);
            let deadline = Instant::now() + Duration::from_millis(wait);
            let mut st = lock.lock().unwrap();
            loop {
                if let Some(v) = st.kv.get(&key) {
                    return (200, v.clone());
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return err(404, "missing");
                }
                st = cv.wait_timeout(st, left).unwrap().0;
            }
        }
        _ => err(405, "method"),
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
            if let Ok(v) = u8::from_str_radix(hex, 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
