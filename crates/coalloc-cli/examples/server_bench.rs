//! Server benchmarks (issue 5), run by `bench/server.sh`:
//!
//! 1. co-allocation latency on the local backend: submit a job of k one-process components
//!    (each runs `coalloc barrier`), time from the submit request to the barrier's release
//!    (the server's own timestamps: `barrier_release - submit`), and the client's view (until
//!    the last component printed that it passed), k = 1, 2, 4, 8, 16, 25;
//! 2. durable submissions per second over HTTP: T client threads with keep-alive post small
//!    jobs as fast as they can; every answer comes after the job is committed to the journal
//!    (SQLite, synchronous=FULL). The sites are marked unusable first, so the jobs queue and
//!    nothing runs: the figure is the submission path alone.
//!
//! Usage: server_bench COALLOC_BINARY [--reps N] [--jobs N] [--threads T]

#[path = "shared/args.rs"]
mod args;

use args::arg;
use coalloc_testkit::server::Server;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let coalloc = args
        .get(1)
        .expect("usage: server_bench COALLOC_BINARY [--reps N] [--jobs N] [--threads T]")
        .clone();
    let reps = arg(&args, "--reps", 10);
    let jobs = arg(&args, "--jobs", 20000);
    let threads = arg(&args, "--threads", 16);
    let base = std::env::temp_dir().join(format!("coalloc-bench-{}", std::process::id()));

    // 1. Latency: 25 slots on each of three clusters, components spread by the worst fit.
    let config = "[server]\nmonitor_interval = \"100ms\"\n\
        [[site]]\nname = \"alpha\"\nprocessors = 25\n[[site]]\nname = \"beta\"\nprocessors = 25\n\
        [[site]]\nname = \"gamma\"\nprocessors = 25\n[scheduler]\npolicy = \"fcfs\"\nfit = \"worst\"\n";
    let s = Server::start_in(&coalloc, &base.join("latency"), config);
    // The component: `coalloc barrier` (the full binary), or the small `coalloc-barrier`
    // program of coalloc-runtime when it is beside it.
    let small = PathBuf::from(&coalloc).with_file_name("coalloc-barrier");
    let mut programs = vec![(coalloc.clone(), vec!["barrier".to_string()])];
    if small.is_file() {
        programs.push((small.display().to_string(), vec![]));
    }
    for (exe, exe_args) in &programs {
        println!("\ncomponent: `{exe} {}`\n", exe_args.join(" "));
        println!("| components | server: submit -> barrier released, median ms | min | max | client: submit -> job ended, median ms |");
        println!("| ---: | ---: | ---: | ---: | ---: |");
        for k in [1usize, 2, 4, 8, 16, 25] {
            let mut server_ms = Vec::new();
            let mut client_ms = Vec::new();
            for _ in 0..reps {
                let comps: Vec<Value> = (0..k)
                .map(|_| json!({"count": 1, "job_type": "single", "executable": exe, "arguments": exe_args}))
                .collect();
                let job = json!({"kind": "unordered", "component": comps}).to_string();
                let t = Instant::now();
                let id = s.api("POST", "/v1/jobs", Some(&job))["job"]
                    .as_u64()
                    .expect("submitted");
                let j = loop {
                    let j = s.api("GET", &format!("/v1/jobs/{id}"), None);
                    if j["state"] == "finished" || j["state"] == "failed" {
                        break j;
                    }
                    std::thread::sleep(Duration::from_millis(2));
                };
                assert_eq!(j["state"], "finished", "{j}");
                client_ms.push(t.elapsed().as_secs_f64() * 1000.0);
                server_ms.push(
                    (j["barrier_release"].as_i64().unwrap() - j["submit"].as_i64().unwrap()) as f64,
                );
            }
            let med = |v: &mut Vec<f64>| {
                v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                v[v.len() / 2]
            };
            let (lo, hi) = (
                server_ms.iter().cloned().fold(f64::MAX, f64::min),
                server_ms.iter().cloned().fold(0.0, f64::max),
            );
            println!(
                "| {k} | {:.0} | {lo:.0} | {hi:.0} | {:.0} |",
                med(&mut server_ms),
                med(&mut client_ms)
            );
        }
    }
    drop(s);

    // 2. Durable submissions per second.
    let s = Server::start_in(&coalloc, &base.join("submit"), config);
    for site in ["alpha", "beta", "gamma"] {
        s.api(
            "PUT",
            &format!("/v1/sites/{site}/usable"),
            Some("{\"usable\": false}"),
        );
    }
    let job = json!({"kind": "unordered", "component": [{"count": 1, "executable": "/bin/true"}, {"count": 1, "executable": "/bin/true"}]}).to_string();
    let per = jobs / threads;
    let t = Instant::now();
    std::thread::scope(|sc| {
        for _ in 0..threads {
            let (s, job) = (&s, &job);
            sc.spawn(move || {
                for _ in 0..per {
                    let v = s.api("POST", "/v1/jobs", Some(job));
                    assert!(v["job"].as_u64().is_some(), "{v}");
                }
            });
        }
    });
    let secs = t.elapsed().as_secs_f64();
    let n = per * threads;
    // The listing comes in pages (at most 1,000 jobs by default): count them all.
    let (mut listed, mut after) = (0, 0);
    loop {
        let page = s.api("GET", &format!("/v1/jobs?after={after}&limit=10000"), None);
        let jobs = page["jobs"].as_array().cloned().unwrap_or_default();
        let Some(last) = jobs.last().and_then(|j| j["id"].as_u64()) else {
            break;
        };
        listed += jobs.len();
        after = last;
    }
    assert_eq!(listed, n, "every acknowledged job is there");
    println!(
        "\ndurable submissions: {n} two-component jobs from {threads} client threads in {secs:.2} s = {:.0} jobs/s (all {listed} listed afterwards)",
        n as f64 / secs
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&base);
}
