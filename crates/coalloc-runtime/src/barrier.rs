//! The start barrier (seed 002 §3.3 "barrier", §4.1): each process reports whether its
//! start-up went well, then waits until the co-allocator either commits the whole job
//! (every component checked in) or aborts it (a component failed or timed out).

use crate::config::Config;
use crate::error::RuntimeError;
use crate::http::{agent, exchange, Method};
use serde_json::{json, Value};

/// How the barrier ended for this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BarrierOutcome {
    /// The job committed: every component reached the barrier; go on with the work.
    Released,
    /// The job was aborted, with the server's reason; the process should exit.
    Aborted(String),
}

/// Check in at the barrier with `ok` (and a `reason` when not ok) and wait for the job's fate.
///
/// The server holds each call up to about 25 s and answers `waiting` when nothing was
/// decided; the check-in is idempotent, so it is simply posted again, as long as needed.
/// Connection errors are retried for [`Config::patience`] each time. With a
/// [`Config::barrier_timeout`] the whole wait gives up after it with
/// [`RuntimeError::BarrierTimeout`], whether the server answers `waiting` or cannot be
/// reached: the server fails the component at its own barrier timeout (seed 002 §3.2), so
/// nothing waits for ever.
pub fn barrier(
    cfg: &Config,
    ok: bool,
    reason: Option<&str>,
) -> Result<BarrierOutcome, RuntimeError> {
    let agent = agent(cfg)?;
    let body = json!({
        "launch": cfg.launch,
        "local_rank": cfg.local_rank,
        "ok": ok,
        "reason": reason,
    })
    .to_string();
    let start = std::time::Instant::now();
    let mut cfg = cfg.clone();
    let patience = cfg.patience;
    loop {
        if let Some(limit) = cfg.barrier_timeout {
            let left = limit.saturating_sub(start.elapsed());
            if left.is_zero() {
                let why = "still waiting for the other components".to_owned();
                return Err(RuntimeError::BarrierTimeout(limit, why));
            }
            cfg.patience = patience.min(left);
        }
        let answer = match exchange(
            &cfg,
            &agent,
            Method::Post,
            &cfg.barrier_url,
            Some((body.as_bytes(), "application/json")),
        ) {
            Err(RuntimeError::Unreachable(why)) if cfg.patience < patience => {
                let limit = cfg.barrier_timeout.unwrap_or_default();
                return Err(RuntimeError::BarrierTimeout(limit, why));
            }
            other => other?,
        };
        if answer.status == 404 {
            return Err(crate::http::refusal(404, &answer.body));
        }
        if let Some(outcome) = parse_answer(&answer.body)? {
            return Ok(outcome);
        }
    }
}

/// `None` for `waiting`, the outcome otherwise.
fn parse_answer(body: &[u8]) -> Result<Option<BarrierOutcome>, RuntimeError> {
    let bad = || RuntimeError::Protocol(format!("barrier: {}", String::from_utf8_lossy(body)));
    let v: Value = serde_json::from_slice(body).map_err(|_| bad())?;
    match v.get("state").and_then(Value::as_str) {
        Some("released") => Ok(Some(BarrierOutcome::Released)),
        Some("waiting") => Ok(None),
        Some("aborted") => {
            let reason = v
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("no reason");
            Ok(Some(BarrierOutcome::Aborted(reason.to_owned())))
        }
        _ => Err(bad()),
    }
}

/// The whole barrier step of a component in one call: read the [`Config`] from the
/// environment, check in with `ok`, and return the configuration when the job commits.
///
/// Exits the process with status 1 (after a message on stderr) when the job aborts, when
/// `ok` is false (after reporting it), or when the environment or the server fails — the
/// behaviour seed 002 §3.3 gives its barrier call: "returns when the job commits, exits the
/// process when it aborts".
pub fn barrier_or_exit(ok: bool) -> Config {
    let cfg = match Config::from_env() {
        Ok(c) => c,
        Err(e) => exit(&format!("coalloc: {e}")),
    };
    let reason = (!ok).then_some("the component reported a failed start-up");
    match barrier(&cfg, ok, reason) {
        Ok(BarrierOutcome::Released) if ok => cfg,
        Ok(BarrierOutcome::Released) => exit("coalloc: start-up failed; leaving the job"),
        Ok(BarrierOutcome::Aborted(why)) => exit(&format!("coalloc: job aborted: {why}")),
        Err(e) => exit(&format!("coalloc: barrier failed: {e}")),
    }
}

fn exit(message: &str) -> ! {
    eprintln!("{message}");
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_answers() {
        let p = |s: &str| parse_answer(s.as_bytes());
        assert_eq!(
            p(r#"{"state":"released"}"#).unwrap(),
            Some(BarrierOutcome::Released)
        );
        assert_eq!(p(r#"{"state":"waiting"}"#).unwrap(), None);
        assert_eq!(
            p(r#"{"state":"aborted","reason":"site down"}"#).unwrap(),
            Some(BarrierOutcome::Aborted("site down".into()))
        );
        assert!(p("{}").is_err());
        assert!(p("garbage").is_err());
    }
}
