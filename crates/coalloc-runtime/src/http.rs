//! The HTTP exchange under every runtime call: plain or pinned TLS, the bearer token, the retry of an unreachable
//! server with a back-off (seed 002 §3.3: the co-allocator may restart while components wait),
//! the mapping of refusals to [`RuntimeError`], and the percent-encoding of rendezvous keys.

use crate::config::Config;
use crate::error::RuntimeError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Longest a single exchange may take: the server holds a call up to about 25 s.
const CALL_TIMEOUT: Duration = Duration::from_secs(90);
/// Longest wait for a connection: a server cut off from the network never refuses one.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// First and longest pause between two attempts to reach the server.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The verbs the protocol uses.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Method {
    Get,
    Put,
    Post,
}

/// A completed exchange with a success status (2xx or 404, which callers interpret).
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Buffers for one exchange: the protocol's headers and bodies are small, and ureq's 128 KiB
/// defaults are zeroed on every connection (a tenth of a check-in's CPU).
const BUFFER: usize = 16 * 1024;

/// An agent that reports every status as an answer rather than as an error, over TLS to
/// the pinned certificate ([`Config::fingerprint`], `coalloc_pin`) when the server's URL is
/// `https://` (a server bound beyond loopback, issue 32 item 4), else plain HTTP.
///
/// Every phase of a call but the host lookup has the [`CALL_TIMEOUT`]: a lookup with a timeout
/// runs on a thread of its own, which cost a component one thread per check-in, and the URL is
/// almost always an address (the server's own `bind`).
pub(crate) fn agent(cfg: &Config) -> Result<ureq::Agent, RuntimeError> {
    let t = Some(CALL_TIMEOUT);
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_send_request(t)
        .timeout_send_body(t)
        .timeout_recv_response(t)
        .timeout_recv_body(t)
        .input_buffer_size(BUFFER)
        .output_buffer_size(BUFFER)
        .max_response_header_size(BUFFER)
        .build();
    match &cfg.fingerprint {
        Some(pin) if cfg.barrier_url.starts_with("https://") => {
            coalloc_pin::blocking::agent(pin, config)
                .map_err(|e| RuntimeError::Transport(format!("TLS: {e}")))
        }
        _ => Ok(ureq::Agent::new_with_config(config)),
    }
}

/// Which of [`Config::urls`] answered last: calls start there (a process's calls follow
/// the server that leads once they found it).
static LEADER: AtomicUsize = AtomicUsize::new(0);

/// `url` at the server that answered last (see [`LEADER`]).
fn at_leader(cfg: &Config, url: &str) -> String {
    let mut at = url.to_string();
    for _ in 0..LEADER.load(Ordering::Relaxed) % cfg.urls.len().max(1) {
        match cfg.next_server(&at) {
            Some(next) => at = next,
            None => break,
        }
    }
    at
}

/// One request, repeated while the server cannot be reached (connection refused or reset, a
/// timeout, `502`/`503`/`504`) until `cfg.patience` has passed since the first attempt.
/// With several servers ([`Config::urls`]) each failure moves on to the next at once, and
/// the back-off is taken once a whole round failed (a standby answers 503 until it leads).
/// Answers 2xx and 404 are returned; other statuses become errors carrying the message.
pub(crate) fn exchange(
    cfg: &Config,
    agent: &ureq::Agent,
    method: Method,
    url: &str,
    body: Option<(&[u8], &str)>,
) -> Result<Answer, RuntimeError> {
    let start = Instant::now();
    let mut pause = FIRST_BACKOFF;
    let mut url = at_leader(cfg, url);
    let mut tried = 0usize;
    loop {
        let failure = match attempt(cfg, agent, method, &url, body) {
            Ok(a) if (200..300).contains(&a.status) || a.status == 404 => return Ok(a),
            Ok(a) if matches!(a.status, 502..=504) => refusal(a.status, &a.body).to_string(),
            Ok(a) => return Err(refusal(a.status, &a.body)),
            // Another certificate than the pinned one: no retry can make it the server.
            Err(e) if coalloc_pin::is_pin_mismatch(&e) => {
                return Err(RuntimeError::Transport(e.to_string()))
            }
            Err(e) if transient(&e) => e.to_string(),
            Err(e) => return Err(RuntimeError::Transport(e.to_string())),
        };
        if let Some(next) = cfg.next_server(&url) {
            url = next;
            LEADER.fetch_add(1, Ordering::Relaxed);
            tried += 1;
            if !tried.is_multiple_of(cfg.urls.len()) {
                continue;
            }
        }
        if start.elapsed() + pause > cfg.patience {
            return Err(RuntimeError::Unreachable(format!(
                "{url}: {failure} (gave up after {:?})",
                start.elapsed()
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_BACKOFF);
    }
}

fn attempt(
    cfg: &Config,
    agent: &ureq::Agent,
    method: Method,
    url: &str,
    body: Option<(&[u8], &str)>,
) -> Result<Answer, ureq::Error> {
    let auth = format!("Bearer {}", cfg.secret);
    let (bytes, content_type) = body.unwrap_or((&[], "application/octet-stream"));
    let mut response = match method {
        Method::Get => agent.get(url).header("Authorization", &auth).call()?,
        Method::Put => agent
            .put(url)
            .header("Authorization", &auth)
            .header("Content-Type", content_type)
            .send(bytes)?,
        Method::Post => agent
            .post(url)
            .header("Authorization", &auth)
            .header("Content-Type", content_type)
            .send(bytes)?,
    };
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_vec()?;
    Ok(Answer { status, body })
}

/// Whether a failed exchange may succeed later (the server restarting or overloaded).
fn transient(e: &ureq::Error) -> bool {
    matches!(
        e,
        ureq::Error::Io(_)
            | ureq::Error::ConnectionFailed
            | ureq::Error::HostNotFound
            | ureq::Error::Timeout(_)
            | ureq::Error::Protocol(_)
    )
}

/// The error of a refused request; the message is the server's `{"error": "..."}` field
/// when there is one, else the body as text.
pub(crate) fn refusal(status: u16, body: &[u8]) -> RuntimeError {
    let message = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
    match status {
        401 => RuntimeError::Unauthorized(message),
        403 => RuntimeError::Forbidden(message),
        _ => RuntimeError::Http { status, message },
    }
}

/// Percent-encode `key` into a single path segment: every byte but the unreserved ones of
/// RFC 3986 (`A-Z a-z 0-9 - . _ ~`) is written `%XX`, so `/` becomes `%2F`. A key made only
/// of dots is fully encoded so that it cannot read as `.` or `..`.
pub(crate) fn encode_segment(key: &str) -> String {
    let only_dots = key.bytes().all(|b| b == b'.');
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        let plain = b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'_' | b'~')
            || (b == b'.' && !only_dots);
        if plain {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_keys_as_one_segment() {
        assert_eq!(encode_segment("poisson/addr/0"), "poisson%2Faddr%2F0");
        assert_eq!(encode_segment("a-b_c.d~e"), "a-b_c.d~e");
        assert_eq!(encode_segment("é ?"), "%C3%A9%20%3F");
        assert_eq!(encode_segment(".."), "%2E%2E");
    }

    #[test]
    fn refusals_carry_the_server_message() {
        let e = refusal(403, br#"{"error":"not your job"}"#);
        assert!(matches!(e, RuntimeError::Forbidden(ref m) if m == "not your job"));
        let e = refusal(401, b"no token");
        assert!(matches!(e, RuntimeError::Unauthorized(ref m) if m == "no token"));
        let e = refusal(500, b"{}");
        assert!(matches!(e, RuntimeError::Http { status: 500, .. }));
    }
}
