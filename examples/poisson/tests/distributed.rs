//! The `poisson` binary as a co-allocated job of three components against a mock coalloc
//! server: the distributed answer must equal the standalone one (red-black Gauss-Seidel does
//! the same arithmetic whatever the split, so this checks the halo exchange and reductions).

// The runtime's own mock server (test crates cannot share a module across packages).
#[path = "../../../crates/coalloc-runtime/tests/mock/mod.rs"]
mod mock;

use mock::Mock;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_poisson"));
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, _) in std::env::vars() {
        if k.starts_with("COALLOC_") {
            c.env_remove(k);
        }
    }
    c
}

/// Wait for a child at most a minute (kill it after that, so a hang fails the test).
fn finish(mut child: Child) -> Output {
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `(iterations, max_error)` from component 0's line.
fn result_line(out: &str, n: usize, components: usize) -> (u64, f64) {
    let line = out.lines().next().unwrap_or_default();
    let rest = line
        .strip_prefix(&format!(
            "poisson: n={n} components={components} iterations="
        ))
        .unwrap_or_else(|| panic!("unexpected line `{line}`"));
    let rest = rest
        .strip_suffix(" ok")
        .unwrap_or_else(|| panic!("not ok: `{line}`"));
    let (iters, err) = rest.split_once(" max_error=").expect("max_error");
    (
        iters.parse().expect("iterations"),
        err.parse().expect("error"),
    )
}

#[test]
fn three_components_give_the_serial_answer() {
    let args = ["--n", "40", "--tol", "1e-7"];
    let alone = finish(command(&args).spawn().expect("spawn"));
    let (out, err) = text(&alone);
    assert!(alone.status.success(), "standalone: {out}{err}");
    let serial = result_line(&out, 40, 1);

    let m = Mock::start(3, "job-secret", &[]);
    let sizes = [2, 1, 3];
    let mut children = Vec::new();
    for i in 0..3 {
        let mut c = command(&args);
        c.envs(m.env(i, &sizes));
        children.push(c.spawn().expect("spawn"));
    }
    // A second process of component 0: it checks in and leaves.
    let mut extra = command(&args);
    extra.envs(m.env(0, &sizes));
    extra
        .env("COALLOC_LOCAL_RANK", "1")
        .env("COALLOC_RANK", "1");
    children.push(extra.spawn().expect("spawn"));

    let outputs: Vec<Output> = children.into_iter().map(finish).collect();
    for (i, o) in outputs.iter().enumerate() {
        let (out, err) = text(o);
        assert!(o.status.success(), "process {i}: {out}{err}");
    }
    let (out0, _) = text(&outputs[0]);
    let distributed = result_line(&out0, 40, 3);
    assert_eq!(distributed.0, serial.0, "iterations");
    assert!(
        (distributed.1 - serial.1).abs() < 1e-9,
        "{distributed:?} vs {serial:?}"
    );
    assert_eq!(distributed.1, serial.1, "bit-for-bit");
    assert_eq!(text(&outputs[1]).0.trim(), "poisson: component 1 done");
    assert_eq!(text(&outputs[2]).0.trim(), "poisson: component 2 done");
    assert_eq!(text(&outputs[3]).0, "");

    let st = m.state.0.lock().unwrap();
    assert_eq!(st.check_ins.len(), 4);
    assert!(st.check_ins.iter().all(|c| c.contains("\"ok\":true")));
    assert!((0..3).all(|i| st.kv.contains_key(&format!("poisson/addr/{i}"))));
}

#[test]
fn an_impossible_split_fails_at_the_barrier() {
    let m = Mock::start(
        4,
        "s",
        &[r#"{"state":"aborted","reason":"component 1 failed"}"#],
    );
    let mut c = command(&["--n", "2"]);
    c.envs(m.env(1, &[1, 1, 1]));
    let o = finish(c.spawn().expect("spawn"));
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(err.contains("aborted"), "{err}");
    let st = m.state.0.lock().unwrap();
    assert!(
        st.check_ins[0].contains("\"ok\":false"),
        "{:?}",
        st.check_ins
    );
    assert!(st.check_ins[0].contains("too small"), "{:?}", st.check_ins);
}

#[test]
fn bad_arguments_exit_1_without_a_server() {
    let o = finish(command(&["--n", "zero"]).spawn().expect("spawn"));
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("--n zero"));
    let o = finish(command(&["--help"]).spawn().expect("spawn"));
    assert!(o.status.success() && text(&o).0.contains("usage: poisson"));
}

#[test]
fn a_stale_address_in_the_store_is_replaced() {
    let args = ["--n", "16"];
    let m = Mock::start(5, "s", &[]);
    // An address left by an earlier run of the job: nothing listens there any more.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let stale = dead.local_addr().unwrap().to_string();
    drop(dead);
    m.state
        .0
        .lock()
        .unwrap()
        .kv
        .insert("poisson/addr/1".into(), stale.into_bytes());
    let mut first = command(&args);
    first.envs(m.env(0, &[1, 1]));
    let first = first.spawn().expect("spawn");
    std::thread::sleep(Duration::from_millis(800));
    let mut second = command(&args);
    second.envs(m.env(1, &[1, 1]));
    let second = second.spawn().expect("spawn");
    let (a, b) = (finish(first), finish(second));
    assert!(
        a.status.success() && b.status.success(),
        "{:?} {:?}",
        text(&a),
        text(&b)
    );
    result_line(&text(&a).0, 16, 2);
}
