//! `coalloc demo`: the embedded default end to end. It starts a server (three local
//! clusters of processes with some load of other users, SQLite journal) in a fresh state
//! directory, submits the co-allocated Poisson solver (one strip per cluster, seed 003
//! §6.1), a batch of two- and three-component jobs that fills the clusters for about half a
//! minute, and one job whose first start fails on purpose (a component exits before the
//! barrier: the start is aborted, the job placed again, and it finishes); it shows their
//! progress, prints the solver's answer, writes the report, and stops the server.

use crate::client::{resolve_state_dir, Client};
use crate::error::CliError;
use crate::jobs_cmd::{jobs_table, sites_table};
use clap::Args;
use coalloc_server::config::ServerConfig;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct DemoArgs {
    /// State directory of the demo's server [default: a new directory under /tmp].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Grid points per side of the Poisson problem.
    #[arg(long, default_value_t = 48)]
    pub n: u32,
    /// Jobs in the batch that runs beside the solver.
    #[arg(long, default_value_t = 12)]
    pub batch: u32,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
}

/// The demo's sites: the embedded default's three clusters, with other users' load that
/// changes every few seconds (so the report shows coalloc's load beside theirs).
const DEMO_SITES: &str = r#"
[server]
bind = "127.0.0.1:0"
sample_interval = "1s"

[[site]]
name = "alpha"
processors = 16
manager = { type = "local", background = 1, background_max = 5, background_period = "4s" }

[[site]]
name = "beta"
processors = 16
manager = { type = "local", background = 0, background_max = 4, background_period = "5s" }

[[site]]
name = "gamma"
processors = 16
manager = { type = "local", background = 2 }

[scheduler]
policy = "fcfs"
fit = "worst"
"#;

/// The jobs the demo submits (native JSON): the solver, the job whose first start fails
/// (its components race for `mark`; the winner exits before the barrier), then the batch.
pub fn demo_jobs(exe: &str, n: u32, batch: u32, mark: &str) -> Vec<Value> {
    let strip = |i: u32| {
        json!({
            "label": format!("strip-{i}"), "count": 4, "job_type": "single",
            "executable": exe, "arguments": ["poisson", "--n", n.to_string()],
        })
    };
    let mut jobs = vec![json!({
        "name": "poisson", "user": "demo", "kind": "unordered", "max_wall_time": "5m",
        "component": [strip(0), strip(1), strip(2)],
    })];
    let shell = |count: u32, script: String| json!({"count": count, "job_type": "single", "executable": "/bin/sh", "arguments": ["-c", script]});
    let flaky = format!(
        "mkdir '{mark}' 2>/dev/null && {{ echo 'injected failure before the barrier' >&2; exit 1; }}; \"{exe}\" barrier && sleep 3"
    );
    jobs.push(json!({
        "name": "flaky", "user": "demo", "kind": "unordered", "max_wall_time": "1m",
        "component": [shell(3, flaky.clone()), shell(3, flaky)],
    }));
    for b in 0..batch {
        let comp = |c: u32| {
            let script = format!("\"{exe}\" barrier && sleep {}", 4 + (b + 2 * c) % 4);
            shell(3 + (b + c) % 4, script)
        };
        let comps: Vec<Value> = (0..2 + b % 2).map(comp).collect();
        jobs.push(json!({
            "name": format!("batch-{b}"), "user": "demo", "kind": "unordered", "max_wall_time": "2m",
            "component": comps,
        }));
    }
    jobs
}

pub fn run(args: DemoArgs) -> Result<(), CliError> {
    let dir = args.state_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("coalloc-demo-{}", std::process::id()))
    });
    let dir = resolve_state_dir(Some(dir));
    if dir.join("server.json").exists() {
        return Err(CliError::bad(format!(
            "{} belongs to a running server; give the demo its own --state-dir",
            dir.display()
        )));
    }
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Internal(format!("cannot find this program: {e}")))?
        .display()
        .to_string();
    println!(
        "coalloc demo: starting a server with the embedded default in {}",
        dir.display()
    );
    // The configuration it runs with, for `coalloc whatif --state-dir DIR` to replay under.
    crate::serve_cmd::keep_config_text(&dir, DEMO_SITES)?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<String, String>>();
    let server_dir = dir.clone();
    let server = std::thread::spawn(move || {
        let rt = match tokio::runtime::Runtime::new() {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready_tx.send(Err(e.to_string()));
                return;
            }
        };
        let ready = ready_tx.clone();
        let mut config = ServerConfig::parse(DEMO_SITES).expect("the demo's sites parse");
        config.local_launcher = crate::serve_cmd::local_launcher();
        config.pmi_proxy = std::env::current_exe().ok();
        let r = rt.block_on(coalloc_server::server::serve(
            config,
            &server_dir,
            None,
            async move {
                let _ = stop_rx.await;
            },
            move |url| {
                let _ = ready.send(Ok(url.to_string()));
            },
        ));
        if let Err(e) = r {
            let _ = ready_tx.send(Err(e.to_string()));
        }
    });
    let url = ready_rx
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| CliError::Internal("the server did not start".into()))?
        .map_err(CliError::Internal)?;
    println!("server listening on {url}");
    if let Ok(token) = std::fs::read_to_string(dir.join("token")) {
        println!(
            "dashboard: {url}/ui#token={}  (live while the demo runs)",
            token.trim()
        );
    }
    println!();
    let result = drive(&args, &dir, &exe);
    let _ = stop_tx.send(());
    let _ = server.join();
    result?;
    println!(
        "\nThe demo's state directory is {}. To run the server for real:",
        dir.display()
    );
    println!(
        "  coalloc serve --config my-sites.toml          # or no --config for the embedded default"
    );
    println!("  coalloc submit job.toml; coalloc status; coalloc watch; coalloc logs JOB; coalloc report");
    println!(
        "The demo's history under another policy: coalloc whatif --state-dir {} --policy fpfs",
        dir.display()
    );
    Ok(())
}

fn drive(args: &DemoArgs, dir: &std::path::Path, exe: &str) -> Result<(), CliError> {
    let client = Client::at(dir)?;
    let sites = client.get("/v1/sites")?;
    print!("{}", sites_table(&sites["sites"]));
    println!();
    let mark = dir.join("demo-failure-injected");
    let jobs = demo_jobs(exe, args.n, args.batch, &mark.display().to_string());
    let mut names = BTreeMap::new();
    for j in &jobs {
        let v = client.send("POST", "/v1/jobs", "application/json", &j.to_string())?;
        let id = v["job"].as_u64().unwrap_or(0);
        let name = j["name"].as_str().unwrap_or("?").to_string();
        println!(
            "submitted job {id}: {name} ({} components)",
            j["component"].as_array().map_or(0, Vec::len)
        );
        names.insert(id, name);
    }
    println!();
    let start = Instant::now();
    let mut last: BTreeMap<u64, String> = BTreeMap::new();
    let final_jobs = loop {
        let v = client.get("/v1/jobs")?;
        let js = v["jobs"].as_array().cloned().unwrap_or_default();
        for j in &js {
            let id = j["id"].as_u64().unwrap_or(0);
            let state = j["state"].as_str().unwrap_or("?").to_string();
            let sites: Vec<String> = j["components"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| c["site"].as_str().unwrap_or("-").to_string())
                .collect();
            let line = format!("{state} [{}]", sites.join(","));
            if last.get(&id) != Some(&line) {
                println!(
                    "{:>6.1} s  job {id} {:<8} {line}",
                    start.elapsed().as_secs_f64(),
                    names.get(&id).map_or("", String::as_str)
                );
                last.insert(id, line);
            }
        }
        if !js.is_empty()
            && js
                .iter()
                .all(|j| matches!(j["state"].as_str(), Some("finished" | "failed")))
        {
            break v["jobs"].clone();
        }
        if start.elapsed() > Duration::from_secs(args.timeout) {
            return Err(CliError::Internal(format!(
                "the jobs did not end within {} s",
                args.timeout
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    println!();
    print!("{}", jobs_table(&final_jobs));
    let out = std::fs::read_dir(dir.join("output/1"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".out"))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|t| {
            t.lines()
                .filter(|l| l.starts_with("poisson:"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>();
    println!();
    for l in &out {
        println!("{l}");
    }
    let failed: Vec<_> = final_jobs
        .as_array()
        .into_iter()
        .flatten()
        .filter(|j| j["state"] != "finished")
        .map(|j| j["id"].to_string())
        .collect();
    for j in final_jobs.as_array().into_iter().flatten() {
        if let (Some(why), "finished") =
            (j["last_abort"].as_str(), j["state"].as_str().unwrap_or(""))
        {
            println!(
                "job {} ({}) finished after an aborted start: {why}",
                j["id"],
                j["name"].as_str().unwrap_or("")
            );
        }
    }
    // Give the surveillance log one more sample, then draw it.
    std::thread::sleep(Duration::from_millis(300));
    println!();
    crate::report_cmd::run(crate::report_cmd::ReportArgs {
        out: None,
        json: false,
        state: crate::client::StateArgs {
            state_dir: Some(dir.to_path_buf()),
        },
    })?;
    if !failed.is_empty() {
        return Err(CliError::Internal(format!(
            "jobs {} did not finish",
            failed.join(", ")
        )));
    }
    if out.is_empty() {
        return Err(CliError::Internal(
            "the Poisson solver printed no answer".into(),
        ));
    }
    Ok(())
}
