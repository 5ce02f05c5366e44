//! The runtime client against a mock of the server's runtime routes: barrier check-in with a
//! `waiting` answer, rendezvous put/get with waits, refusals, an unreachable server.

mod mock;

use coalloc_runtime::{barrier, kv_get, kv_put, BarrierOutcome, Config, RuntimeError};
use mock::Mock;
use std::time::{Duration, Instant};

fn config(m: &Mock, component: usize) -> Config {
    let env = m.env(component, &[2, 1, 3]);
    Config::from_vars(|k| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())).unwrap()
}

#[test]
fn barrier_posts_again_while_waiting_then_releases() {
    let m = Mock::start(7, "good", &[r#"{"state":"waiting"}"#]);
    let cfg = config(&m, 1);
    assert_eq!(barrier(&cfg, true, None).unwrap(), BarrierOutcome::Released);
    let st = m.state.0.lock().unwrap();
    assert_eq!(st.check_ins.len(), 2);
    let first: serde_json::Value = serde_json::from_str(&st.check_ins[0]).unwrap();
    assert_eq!(
        first,
        serde_json::json!({"launch": 101, "local_rank": 0, "ok": true, "reason": null})
    );
}

#[test]
fn barrier_reports_failure_and_abort() {
    let m = Mock::start(
        7,
        "good",
        &[r#"{"state":"aborted","reason":"site0 failed"}"#],
    );
    let cfg = config(&m, 0);
    let out = barrier(&cfg, false, Some("no input file")).unwrap();
    assert_eq!(out, BarrierOutcome::Aborted("site0 failed".into()));
    let st = m.state.0.lock().unwrap();
    let sent: serde_json::Value = serde_json::from_str(&st.check_ins[0]).unwrap();
    assert_eq!(sent["ok"], false);
    assert_eq!(sent["reason"], "no input file");
}

#[test]
fn kv_round_trip_with_encoded_keys() {
    let m = Mock::start(7, "good", &[]);
    let cfg = config(&m, 0);
    kv_put(&cfg, "poisson/addr/0", b"127.0.0.1:5000").unwrap();
    assert!(m.state.0.lock().unwrap().kv.contains_key("poisson/addr/0"));
    let v = kv_get(&cfg, "poisson/addr/0", Duration::ZERO).unwrap();
    assert_eq!(v.as_deref(), Some(&b"127.0.0.1:5000"[..]));
}

#[test]
fn kv_get_waits_for_a_late_put_or_gives_none() {
    let m = Mock::start(7, "good", &[]);
    let cfg = config(&m, 0);
    let start = Instant::now();
    assert_eq!(
        kv_get(&cfg, "absent", Duration::from_millis(300)).unwrap(),
        None
    );
    assert!(start.elapsed() >= Duration::from_millis(300));

    let writer = config(&m, 2);
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        kv_put(&writer, "late key", b"here").unwrap();
    });
    let v = kv_get(&cfg, "late key", Duration::from_secs(10)).unwrap();
    assert_eq!(v.as_deref(), Some(&b"here"[..]));
    t.join().unwrap();
}

#[test]
fn wrong_or_missing_secret_is_refused() {
    let m = Mock::start(7, "good", &[]);
    let mut cfg = config(&m, 0);
    cfg.secret = "bad".into();
    match kv_put(&cfg, "k", b"v") {
        Err(RuntimeError::Forbidden(msg)) => assert_eq!(msg, "wrong secret"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        barrier(&cfg, true, None),
        Err(RuntimeError::Forbidden(_))
    ));
    // A barrier URL of no job: an error with the server's message, not a retry loop.
    cfg.secret = "good".into();
    cfg.barrier_url = format!("{}/v1/jobs/8/barrier", m.url);
    match barrier(&cfg, true, None) {
        Err(RuntimeError::Http {
            status: 404,
            message,
        }) => assert_eq!(message, "no such job"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unreachable_server_gives_up_after_patience() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap();
    drop(free);
    let m = Mock::start(7, "good", &[]);
    let mut cfg = config(&m, 0);
    cfg.url = format!("http://{addr}");
    cfg.barrier_url = format!("http://{addr}/v1/jobs/7/barrier");
    cfg.patience = Duration::from_millis(500);
    let start = Instant::now();
    match barrier(&cfg, true, None) {
        Err(RuntimeError::Unreachable(_)) => {}
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// The server stays unreachable: the barrier gives up at the job's barrier timeout, long
/// before its patience (5 minutes) runs out.
#[test]
fn unreachable_server_gives_up_at_the_barrier_timeout() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap();
    drop(free);
    let mut env = Mock::start(7, "good", &[]).env(0, &[1]);
    env.push(("COALLOC_BARRIER_TIMEOUT_MS".into(), "800".into()));
    let mut cfg =
        Config::from_vars(|k| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())).unwrap();
    assert_eq!(cfg.barrier_timeout, Some(Duration::from_millis(800)));
    cfg.url = format!("http://{addr}");
    cfg.barrier_url = format!("http://{addr}/v1/jobs/7/barrier");
    let start = Instant::now();
    match barrier(&cfg, true, None) {
        Err(RuntimeError::BarrierTimeout(limit, _)) => {
            assert_eq!(limit, Duration::from_millis(800))
        }
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn barrier_rides_out_a_server_restart() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap();
    drop(free);
    // The client's environment names the port before anything listens on it.
    let env = Mock::start(7, "good", &[]).env(0, &[1]);
    let mut cfg =
        Config::from_vars(|k| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())).unwrap();
    cfg.url = format!("http://{addr}");
    cfg.barrier_url = format!("http://{addr}/v1/jobs/7/barrier");
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        Mock::start_on(&addr.to_string(), 7, "good", &[r#"{"state":"waiting"}"#])
    });
    let start = Instant::now();
    assert_eq!(barrier(&cfg, true, None).unwrap(), BarrierOutcome::Released);
    assert!(start.elapsed() >= Duration::from_millis(700));
    let m = late.join().unwrap();
    assert_eq!(m.state.0.lock().unwrap().check_ins.len(), 2);
}
