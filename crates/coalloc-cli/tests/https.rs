//! HTTPS on the API (issue 32 item 4), end to end with `coalloc serve` bound beyond
//! loopback: inside a network namespace of its own (10.213.0.1 on its lo device, its traffic
//! never leaving the namespace), the server serves HTTPS with a generated
//! certificate; a user's token goes over it once `coalloc login` pinned the fingerprint;
//! a job's components check in at the barrier and meet in the rendezvous store over HTTPS,
//! pinning the certificate the server gives them (`COALLOC_SERVER_FINGERPRINT`), and the
//! job commits; another pin is refused; plain HTTP with a token to that address is refused by the
//! client; and `tls = "off"` with that bind is refused by the server. Needs root and `ip`
//! (skipped otherwise, saying so).

mod common;

use coalloc_testkit::server::{barrier_component, job, three_clusters};
use common::COALLOC;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const ADDR: &str = "10.213.0.1";

/// A network namespace whose loopback device also holds `ADDR` (an address beyond
/// 127.0.0.0/8, reachable only inside it); deleted on drop.
struct Netns(String);

impl Netns {
    fn make() -> Option<Netns> {
        let name = format!("coalloc-https-{}", std::process::id());
        let ip = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !ip(&["netns", "add", &name]) {
            return None;
        }
        let ns = Netns(name.clone());
        let cidr = format!("{ADDR}/24");
        let steps: [&[&str]; 2] = [
            &["-n", &name, "link", "set", "lo", "up"],
            &["-n", &name, "addr", "add", &cidr, "dev", "lo"],
        ];
        steps.iter().all(|s| ip(s)).then_some(ns)
    }

    /// `coalloc ARGS` inside the namespace.
    fn coalloc(&self, env: &[(&str, &str)], args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0, COALLOC]).args(args);
        c.env_remove("COALLOC_URL")
            .env_remove("COALLOC_TOKEN")
            .env_remove("COALLOC_SOCKET")
            .env_remove("COALLOC_FINGERPRINT");
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// A `coalloc serve` in the namespace; killed on drop.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn fresh(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("coalloc-https-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn serve(ns: &Netns, dir: &Path, config: &str) -> Child {
    let file = dir.join("config.toml");
    std::fs::write(&file, config).unwrap();
    ns.coalloc(&[], &["serve", "--bind", &format!("{ADDR}:0")])
        .arg("--config")
        .arg(&file)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn https_beyond_loopback_pins_the_certificate_and_plain_http_is_refused() {
    let Some(ns) = Netns::make() else {
        eprintln!("skipped: cannot make a network namespace (needs root and ip)");
        return;
    };
    let dir = fresh("serve");
    let config = three_clusters([2, 2, 2], "policy = \"fcfs\"");
    let served = Served(serve(&ns, &dir, &config));
    let info = dir.join("state/server.json");
    let start = Instant::now();
    let info: serde_json::Value = loop {
        if let Some(v) = std::fs::read_to_string(&info)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
        {
            break v;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no server.json");
        std::thread::sleep(Duration::from_millis(100));
    };
    let url = info["url"].as_str().unwrap().to_string();
    let fingerprint = info["fingerprint"].as_str().unwrap().to_string();
    assert!(url.starts_with(&format!("https://{ADDR}:")), "{url}");
    assert!(fingerprint.starts_with("sha256:") && fingerprint.len() == 71);
    let state = dir.join("state");
    let state = state.to_str().unwrap();

    // The admin issues bob a token (over the Unix socket / its own server.json pin).
    let out = ns
        .coalloc(&[], &["user", "add", "bob", "--json", "--state-dir", state])
        .output()
        .unwrap();
    let (o, e) = text(&out);
    assert!(out.status.success(), "{e}");
    let token = serde_json::from_str::<serde_json::Value>(&o).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string();

    // Bob, elsewhere (a state directory of his own): not trusted before login.
    let bob = fresh("bob");
    let bob_dir = bob.to_str().unwrap();
    let as_bob = [
        ("COALLOC_URL", url.as_str()),
        ("COALLOC_TOKEN", token.as_str()),
    ];
    let jobs = |env: &[(&str, &str)]| {
        ns.coalloc(env, &["sites", "--json", "--state-dir", bob_dir])
            .output()
            .unwrap()
    };
    let out = jobs(&as_bob);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).1.contains("is not trusted yet"),
        "{}",
        text(&out).1
    );

    // A fingerprint other than the presented one: refused, nothing stored.
    let wrong = format!("sha256:{}", "0".repeat(64));
    let out = ns
        .coalloc(
            &[],
            &[
                "login",
                &url,
                "--fingerprint",
                &wrong,
                "--state-dir",
                bob_dir,
            ],
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).1.contains("not the expected"),
        "{}",
        text(&out).1
    );
    assert!(!bob.join("known-servers.json").exists());

    // The right one (as the operator reads it from `coalloc serve`): pinned.
    let out = ns
        .coalloc(
            &[],
            &[
                "login",
                &url,
                "--fingerprint",
                &fingerprint,
                "--state-dir",
                bob_dir,
            ],
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    assert_eq!(text(&out).0.trim(), fingerprint);
    let pins: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bob.join("known-servers.json")).unwrap())
            .unwrap();
    assert_eq!(pins[&url], fingerprint.as_str());

    // Bob's token over HTTPS: accepted, and he sees the three sites.
    let out = jobs(&as_bob);
    assert!(out.status.success(), "{}", text(&out).1);
    let o = text(&out).0;
    let named: Vec<bool> = ["\"alpha\"", "\"beta\"", "\"gamma\""]
        .iter()
        .map(|n| o.contains(n))
        .collect();
    assert_eq!(named, vec![true, true, true], "{o}");

    // A job of two components: each checks in at the barrier over HTTPS (the runtime pins
    // the fingerprint the server put in its environment), then they swap a value through
    // the rendezvous store; the job commits and finishes.
    let marks = fresh("marks");
    let m = marks.display();
    let then = format!(
        "\"$COALLOC\" kv put k$COALLOC_COMPONENT v$COALLOC_COMPONENT || exit 1; \
         other=$((1 - COALLOC_COMPONENT)); \
         got=$(\"$COALLOC\" kv get k$other --wait 60s) || exit 1; \
         echo \"$COALLOC_URL $COALLOC_SERVER_FINGERPRINT $got\" > {m}/c$COALLOC_COMPONENT"
    );
    let spec = job(vec![
        barrier_component(COALLOC, 1, "", &then),
        barrier_component(COALLOC, 1, "", &then),
    ]);
    let file = bob.join("job.json");
    std::fs::write(&file, spec.to_string()).unwrap();
    let out = ns
        .coalloc(
            &as_bob,
            &[
                "submit",
                "--parsable",
                file.to_str().unwrap(),
                "--state-dir",
                bob_dir,
            ],
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    let id = text(&out).0.trim().to_string();
    let start = Instant::now();
    let state = loop {
        let out = ns
            .coalloc(&as_bob, &["status", &id, "--json", "--state-dir", bob_dir])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out).1);
        let j: serde_json::Value = serde_json::from_str(&text(&out).0).unwrap();
        let state = j["state"].as_str().unwrap_or_default().to_string();
        if matches!(state.as_str(), "finished" | "failed") {
            break j;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "job {id}: {j}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(state["state"], "finished", "{state}");
    let seen: Vec<String> = (0..2)
        .map(|c| std::fs::read_to_string(marks.join(format!("c{c}"))).unwrap_or_default())
        .collect();
    assert_eq!(
        seen,
        vec![
            format!("{url} {fingerprint} v1\n"),
            format!("{url} {fingerprint} v0\n"),
        ]
    );

    // Another pin (the certificate "changed"): refused with the reason.
    let mut env = as_bob.to_vec();
    env.push(("COALLOC_FINGERPRINT", &wrong));
    let out = jobs(&env);
    assert_eq!(out.status.code(), Some(2));
    let e = text(&out).1;
    assert!(
        e.contains("not the pinned one") && e.contains(&fingerprint),
        "{e}"
    );

    // Plain HTTP with a token beyond loopback: the client refuses before sending.
    let plain = url.replacen("https://", "http://", 1);
    let out = jobs(&[("COALLOC_URL", &plain), ("COALLOC_TOKEN", &token)]);
    assert_eq!(out.status.code(), Some(2));
    let e = text(&out).1;
    assert!(
        e.contains("refusing to send a bearer token over plain HTTP"),
        "{e}"
    );
    drop(served);

    // `tls = "off"` with a bind beyond loopback: the server refuses to start.
    let off = fresh("off");
    let config = config.replacen("[server]\n", "[server]\ntls = \"off\"\n", 1);
    let out = serve(&ns, &off, &config).wait_with_output().unwrap();
    assert!(!out.status.success());
    let e = text(&out).1;
    assert!(
        e.contains("beyond loopback") && e.contains("tls = \"off\""),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&bob);
    let _ = std::fs::remove_dir_all(&off);
    let _ = std::fs::remove_dir_all(&marks);
}
