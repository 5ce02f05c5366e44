//! The server at scale (issue 23), run by `bench/scale.sh`:
//!
//! 1. a queue of N two-component jobs behind unusable sites: durable submissions per second
//!    (one job per request from 16 keep-alive threads, then `POST /v1/jobs/batch` of 1,000
//!    jobs from 4 threads), the server's RSS per queued job, `coalloc status` (every active
//!    job, printed page by page) and `coalloc status --state running`, the RSS after them,
//!    the journal's size, and the time to restart after SIGKILL with the RSS after it;
//! 2. M jobs that end (cancelled while queued: no processes) and age out after
//!    `min_job_age = "1s"`: RSS before, with them queued and after they left, and
//!    `coalloc history` finding them.
//!
//! Usage: scale_bench COALLOC_BINARY [--jobs N] [--single N] [--aged M] [--snapshot-every E]
//! [--postgres URL] (`server.snapshot_every` of part 1; the server's default, 25,000, if not
//! given). With `--postgres URL` (issue 32), the journal, snapshots and history are in
//! PostgreSQL: the cluster at `URL` (`postgres://coalloc@127.0.0.1:PORT`, a role that may
//! create databases; `bash bench/scale.sh --postgres` starts a throwaway one with
//! bench/pgcluster.sh), a new database for each part (`queue`, `aged`); the journal's size
//! is then its table's. `psql` is Debian's (coalloc_testkit::postgres::binaries).
//! `--lease D` sets `server.lease` (PostgreSQL only; the server's default is 3 s, and on a
//! loaded machine a leader whose renewals wait behind its own long transactions may stop
//! itself: "lease lost: no renewal for 3s").

#[path = "shared/args.rs"]
mod args;

use args::arg;
use coalloc_testkit::postgres::binaries;
use coalloc_testkit::server::Server;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CONFIG: &str = "[server]\nmonitor_interval = \"200ms\"\nmin_job_age = \"1s\"\n\
    [[site]]\nname = \"alpha\"\nprocessors = 16\n[[site]]\nname = \"beta\"\nprocessors = 16\n\
    [[site]]\nname = \"gamma\"\nprocessors = 16\n[scheduler]\npolicy = \"fcfs\"\nfit = \"worst\"\n";

fn rss_kib(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn hold(s: &Server) {
    for site in ["alpha", "beta", "gamma"] {
        s.api(
            "PUT",
            &format!("/v1/sites/{site}/usable"),
            Some("{\"usable\": false}"),
        );
    }
}

fn job(i: usize) -> Value {
    json!({"name": format!("j{i}"), "user": "bench", "kind": "unordered", "component": [
        {"count": 1, "executable": "/bin/true"}, {"count": 1, "executable": "/bin/true"}]})
}

/// Submit jobs `from..to`: one per request from 16 threads, or batches of 1,000 from 4.
fn submit(s: &Server, from: usize, to: usize, batch: bool) -> f64 {
    let threads = if batch { 4 } else { 16 };
    let t = Instant::now();
    std::thread::scope(|sc| {
        for k in 0..threads {
            sc.spawn(move || {
                if batch {
                    let starts: Vec<usize> = (from..to).step_by(1000).collect();
                    for &b in starts.iter().skip(k).step_by(threads) {
                        let jobs: Vec<Value> = (b..(b + 1000).min(to)).map(job).collect();
                        let v = s.api(
                            "POST",
                            "/v1/jobs/batch",
                            Some(&json!({"jobs": jobs}).to_string()),
                        );
                        assert_eq!(v["errors"], json!([]), "{v}");
                    }
                } else {
                    for i in (from + k..to).step_by(threads) {
                        let v = s.api("POST", "/v1/jobs", Some(&job(i).to_string()));
                        assert!(v["job"].as_u64().is_some(), "{v}");
                    }
                }
            });
        }
    });
    (to - from) as f64 / t.elapsed().as_secs_f64()
}

/// Run `coalloc ARGS --state-dir S` with its output to /dev/null: seconds, and the number of
/// output lines when counted.
fn timed(coalloc: &str, state: &Path, args: &[&str]) -> (f64, usize) {
    let t = Instant::now();
    let out = Command::new(coalloc)
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert!(out.status.success(), "coalloc {args:?} failed");
    (secs, out.stdout.iter().filter(|&&b| b == b'\n').count())
}

fn file_size(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

/// Run SQL on database `db` of the cluster at `url` with `psql`: what it printed.
fn psql(url: &str, db: &str, sql: &str) -> String {
    let bin = binaries().expect("--postgres: PostgreSQL's binaries (apt-get install postgresql)");
    let out = Command::new(bin.join("psql"))
        .arg(format!("{url}/{db}"))
        .args(["-AtX", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .unwrap();
    assert!(out.status.success(), "psql {sql}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let coalloc = args
        .get(1)
        .expect("usage: scale_bench COALLOC_BINARY [--jobs N] [--single N] [--aged M]")
        .clone();
    let n = arg(&args, "--jobs", 1_000_000);
    let single = arg(&args, "--single", 100_000).min(n);
    let aged = arg(&args, "--aged", 100_000);
    let every = arg(&args, "--snapshot-every", 25_000);
    let after = |name: &str| {
        args.iter().position(|a| a == name).map(|i| {
            args.get(i + 1)
                .unwrap_or_else(|| panic!("{name} VALUE"))
                .clone()
        })
    };
    let pg = after("--postgres");
    let lease = after("--lease").map_or(String::new(), |d| format!("lease = \"{d}\"\n"));
    // The configuration of a part: with a new database of its own when on PostgreSQL.
    let config = |part: &str, extra: &str| {
        let journal = pg.as_ref().map_or(String::new(), |url| {
            psql(url, "postgres", &format!("CREATE DATABASE {part}"));
            format!("journal = \"{url}/{part}\"\n{lease}")
        });
        CONFIG.replace("[server]\n", &format!("[server]\n{journal}{extra}"))
    };
    let queue_config = config("queue", &format!("snapshot_every = {every}\n"));
    let base = std::env::temp_dir().join(format!("coalloc-scale-{}", std::process::id()));

    // 1. The queue.
    let mut s = Server::start_in(&coalloc, &base.join("queue"), &queue_config);
    hold(&s);
    std::thread::sleep(Duration::from_millis(500));
    let empty = rss_kib(s.pid().unwrap());
    let one = submit(&s, 0, single, false);
    let many = submit(&s, single, n, true);
    std::thread::sleep(Duration::from_millis(500));
    let queued = rss_kib(s.pid().unwrap());
    let on = if pg.is_some() { "PostgreSQL" } else { "SQLite" };
    println!("queue of {n} two-component jobs behind unusable sites (snapshot_every = {every}; journal on {on}{})",
        if pg.is_some() { format!(", {}", if lease.is_empty() { "lease 3 s" } else { lease.trim() }) } else { String::new() });
    println!(
        "- durable submissions, one job per request (16 threads, {single} jobs): {one:.0} jobs/s"
    );
    println!("- durable submissions, POST /v1/jobs/batch of 1,000 (4 threads, {} jobs): {many:.0} jobs/s", n - single);
    println!(
        "- server RSS: empty {}, with the queue {} = {:.0} B per queued job",
        mib(empty),
        mib(queued),
        (queued - empty) as f64 * 1024.0 / n as f64
    );
    let (t_all, lines) = timed(&coalloc, &s.dir, &["status"]);
    println!("- `coalloc status` (active jobs, table): {t_all:.2} s, {lines} lines");
    let (t_json, _) = timed(&coalloc, &s.dir, &["status", "--json"]);
    println!("- `coalloc status --json`: {t_json:.2} s");
    let (t_run, lines) = timed(&coalloc, &s.dir, &["status", "--state", "running"]);
    println!("- `coalloc status --state running`: {t_run:.3} s, {lines} lines");
    let listed = rss_kib(s.pid().unwrap());
    println!(
        "- server RSS after those listings: {} = {:.0} B per queued job",
        mib(listed),
        (listed - empty) as f64 * 1024.0 / n as f64
    );
    let sql = |q: &str| pg.as_ref().map(|url| psql(url, "queue", q));
    let journal = match sql("SELECT pg_total_relation_size('journal')") {
        Some(bytes) => bytes.parse().unwrap_or(0),
        None => {
            file_size(&s.dir.join("journal.sqlite")) + file_size(&s.dir.join("journal.sqlite-wal"))
        }
    };
    println!(
        "- journal: {} ({:.0} B per job)",
        mib(journal / 1024),
        journal as f64 / n as f64
    );
    // What a restart will read: the last snapshot (`snapshot.bin`, written every
    // `snapshot_every` entries) and the journal's entries after it.
    let (rows, snapshot): (i64, u64) = match (
        sql("SELECT count(*) FROM journal"),
        sql("SELECT coalesce(sum(length(bytes)), 0) FROM snapshot"),
    ) {
        (Some(rows), Some(bytes)) => (rows.parse().unwrap_or(-1), bytes.parse().unwrap_or(0)),
        _ => (
            rusqlite::Connection::open(s.dir.join("journal.sqlite"))
                .and_then(|c| c.query_row("SELECT count(*) FROM journal", [], |r| r.get(0)))
                .unwrap_or(-1),
            file_size(&s.dir.join("snapshot.bin")),
        ),
    };
    println!(
        "- at the kill: snapshot {}, journal entries kept {rows}",
        mib(snapshot / 1024),
    );
    // SIGKILL, then restart on the same directory: until the API answers.
    s.kill();
    let t = Instant::now();
    let s2 = Server::restart_in(&coalloc, &base.join("queue"));
    let restart = t.elapsed().as_secs_f64();
    let page = s2.api("GET", "/v1/jobs?after=999999&limit=10", None);
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kib(s2.pid().unwrap());
    println!(
        "- restart after SIGKILL until the API answers: {restart:.2} s; RSS then {} = {:.0} B per queued job (page after job 999999: {} jobs)",
        mib(after),
        (after - empty) as f64 * 1024.0 / n as f64,
        page["jobs"].as_array().map_or(0, Vec::len)
    );
    drop(s2);
    drop(s);
    let _ = std::fs::remove_dir_all(base.join("queue"));

    // 2. Jobs that end and age out.
    let s = Server::start_in(&coalloc, &base.join("aged"), &config("aged", ""));
    hold(&s);
    std::thread::sleep(Duration::from_millis(500));
    let empty = rss_kib(s.pid().unwrap());
    submit(&s, 0, aged, true);
    std::thread::sleep(Duration::from_millis(500));
    let full = rss_kib(s.pid().unwrap());
    let t = Instant::now();
    std::thread::scope(|sc| {
        for k in 0..16 {
            let s = &s;
            sc.spawn(move || {
                for id in (1 + k..=aged).step_by(16) {
                    s.api("DELETE", &format!("/v1/jobs/{id}"), None);
                }
            });
        }
    });
    let cancelled = t.elapsed().as_secs_f64();
    let t = Instant::now();
    while s.api("GET", "/v1/jobs?state=all&limit=1", None)["jobs"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
    {
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "the jobs never left memory"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let gone = t.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kib(s.pid().unwrap());
    let (t_hist, lines) = timed(&coalloc, &s.dir, &["history"]);
    let (t_user, _) = timed(
        &coalloc,
        &s.dir,
        &[
            "history", "--user", "bench", "--state", "failed", "--since", "1h",
        ],
    );
    println!("\n{aged} jobs ended (cancelled while queued) and aged out (min_job_age = 1s)");
    println!(
        "- server RSS: empty {}, with the jobs queued {}, after they left memory {}",
        mib(empty),
        mib(full),
        mib(after)
    );
    println!("- cancelling them: {cancelled:.1} s (16 threads); all out of memory {gone:.1} s after the last cancel");
    println!("- `coalloc history`: {t_hist:.2} s, {lines} lines; with --user --state --since: {t_user:.2} s");
    drop(s);
    let _ = std::fs::remove_dir_all(&base);
}
