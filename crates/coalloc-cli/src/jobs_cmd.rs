//! The client commands of a running server: `submit`, `status` (alias `jobs`), `cancel`,
//! `sites`, `logs`. Tables like squeue's by default, `--json` for programs.

use crate::client::{Client, StateArgs};
use crate::error::CliError;
use crate::load::load_all;
use crate::table;
use clap::Args;
use coalloc_core::spec::native;
use serde_json::{json, Value};
use std::path::PathBuf;

#[derive(Args)]
pub struct SubmitArgs {
    /// Job files: RSL (`.rsl` ordered, `.uno` unordered), batch files (`.bat`), native
    /// TOML or JSON. Every job of every file is submitted, in order.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Require the server to run this queue policy (fcfs, fpfs, easy, koala, ...); the
    /// submission is refused, before anything is sent, when it runs another.
    #[arg(long)]
    pub policy: Option<String>,
    /// Require the server to place with this fit (worst, best, first, ...).
    #[arg(long)]
    pub fit: Option<String>,
    /// Print JSON.
    #[arg(long, conflicts_with = "parsable")]
    pub json: bool,
    /// Print each job's id alone on a line, nothing else (as `sbatch --parsable`), for
    /// scripts: `id=$(coalloc submit --parsable job.toml)`.
    #[arg(long)]
    pub parsable: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

pub fn submit(args: SubmitArgs) -> Result<(), CliError> {
    let loaded = load_all(&args.files);
    let bad: Vec<String> = loaded
        .iter()
        .filter_map(|l| l.job.as_ref().err().cloned())
        .collect();
    if !bad.is_empty() {
        return Err(CliError::BadInput(bad));
    }
    let client = Client::connect(&args.state)?;
    if args.policy.is_some() || args.fit.is_some() {
        let s = client.get("/v1/sites")?;
        for (want, key) in [(&args.policy, "policy"), (&args.fit, "fit")] {
            let has = s["scheduler"][key].as_str().unwrap_or("?");
            if let Some(w) = want {
                if !w.eq_ignore_ascii_case(has) {
                    return Err(CliError::bad(format!(
                        "the server runs {key} `{has}`, not `{w}`: set `{key} = \"{w}\"` in its [scheduler] table and restart it"
                    )));
                }
            }
        }
    }
    let mut out = Vec::new();
    for l in loaded {
        let job = l.job.expect("checked above");
        let body = native::to_json(&job);
        let name = l.path.display().to_string();
        match client.send("POST", "/v1/jobs", "application/json", &body) {
            Ok(v) => {
                let id = v["job"].as_u64().unwrap_or(0);
                let waits = v["awaiting_admission"] == true;
                if args.parsable {
                    println!("{id}");
                } else if !args.json {
                    let admission = if waits {
                        "; waiting for admission: the queue is full, it enters in turn as room frees"
                    } else {
                        ""
                    };
                    println!("submitted job {id} ({name}){admission}");
                }
                out.push(json!({ "file": name, "job": id, "awaiting_admission": waits }));
            }
            Err(e) => {
                if args.json {
                    println!(
                        "{}",
                        json!({ "submitted": out, "error": format!("{name}: {e}") })
                    );
                }
                return Err(CliError::bad(format!("{name}: {e}")));
            }
        }
    }
    if args.json {
        println!("{}", json!({ "submitted": out }));
    }
    Ok(())
}

#[derive(Args)]
pub struct StatusArgs {
    /// Show one job in detail (every component, its site, launch and state).
    pub job: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

fn secs(ms: &Value) -> String {
    ms.as_i64()
        .map(|m| format!("{:.1}", m as f64 / 1000.0))
        .unwrap_or_else(|| "-".into())
}

fn sites_of(job: &Value) -> String {
    let mut v: Vec<String> = job["components"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["site"].as_str().map(str::to_owned))
        .collect();
    v.dedup();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

/// The jobs table (also used by `watch`).
pub fn jobs_table(jobs: &Value) -> String {
    let now = coalloc_server::driver::wall_ms();
    let rows: Vec<Vec<String>> = jobs
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| {
            let time = match (j["start"].as_i64(), j["end"].as_i64()) {
                (Some(s), Some(e)) => e - s,
                (Some(s), None) => now - s,
                _ => 0,
            };
            vec![
                j["id"].to_string(),
                j["name"].as_str().unwrap_or("-").to_string(),
                j["user"].as_str().unwrap_or("-").to_string(),
                j["state"].as_str().unwrap_or("?").to_string(),
                j["components"].as_array().map_or(0, Vec::len).to_string(),
                j["processors"].to_string(),
                sites_of(j),
                format!("{:.1}", time as f64 / 1000.0),
                j["last_abort"].as_str().unwrap_or("").to_string(),
            ]
        })
        .collect();
    table::render(
        &[
            "job",
            "name",
            "user",
            "state",
            "comps",
            "procs",
            "sites",
            "time s",
            "last abort",
        ],
        &rows,
    )
}

pub fn status(args: StatusArgs) -> Result<(), CliError> {
    let client = Client::connect(&args.state)?;
    match args.job {
        None => {
            let v = client.get("/v1/jobs")?;
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&v["jobs"]).unwrap_or_default()
                );
            } else {
                print!("{}", jobs_table(&v["jobs"]));
            }
        }
        Some(id) => {
            let j = client.get(&format!("/v1/jobs/{id}"))?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&j).unwrap_or_default());
                return Ok(());
            }
            print!("{}", jobs_table(&json!([j.clone()])));
            println!();
            let rows: Vec<Vec<String>> = j["components"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    vec![
                        c["index"].to_string(),
                        c["label"].as_str().unwrap_or("-").to_string(),
                        c["count"].to_string(),
                        c["site"].as_str().unwrap_or("-").to_string(),
                        c["state"].as_str().unwrap_or("?").to_string(),
                        c["launch"].as_u64().map_or("-".into(), |l| format!("L{l}")),
                        c["remote"].as_str().unwrap_or("-").to_string(),
                    ]
                })
                .collect();
            print!(
                "{}",
                table::render(
                    &["comp", "label", "count", "site", "state", "launch", "handle"],
                    &rows
                )
            );
            println!(
                "\nwait {} s, run {} s, response {} s; placement tries {}, aborts {}, failures after commit {}",
                secs(&j["wait_ms"]),
                secs(&j["run_ms"]),
                secs(&j["response_ms"]),
                j["placement_tries"],
                j["submit_failures"],
                j["completion_failures"]
            );
        }
    }
    Ok(())
}

#[derive(Args)]
pub struct CancelArgs {
    /// The jobs to cancel.
    #[arg(required = true)]
    pub jobs: Vec<u64>,
    /// Print JSON: the server's answer for each job.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

pub fn cancel(args: CancelArgs) -> Result<(), CliError> {
    let client = Client::connect(&args.state)?;
    let mut answers = Vec::new();
    for j in args.jobs {
        let v = client.delete(&format!("/v1/jobs/{j}"))?;
        if args.json {
            answers.push(v);
        } else {
            println!("cancelled job {j}");
        }
    }
    if args.json {
        println!("{}", json!({ "cancelled": answers }));
    }
    Ok(())
}

#[derive(Args)]
pub struct SitesArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

/// Why a site is out and since when (UTC), or `-`.
fn out_why(s: &Value) -> String {
    let Some(why) = s["out_reason"].as_str() else {
        return "-".into();
    };
    match s["out_since"].as_i64() {
        Some(ms) => format!("{why} (since {})", crate::events_cmd::time_of_day(ms)),
        None => why.to_owned(),
    }
}

/// The sites table (also used by `watch`).
pub fn sites_table(sites: &Value) -> String {
    let rows: Vec<Vec<String>> = sites
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            vec![
                s["name"].as_str().unwrap_or("?").to_string(),
                s["backend"].as_str().unwrap_or("?").to_string(),
                s["total"].to_string(),
                s["idle"].to_string(),
                s["coalloc"].to_string(),
                s["other"].to_string(),
                match (s["healthy"].as_bool(), s["usable"].as_bool()) {
                    _ if s["state"] == "unreachable" => "unreachable".into(),
                    _ if s["link"]["connected"] == false => "link down".into(),
                    (Some(false), _) => "down".into(),
                    (_, Some(false)) => "unusable".into(),
                    _ if s["probation"] == true => "probation".into(),
                    _ => "up".into(),
                },
                out_why(s),
                format!("{}/{}", s["submit_errors"], s["completion_errors"]),
                match s["cloud"].as_object() {
                    Some(c) => format!(
                        "{} VMs, ${:.2}",
                        c.get("vms").and_then(Value::as_u64).unwrap_or(0),
                        c.get("cost").and_then(Value::as_f64).unwrap_or(0.0)
                    ),
                    None => "-".into(),
                },
            ]
        })
        .collect();
    table::render(
        &[
            "site", "backend", "total", "idle", "coalloc", "others", "state", "why out", "errors",
            "cloud",
        ],
        &rows,
    )
}

pub fn sites(args: SitesArgs) -> Result<(), CliError> {
    let client = Client::connect(&args.state)?;
    let v = client.get("/v1/sites")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", sites_table(&v["sites"]));
        println!(
            "\nscheduler: policy {}, fit {}",
            v["scheduler"]["policy"].as_str().unwrap_or("?"),
            v["scheduler"]["fit"].as_str().unwrap_or("?")
        );
    }
    Ok(())
}

#[derive(Args)]
pub struct LogsArgs {
    /// The job.
    pub job: u64,
    /// One component (default: every component).
    pub component: Option<usize>,
    /// Standard error instead of standard output.
    #[arg(long)]
    pub err: bool,
    /// Print JSON: one object per launch (component, launch, file, text).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

/// Print the output of a job's components: every launch, oldest first, with a header each.
pub fn logs(args: LogsArgs) -> Result<(), CliError> {
    let dir = args.state.dir().join("output").join(args.job.to_string());
    let ext = if args.err { "err" } else { "out" };
    let mut files: Vec<(usize, u64, PathBuf)> = std::fs::read_dir(&dir)
        .map_err(|_| {
            CliError::bad(format!(
                "no output of job {} in {}",
                args.job,
                dir.display()
            ))
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            let stem = name.strip_suffix(&format!(".{ext}"))?;
            let (c, l) = stem.split_once(".L")?;
            Some((c.parse().ok()?, l.parse().ok()?, p))
        })
        .filter(|(c, _, _)| args.component.is_none_or(|want| want == *c))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(CliError::bad(format!("no output of job {} yet", args.job)));
    }
    if args.json {
        let launches: Vec<Value> = files
            .iter()
            .map(|(c, l, p)| {
                let text = std::fs::read(p).unwrap_or_default();
                json!({ "component": c, "launch": l, "file": p.display().to_string(),
                    "text": String::from_utf8_lossy(&text) })
            })
            .collect();
        println!("{}", json!({ "job": args.job, "launches": launches }));
        return Ok(());
    }
    for (c, l, p) in files {
        println!(
            "==> job {} component {c} launch L{l} ({}) <==",
            args.job,
            p.display()
        );
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        print!("{text}");
        if !text.is_empty() && !text.ends_with('\n') {
            println!();
        }
    }
    Ok(())
}
