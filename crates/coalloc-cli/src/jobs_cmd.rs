//! The client commands of a running server: `submit`, `status` (alias `jobs`), `history`, `cancel`,
//! `sites`, `logs`. Tables like squeue's by default, `--json` for programs.

use crate::client::{Client, StateArgs};
use crate::error::CliError;
use crate::list_args::ListArgs;
use crate::load::load_all;
use crate::table;
use clap::Args;
use coalloc_core::model::ReserveRequest;
use coalloc_core::spec::native;
use coalloc_core::spec::units::{parse_duration, Scalar};
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
    /// Submit each job as an array, one element per index (`0-999`, or one index `7`):
    /// jobs with consecutive numbers, shown as `FIRST_[A-B]` and cancelled as one
    /// (`coalloc cancel FIRST`, or some elements: `coalloc cancel FIRST_[3-9]`); each
    /// component sees its element's index in COALLOC_ARRAY_INDEX.
    #[arg(long, value_name = "A-B")]
    pub array: Option<String>,
    /// Co-allocate by advance reservation (issue 31): every component is reserved at a
    /// common start on its site, then submitted into its reservation (as `reserve = true`
    /// in the spec).
    #[arg(long)]
    pub reserve: bool,
    /// With `--reserve`: the earliest common start, `+DURATION` from now (`+30s`, `+10m`)
    /// or seconds since the Unix epoch.
    #[arg(long, requires = "reserve", value_name = "T")]
    pub start: Option<String>,
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

/// `--start`: `+DURATION` from now, or seconds since the Unix epoch; in ms since the epoch
/// (the server's clock).
fn start_ms(t: &str) -> Result<i64, CliError> {
    let bad = |e: String| CliError::bad(format!("--start {t}: {e}"));
    match t.strip_prefix('+') {
        Some(d) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            Ok(now + parse_duration(&Scalar::Str(d.to_owned())).map_err(bad)?)
        }
        None => t.parse::<i64>().map(|s| s * 1_000).map_err(|e| {
            bad(format!(
                "expected +DURATION or seconds since the epoch ({e})"
            ))
        }),
    }
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
    let start = args.start.as_deref().map(start_ms).transpose()?;
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
        let mut job = l.job.expect("checked above");
        if args.reserve {
            let start = start.or(job.extra().reserve.and_then(|r| r.start));
            job = job.with(|e| e.reserve = Some(ReserveRequest { start }));
        }
        let body = native::to_json(&job);
        let name = l.path.display().to_string();
        let path = match &args.array {
            Some(a) => format!("/v1/jobs?array={a}"),
            None => "/v1/jobs".into(),
        };
        match client.send("POST", &path, "application/json", &body) {
            Ok(v) => {
                let id = v["job"].as_u64().unwrap_or(0);
                let array = v["array"].as_str();
                let waits = v["awaiting_admission"] == true;
                if args.parsable {
                    println!("{id}");
                } else if !args.json {
                    let admission = if waits {
                        "; waiting for admission: the queue is full, it enters in turn as room frees"
                    } else {
                        ""
                    };
                    match array {
                        Some(a) => println!("submitted array {a} ({name}){admission}"),
                        None => println!("submitted job {id} ({name}){admission}"),
                    }
                }
                out.push(
                    json!({ "file": name, "job": id, "array": array, "awaiting_admission": waits }),
                );
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
    /// Which jobs (default: the active ones, pending and running, as squeue shows).
    #[command(flatten)]
    pub list: ListArgs,
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

/// The columns of the jobs table.
pub const JOB_HEADER: [&str; 9] = [
    "job",
    "name",
    "user",
    "state",
    "comps",
    "procs",
    "sites",
    "time s",
    "last abort",
];

/// An array element's array and index, from its `array` field (`FIRST_INDEX`).
fn element(job: &Value) -> Option<(u64, u32)> {
    let (first, index) = job["array"].as_str()?.split_once('_')?;
    Some((first.parse().ok()?, index.parse().ok()?))
}

/// The rows of the jobs table, one per job; the queued elements of an array that follow
/// each other make one row, `FIRST_[A-B]`, as squeue shows pending array elements.
pub fn job_rows(jobs: &Value) -> Vec<Vec<String>> {
    let now = coalloc_server::driver::wall_ms();
    // (array, first index, last index) of the run the last row stands for.
    let mut run: Option<(u64, u32, u32)> = None;
    let mut rows: Vec<Vec<String>> = Vec::new();
    for j in jobs.as_array().into_iter().flatten() {
        let queued = j["state"] == "queued";
        if let (Some((a, i)), Some((ra, lo, hi)), Some(row)) = (element(j), run, rows.last_mut()) {
            if queued && a == ra && i == hi + 1 {
                row[0] = format!("{a}_[{lo}-{i}]");
                run = Some((a, lo, i));
                continue;
            }
        }
        run = element(j).filter(|_| queued).map(|(a, i)| (a, i, i));
        let time = match (j["start"].as_i64(), j["end"].as_i64()) {
            (Some(s), Some(e)) => e - s,
            (Some(s), None) => now - s,
            _ => 0,
        };
        rows.push(vec![
            j["array"]
                .as_str()
                .map_or_else(|| j["id"].to_string(), str::to_owned),
            j["name"].as_str().unwrap_or("-").to_string(),
            j["user"].as_str().unwrap_or("-").to_string(),
            j["state"].as_str().unwrap_or("?").to_string(),
            j["components"].as_array().map_or(0, Vec::len).to_string(),
            j["processors"].to_string(),
            sites_of(j),
            format!("{:.1}", time as f64 / 1000.0),
            j["last_abort"].as_str().unwrap_or("").to_string(),
        ]);
    }
    rows
}

/// The jobs table (also used by `watch`).
pub fn jobs_table(jobs: &Value) -> String {
    table::render(&JOB_HEADER, &job_rows(jobs))
}

pub fn status(args: StatusArgs) -> Result<(), CliError> {
    let client = Client::connect(&args.state)?;
    match args.job {
        None => args.list.print(&client, "/v1/jobs", "active")?,
        Some(id) => {
            let j = client.get(&format!("/v1/jobs/{id}"))?;
            if args.list.json {
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
            let resv = crate::reserve_cmd::reservations_of(std::slice::from_ref(&j));
            if !resv.is_empty() {
                let rows: Vec<Vec<String>> = resv
                    .iter()
                    .map(|r| {
                        vec![
                            r["component"].to_string(),
                            r["reservation"].as_str().unwrap_or("-").to_string(),
                            r["state"].as_str().unwrap_or("-").to_string(),
                            r["promised_start"]
                                .as_i64()
                                .map_or("-".into(), |t| t.to_string()),
                        ]
                    })
                    .collect();
                println!();
                print!(
                    "{}",
                    table::render(
                        &["comp", "reservation", "state", "promised start (ms)"],
                        &rows
                    )
                );
            }
            if let Some(t) = j["transfers"].as_array().filter(|t| !t.is_empty()) {
                println!();
                print!("{}", transfers_table(t));
            }
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

/// A job's input-file transfers (seed 000 §2.5): file, from, to, progress, state.
fn transfers_table(t: &[Value]) -> String {
    let rows: Vec<Vec<String>> = t
        .iter()
        .map(|x| {
            let (bytes, size) = (
                x["bytes"].as_u64().unwrap_or(0),
                x["size"].as_u64().unwrap_or(0),
            );
            vec![
                x["component"].to_string(),
                x["file"].as_str().unwrap_or("?").to_string(),
                x["from"].as_str().unwrap_or("?").to_string(),
                x["to"].as_str().unwrap_or("?").to_string(),
                format!(
                    "{bytes}/{size} ({}%)",
                    (bytes * 100).checked_div(size).unwrap_or(100)
                ),
                x["state"].as_str().unwrap_or("?").to_string(),
                x["reason"].as_str().unwrap_or("").to_string(),
            ]
        })
        .collect();
    table::render(
        &[
            "comp",
            "input file",
            "from",
            "to",
            "bytes",
            "transfer",
            "reason",
        ],
        &rows,
    )
}

#[derive(Args)]
pub struct HistoryArgs {
    /// Which ended jobs (default: all of them, finished and failed).
    #[command(flatten)]
    pub list: ListArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

pub fn history(args: HistoryArgs) -> Result<(), CliError> {
    let client = Client::connect(&args.state)?;
    args.list.print(&client, "/v1/history", "ended")
}

#[derive(Args)]
pub struct CancelArgs {
    /// The jobs to cancel: `12`; an array's elements `12_5` or `12_[3-9]`; a whole array by
    /// its first job's number, `12`.
    #[arg(required = true)]
    pub jobs: Vec<String>,
    /// Print JSON: the server's answer for each job or array.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

/// What `coalloc cancel` was given: a job (or a whole array), or some of an array's elements.
#[derive(Debug, PartialEq, Eq)]
enum CancelTarget {
    Job(u64),
    Elements(u64, String),
}

fn cancel_target(text: &str) -> Result<CancelTarget, CliError> {
    let bad = || {
        CliError::bad(format!(
            "`{text}` is not a job: expected a number (12), an array element (12_5) or elements (12_[3-9])"
        ))
    };
    match text.split_once('_') {
        None => text.parse().map(CancelTarget::Job).map_err(|_| bad()),
        Some((first, rest)) => {
            let first = first.parse().map_err(|_| bad())?;
            let indexes = rest
                .strip_prefix('[')
                .and_then(|r| r.strip_suffix(']'))
                .unwrap_or(rest);
            let ok = !indexes.is_empty() && indexes.chars().all(|c| c.is_ascii_digit() || c == '-');
            ok.then(|| CancelTarget::Elements(first, indexes.to_string()))
                .ok_or_else(bad)
        }
    }
}

pub fn cancel(args: CancelArgs) -> Result<(), CliError> {
    let targets = args
        .jobs
        .iter()
        .map(|t| cancel_target(t))
        .collect::<Result<Vec<_>, _>>()?;
    let client = Client::connect(&args.state)?;
    let said = |v: &Value| v["cancelled"].as_array().map_or(0, Vec::len);
    let mut answers = Vec::new();
    for (text, t) in args.jobs.iter().zip(targets) {
        let (v, what) = match t {
            CancelTarget::Elements(first, indexes) => {
                let v = client.delete(&format!("/v1/arrays/{first}?indexes={indexes}"))?;
                let what = format!("cancelled {} jobs of array {text}", said(&v));
                (v, what)
            }
            // A whole array, as Slurm's `scancel FIRST`; else the one job.
            CancelTarget::Job(j) => match client.delete(&format!("/v1/arrays/{j}")) {
                Ok(v) => {
                    let what = format!("cancelled {} jobs of array {j}", said(&v));
                    (v, what)
                }
                Err(_) => (
                    client.delete(&format!("/v1/jobs/{j}"))?,
                    format!("cancelled job {j}"),
                ),
            },
        };
        if args.json {
            answers.push(v);
        } else {
            println!("{what}");
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

/// Bandwidth between sites (seed 000 §2.6): configured and measured (EWMA), MB/s.
fn bandwidth_table(sites: &Value) -> String {
    let mb = |x: &Value| {
        x.as_u64()
            .map_or("-".into(), |b| format!("{:.1}", b as f64 / 1e6))
    };
    let rows: Vec<Vec<String>> = sites
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| {
            let from = s["name"].as_str().unwrap_or("?").to_string();
            s["bandwidth"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |b| {
                    vec![
                        from.clone(),
                        b["to"].as_str().unwrap_or("?").to_string(),
                        mb(&b["configured"]),
                        mb(&b["measured"]),
                    ]
                })
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    table::render(&["from", "to", "configured MB/s", "measured MB/s"], &rows)
}

pub fn sites(args: SitesArgs) -> Result<(), CliError> {
    let client = Client::connect(&args.state)?;
    let v = client.get("/v1/sites")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", sites_table(&v["sites"]));
        let bw = bandwidth_table(&v["sites"]);
        if !bw.is_empty() {
            print!("\n{bw}");
        }
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
    /// Keep printing what the component writes until it ends (the latest launch of
    /// COMPONENT, 0 when none is given; waits for a first launch while the job is queued).
    #[arg(long, short = 'f', conflicts_with = "json")]
    pub follow: bool,
    /// Print JSON: one object per launch (component, launch, text).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

/// Print the output of a job's components, read over the API (`GET /v1/jobs/ID/output`, so
/// a user on another host with `COALLOC_URL` and `COALLOC_TOKEN` sees it too): every
/// launch, oldest first, with a header each; or, with `--follow`, one launch as it comes.
pub fn logs(args: LogsArgs) -> Result<(), CliError> {
    use std::io::{Read, Write};
    let client = Client::connect(&args.state)?;
    let path = format!("/v1/jobs/{}/output", args.job);
    let stream = if args.err { "stderr" } else { "stdout" };
    if args.follow {
        let component = args.component.unwrap_or(0);
        let query = [
            ("component", component.to_string()),
            ("stream", stream.to_string()),
            ("follow", "true".to_string()),
        ];
        // Right after a submission the component may have no launch yet: wait for one
        // while the job is live.
        let mut body = loop {
            match client.read(&path, &query, true) {
                Ok(body) => break body,
                Err(CliError::BadInput(m)) if m.iter().any(|l| l.contains("no output of job")) => {
                    let state = client.get(&format!("/v1/jobs/{}", args.job))?["state"]
                        .as_str()
                        .unwrap_or("")
                        .to_string();
                    if matches!(state.as_str(), "finished" | "failed") {
                        return Err(CliError::BadInput(m));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        };
        let mut out = std::io::stdout().lock();
        let mut buf = [0u8; 8192];
        loop {
            let n = body
                .read(&mut buf)
                .map_err(|e| CliError::Internal(format!("reading the output: {e}")))?;
            if n == 0 {
                return Ok(());
            }
            out.write_all(&buf[..n])
                .and_then(|()| out.flush())
                .map_err(|e| CliError::Internal(format!("writing the output: {e}")))?;
        }
    }
    let list = client.get(&path)?;
    let launches: Vec<(u64, u64)> = list["launches"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(|l| Some((l["component"].as_u64()?, l["launch"].as_u64()?)))
        .filter(|(c, _)| args.component.is_none_or(|want| want as u64 == *c))
        .collect();
    if launches.is_empty() {
        return Err(CliError::bad(format!("no output of job {} yet", args.job)));
    }
    let text_of = |c: u64, l: u64| -> Result<String, CliError> {
        let query = [
            ("component", c.to_string()),
            ("launch", l.to_string()),
            ("stream", stream.to_string()),
        ];
        let mut bytes = Vec::new();
        client
            .read(&path, &query, false)?
            .read_to_end(&mut bytes)
            .map_err(|e| CliError::Internal(format!("reading the output: {e}")))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    if args.json {
        let mut out = Vec::new();
        for &(c, l) in &launches {
            out.push(json!({ "component": c, "launch": l, "text": text_of(c, l)? }));
        }
        println!("{}", json!({ "job": args.job, "launches": out }));
        return Ok(());
    }
    for (c, l) in launches {
        println!(
            "==> job {} component {c} launch L{l} ({stream}) <==",
            args.job
        );
        let text = text_of(c, l)?;
        print!("{text}");
        if !text.is_empty() && !text.ends_with('\n') {
            println!();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{cancel_target, CancelTarget};

    #[test]
    fn cancel_takes_jobs_and_array_elements() {
        assert_eq!(cancel_target("12").unwrap(), CancelTarget::Job(12));
        assert_eq!(
            cancel_target("12_[3-9]").unwrap(),
            CancelTarget::Elements(12, "3-9".into())
        );
        assert_eq!(
            cancel_target("12_5").unwrap(),
            CancelTarget::Elements(12, "5".into())
        );
        for bad in ["x", "12_", "12_[a]", "_3"] {
            assert!(cancel_target(bad).is_err(), "{bad}");
        }
    }
}
