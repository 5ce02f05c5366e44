//! Site-agent benchmarks (issue 16), run by `bench/agents.sh`:
//!
//! 1. the agent hop: co-allocation latency (submit -> barrier released, the server's own
//!    timestamps) of jobs of k one-process components (`coalloc-barrier`), k = 1, 4, 16, 25,
//!    on three local sites of 25 slots reached directly, and on the same three sites reached
//!    through `coalloc agent` processes on this host; the two servers run side by side and
//!    their samples alternate;
//! 2. with `--slurm BASE` (a rig of scripts/slurm/up.sh with clusters alpha, beta, gamma):
//!    the same latency for k = 1, 3, 6 components spread round-robin over the three Slurm
//!    clusters through their agents (`launch = "allocation"`), each sample paired with a
//!    sample of Slurm's own floor for the same launches (bench/slurm-diag/steps.sh's, run
//!    from here), the two in alternating order, each started at a random moment on quiet
//!    clusters, as bench/slurm.sh does.
//!
//! Usage: agent_bench COALLOC_BINARY [--reps N] [--slurm BASE [--slurm-only]]
//!
//! The servers poll their sites at the default monitor interval (200 ms; runs 1-4 of
//! bench/RESULTS.md used 100 ms); `BENCH_MONITOR=100ms` sets another.

#[path = "shared/args.rs"]
mod args;

use args::arg;
use coalloc_testkit::server::Server;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An agent process, killed on drop.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Enrol `site` on `s` and start its agent with the manager table `manager`.
fn agent(coalloc: &str, s: &Server, dir: &Path, site: &str, n: u32, manager: &str) -> Agent {
    let out = Command::new(coalloc)
        .args(["site", "add", site, "--state-dir"])
        .arg(&s.dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = dir.join(format!("agent-{site}"));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("token"), &out.stdout).unwrap();
    std::fs::write(
        d.join("agent.toml"),
        format!(
            "[agent]\nrelay_bind = \"127.0.0.1:{}\"\n[[site]]\nname = \"{site}\"\nprocessors = {n}\nmanager = {manager}\n",
            free_port()
        ),
    )
    .unwrap();
    let child = Command::new(coalloc)
        .arg("agent")
        .arg("--token-file")
        .arg(d.join("token"))
        .arg("--config")
        .arg(d.join("agent.toml"))
        .arg("--state-dir")
        .arg(d.join("state"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    Agent(child)
}

fn wait_links(s: &Server, n: usize) {
    let t = Instant::now();
    loop {
        let v = s.api("GET", "/v1/sites", None);
        let up = v["sites"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["link"]["connected"] == true)
            .count();
        if up == n {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "agents not connected: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How long one sample may take before it is given up (and its job shown).
const SAMPLE_LIMIT: Duration = Duration::from_secs(60);

/// Submit `job`, wait for its end; barrier_release - submit in ms, or `None` (with the job
/// and the sites on stderr) when the job failed or did not end within [`SAMPLE_LIMIT`].
fn latency(s: &Server, job: &Value) -> Option<f64> {
    let id = s.api("POST", "/v1/jobs", Some(&job.to_string()))["job"]
        .as_u64()
        .expect("submitted");
    let t = Instant::now();
    let j = loop {
        let j = s.api("GET", &format!("/v1/jobs/{id}"), None);
        if j["state"] == "finished" || j["state"] == "failed" {
            break j;
        }
        if t.elapsed() > SAMPLE_LIMIT {
            eprintln!(
                "sample given up after {SAMPLE_LIMIT:?}: job {j}\nsites: {}",
                s.api("GET", "/v1/sites", None)
            );
            s.api("DELETE", &format!("/v1/jobs/{id}"), None);
            return None;
        }
        // The figure is the server's own timestamps: polling faster would only take CPU
        // from the processes being measured.
        std::thread::sleep(Duration::from_millis(10));
    };
    if j["state"] != "finished" {
        eprintln!("sample failed: job {j}");
        return None;
    }
    Some((j["barrier_release"].as_i64()? - j["submit"].as_i64()?) as f64)
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn config(sites: &[(&str, u32, &str)]) -> String {
    // The server's default monitor interval unless BENCH_MONITOR says otherwise.
    let monitor = std::env::var("BENCH_MONITOR")
        .map(|m| format!("monitor_interval = \"{m}\"\n"))
        .unwrap_or_default();
    let mut c = format!("[server]\n{monitor}agent_bind = \"127.0.0.1:0\"\nheartbeat = \"1s\"\n",);
    for (name, n, manager) in sites {
        c += &format!("[[site]]\nname = \"{name}\"\nprocessors = {n}\nmanager = {manager}\n");
    }
    c + "[scheduler]\npolicy = \"fcfs\"\nfit = \"worst\"\n"
}

/// Part 1: the agent hop on three local sites, direct and through agents, alternating.
fn hop(coalloc: &str, base: &Path, barrier: &str, reps: usize) {
    let local = "{ type = \"local\" }";
    let agent_site = "{ type = \"agent\" }";
    let names = ["alpha", "beta", "gamma"];
    let direct = Server::start_in(
        coalloc,
        &base.join("direct"),
        &config(&names.map(|n| (n, 25, local))),
    );
    let remote = Server::start_in(
        coalloc,
        &base.join("agents"),
        &config(&names.map(|n| (n, 25, agent_site))),
    );
    let _agents: Vec<Agent> = names
        .iter()
        .map(|n| agent(coalloc, &remote, &base.join("agents"), n, 25, local))
        .collect();
    wait_links(&remote, 3);
    println!("component: `{barrier}`, {reps} samples of each, alternating\n");
    println!("| components | direct: median ms | through agents: median ms | agent hop: difference of medians ms | agent hop: median of paired differences ms |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    for k in [1usize, 4, 16, 25] {
        let comps: Vec<Value> = (0..k)
            .map(|_| json!({"count": 1, "job_type": "single", "executable": barrier}))
            .collect();
        let job = json!({"kind": "unordered", "component": comps});
        let (mut d, mut a, mut pairs) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..reps {
            // Alternate which server goes first, so neither always follows the other's job.
            let (x, y) = if i % 2 == 0 {
                let x = latency(&direct, &job);
                (x, latency(&remote, &job))
            } else {
                let y = latency(&remote, &job);
                (latency(&direct, &job), y)
            };
            d.extend(x);
            a.extend(y);
            if let (Some(x), Some(y)) = (x, y) {
                pairs.push(y - x);
            }
        }
        let (md, ma) = (median(&mut d), median(&mut a));
        println!(
            "| {k} | {md:.0} | {ma:.0} | {:+.0} | {:+.1} |",
            ma - md,
            median(&mut pairs)
        );
    }
    drop(_agents);
    drop(remote);
    drop(direct);
}

/// Slurm's floor for the launches of a k-component sample (bench/slurm-diag/steps.sh's
/// `run`): k `salloc -n1 -- srun -N1 -n1` clients at once, round-robin over the clusters,
/// each step writing when it started; ms from just before the first client to the last
/// step's start. The clients are waited for, not polled.
fn floor(rig: &Path, dir: &Path, k: usize) -> Option<f64> {
    let names = ["alpha", "beta", "gamma"];
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let wall_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    };
    let t0 = wall_ns();
    let clients: Vec<Child> = (0..k)
        .map(|i| {
            let file = dir.join(format!("t.{i}"));
            Command::new("salloc")
                .env("SLURM_CONF", rig.join(names[i % 3]).join("slurm.conf"))
                .args(["-J", "steps-diag", "-n1", "-t1", "--", "srun", "-N1", "-n1"])
                .args(["--input=none", "/bin/sh", "-c"])
                .arg(format!("date +%s%N > {}", file.display()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("salloc runs")
        })
        .collect();
    for mut c in clients {
        let _ = c.wait();
    }
    let mut last = 0u128;
    for i in 0..k {
        let t = std::fs::read_to_string(dir.join(format!("t.{i}"))).ok()?;
        last = last.max(t.trim().parse().ok()?);
    }
    Some(last.saturating_sub(t0) as f64 / 1e6)
}

/// Part 2: k = 1, 3, 6 components round-robin over the rig's three clusters through their
/// agents (`launch = "allocation"`), each sample paired with a sample of Slurm's floor for
/// the same launches ([`floor`]), the two in alternating order, each at a random moment.
fn slurm_part(coalloc: &str, base: &Path, barrier: &str, rig: &Path, reps: usize) {
    let names = ["alpha", "beta", "gamma"];
    let agent_site = "{ type = \"agent\" }";
    let manager = |n: &str| {
        format!(
            "{{ type = \"slurm\", slurm_conf = \"{}\", launch = \"allocation\" }}",
            rig.join(n).join("slurm.conf").display()
        )
    };
    let s = Server::start_in(
        coalloc,
        &base.join("slurm"),
        &config(&names.map(|n| (n, 32, agent_site))),
    );
    let _agents: Vec<Agent> = names
        .iter()
        .map(|n| agent(coalloc, &s, &base.join("slurm"), n, 32, &manager(n)))
        .collect();
    wait_links(&s, 3);
    println!(
        "\nSlurm sites through agents (launch = \"allocation\") beside Slurm's floor for the same launches, {reps} pairs of samples\n"
    );
    println!("| components | through agents: median ms (min-max) | floor: median ms (min-max) | over the floor: difference of medians ms | over the floor: median of paired differences ms | samples given up |");
    println!("| ---: | --- | --- | ---: | ---: | ---: |");
    let range = |v: &[f64]| {
        let lo = v.iter().cloned().fold(f64::MAX, f64::min);
        let hi = v.iter().cloned().fold(0.0, f64::max);
        format!("{lo:.0}-{hi:.0}")
    };
    for k in [1usize, 3, 6] {
        let comps: Vec<Value> = (0..k)
            .map(|i| json!({"site": names[i % 3], "count": 1, "job_type": "single", "executable": barrier}))
            .collect();
        let job = json!({"kind": "ordered", "max_wall_time": "2m", "component": comps});
        let (mut ours, mut floors, mut diffs, mut lost) = (Vec::new(), Vec::new(), Vec::new(), 0);
        for i in 0..reps {
            // A random moment on quiet clusters (bench/slurm.sh's SETTLE) before each.
            let pause = |j: usize| {
                let r =
                    f64::from(std::process::id() as u16 ^ (j as u16).wrapping_mul(7919)) / 65536.0;
                std::thread::sleep(Duration::from_secs_f64(0.3 + r));
            };
            let mut pair = [None, None];
            for turn in 0..2 {
                pause(2 * i + turn);
                if (turn + i) % 2 == 0 {
                    pair[0] = latency(&s, &job);
                } else {
                    pair[1] = floor(rig, &base.join("floor"), k);
                }
            }
            match pair {
                [Some(a), Some(b)] => {
                    ours.push(a);
                    floors.push(b);
                    diffs.push(a - b);
                }
                _ => lost += 1,
            }
        }
        let (ro, rf) = (range(&ours), range(&floors));
        let (mo, mf) = (median(&mut ours), median(&mut floors));
        println!(
            "| {k} | {mo:.0} ({ro}) | {mf:.0} ({rf}) | {:+.0} | {:+.1} | {lost} |",
            mo - mf,
            median(&mut diffs)
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let coalloc = args
        .get(1)
        .expect("usage: agent_bench COALLOC_BINARY [--reps N] [--slurm BASE [--slurm-only]]")
        .clone();
    let reps = arg(&args, "--reps", 10);
    let slurm = args
        .iter()
        .position(|a| a == "--slurm")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let base = std::env::temp_dir().join(format!("coalloc-agent-bench-{}", std::process::id()));
    let barrier = PathBuf::from(&coalloc)
        .with_file_name("coalloc-barrier")
        .display()
        .to_string();

    // 1. The agent hop on local sites (`--slurm-only`: skipped).
    if !args.iter().any(|a| a == "--slurm-only") {
        hop(&coalloc, &base, &barrier, reps);
    }
    // 2. Slurm sites through agents, beside Slurm's floor.
    if let Some(rig) = slurm {
        slurm_part(&coalloc, &base, &barrier, &rig, reps);
    }
    let _ = std::fs::remove_dir_all(&base);
}
