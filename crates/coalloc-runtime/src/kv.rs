//! The job's rendezvous store (seed 002 §3.3: once the barrier releases, components exchange
//! what they need to find each other — here through key/value pairs held by the server).

use crate::config::Config;
use crate::error::RuntimeError;
use crate::http::{agent, exchange, refusal, Method};
use std::time::{Duration, Instant};

/// The longest wait the server grants one call.
const MAX_WAIT_PER_CALL: Duration = Duration::from_millis(25_000);

/// Store `value` under `key` in the job's store (replacing any previous value).
///
/// The server keeps values as text: `value` must be UTF-8, at most 1 MiB; keys are 1 to
/// 1024 bytes (any characters: they are percent-encoded).
pub fn kv_put(cfg: &Config, key: &str, value: &[u8]) -> Result<(), RuntimeError> {
    let url = cfg.kv_url(key);
    let answer = exchange(
        cfg,
        &agent(cfg)?,
        Method::Put,
        &url,
        Some((value, "application/octet-stream")),
    )?;
    match answer.status {
        200 | 201 | 204 => Ok(()),
        s => Err(refusal(s, &answer.body)),
    }
}

/// The value under `key`, waiting up to `wait` for it to appear; `None` when it is still
/// missing after that. Long waits are split into calls of at most 25 s each.
pub fn kv_get(cfg: &Config, key: &str, wait: Duration) -> Result<Option<Vec<u8>>, RuntimeError> {
    let agent = agent(cfg)?;
    let base = cfg.kv_url(key);
    let deadline = Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let this = left.min(MAX_WAIT_PER_CALL);
        let url = format!("{base}?wait_ms={}", this.as_millis());
        let asked = Instant::now();
        let answer = exchange(cfg, &agent, Method::Get, &url, None)?;
        match answer.status {
            200 => return Ok(Some(answer.body)),
            404 if Instant::now() >= deadline => return Ok(None),
            // Missing so far: wait on. A server that answered well before the wait it was
            // asked for (restarted, shorter hold) is not polled in a tight loop.
            404 => {
                if asked.elapsed() < this / 2 {
                    let left = deadline.saturating_duration_since(Instant::now());
                    std::thread::sleep(left.min(Duration::from_millis(100)));
                }
            }
            s => return Err(refusal(s, &answer.body)),
        }
    }
}
