//! Input files that really move (seed 000 §2.3–2.6), end to end with real processes: a
//! replica registered with `coalloc file register`, Close-to-Files placing a component that
//! cannot run next to it, the file pulled to the component's site and checked (BLAKE3)
//! before the barrier releases, and a replica whose checksum is wrong failing its transfer
//! as an error of the file's site.

mod common;

use coalloc_testkit::server::{barrier_component, site, three_clusters, wait_site, Server};
use common::{coalloc, stdout, COALLOC};
use serde_json::{json, Value};

/// alpha holds the file but has only 4 processors; beta is 10× closer to it than gamma.
fn config() -> String {
    three_clusters(
        [4, 8, 8],
        "policy = \"fcfs\"\nfit = \"ctf\"\nclaiming = \"icp\"",
    )
    .replace(
        "name = \"alpha\"\nprocessors = 4\n",
        "name = \"alpha\"\nprocessors = 4\nbandwidth = { beta = \"100MB\", gamma = \"10MB\" }\n",
    )
}

fn job_with_file(file: &str, size: u64, then: &str) -> Value {
    json!({
        "kind": "unordered", "max_wall_time": "2m",
        "input_file": {"name": file, "size": size, "distribution": "whole"},
        "component": [barrier_component(COALLOC, 8, "", then)],
    })
}

/// 600 MB of zeros (sparse, so cheap to make; big enough to be caught half-way), registered
/// as `big.dat` on alpha: its path and size.
fn big_file_on_alpha(s: &Server) -> (std::path::PathBuf, u64) {
    let src = s.dir.parent().unwrap().join("big.dat");
    let size: u64 = 600 << 20;
    std::fs::File::create(&src).unwrap().set_len(size).unwrap();
    let (state, src_s) = (s.dir.to_string_lossy(), src.to_string_lossy());
    stdout(&coalloc(&[
        "file",
        "register",
        "alpha",
        "big.dat",
        &src_s,
        "--state-dir",
        &state,
    ]));
    (src, size)
}

fn files(s: &Server, name: &str) -> Vec<Value> {
    let state = s.dir.to_string_lossy().to_string();
    let out = stdout(&coalloc(&[
        "file",
        "ls",
        name,
        "--json",
        "--state-dir",
        &state,
    ]));
    serde_json::from_str::<Value>(&out).unwrap()["files"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn a_registered_file_is_pulled_to_the_close_site_checked_and_given_to_the_component() {
    let s = Server::start(COALLOC, "transfer-ok", &config());
    let src = s.dir.parent().unwrap().join("grid.dat");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let state = s.dir.to_string_lossy().to_string();
    let src_s = src.to_string_lossy().to_string();
    let out = stdout(&coalloc(&[
        "file",
        "register",
        "alpha",
        "grid.dat",
        &src_s,
        "--state-dir",
        &state,
    ]));
    assert!(
        out.contains("grid.dat") && out.contains("registered"),
        "{out}"
    );
    // After the barrier, the component checks that the file it is given is the replica's
    // bytes.
    let check =
        format!("cmp -s \"$COALLOC_INPUT_FILE\" '{src_s}' && echo same-bytes-at-$COALLOC_SITE");
    // The event stream, from before the submission (job 1 is the first).
    let mut events = std::process::Command::new(common::COALLOC)
        .args(["events", "--json", "--job", "1", "--state-dir", &state])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let id = s.submit(&job_with_file("grid.dat", data.len() as u64, &check));
    assert_eq!(id, 1);
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    events.kill().unwrap();
    let out = events.wait_with_output().unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = lines.iter().filter_map(|e| e["event"].as_str()).collect();
    for k in [
        "transfer_started",
        "transfer_progress",
        "transfer_done",
        "committed",
    ] {
        assert!(kinds.contains(&k), "{kinds:?}");
    }
    // The transfer ends before the barrier releases.
    let at = |k: &str| kinds.iter().position(|x| *x == k).unwrap();
    assert!(at("transfer_done") < at("committed"), "{kinds:?}");
    for e in &lines {
        serde_json::from_value::<coalloc_server::views::StreamEvent>(e.clone())
            .unwrap_or_else(|err| panic!("{e}: {err}"));
    }
    let done = lines
        .iter()
        .find(|e| e["event"] == "transfer_done")
        .unwrap();
    assert_eq!(
        (done["file"].as_str(), done["bytes"].as_u64()),
        (Some("grid.dat"), Some(data.len() as u64))
    );
    assert_eq!(s.output(id, 0).trim(), "same-bytes-at-beta");
    let replicas = files(&s, "grid.dat");
    let summary: Vec<(String, String, u64)> = replicas
        .iter()
        .map(|r| {
            (
                r["site"].as_str().unwrap().into(),
                r["origin"].as_str().unwrap().into(),
                r["size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("alpha".into(), "registered".into(), 3_000_000),
            ("beta".into(), "cached".into(), 3_000_000)
        ]
    );
    assert_eq!(replicas[0]["blake3"], replicas[1]["blake3"]);
    let cached = replicas[1]["path"].as_str().unwrap();
    assert_eq!(std::fs::read(cached).unwrap(), data);
    // The bandwidth model measured alpha -> beta: `coalloc sites` shows it beside the
    // configured 100 MB/s.
    let bw = &site(&s, "alpha")["bandwidth"];
    let beta = bw
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["to"] == "beta")
        .unwrap();
    assert_eq!(beta["configured"], 100_000_000);
    assert!(beta["measured"].as_u64().unwrap() > 0, "{bw}");
    let table = stdout(&coalloc(&["sites", "--state-dir", &state]));
    assert!(table.contains("measured MB/s"), "{table}");
    // Removing a replica from the catalog: only the one named.
    let rm = stdout(&coalloc(&[
        "file",
        "rm",
        "grid.dat",
        "--site",
        "beta",
        "--json",
        "--state-dir",
        &state,
    ]));
    assert!(rm.contains("\"beta\""), "{rm}");
    assert_eq!(files(&s, "grid.dat").len(), 1);
}

#[test]
fn a_replica_with_a_wrong_checksum_fails_its_transfer_as_the_file_sites_error() {
    let s = Server::start(COALLOC, "transfer-bad", &config());
    let src = s.dir.parent().unwrap().join("bad.dat");
    std::fs::write(&src, b"these are not the bytes registered").unwrap();
    let wrong = blake3_of(b"other bytes");
    let body =
        json!({"site": "alpha", "name": "bad.dat", "path": src, "size": 34, "blake3": wrong});
    let (code, v) = s.call("POST", "/v1/files", &s.token, Some(&body.to_string()));
    assert_eq!(code, 200, "{v}");
    // Bad input over the API: clear 4xx answers.
    let (code, v) = s.call(
        "POST",
        "/v1/files",
        &s.token,
        Some(r#"{"site":"nowhere","name":"x","path":"/x"}"#),
    );
    assert_eq!(
        (code, v["error"].as_str().unwrap()),
        (404, "no site `nowhere`")
    );
    let (code, v) = s.call(
        "POST",
        "/v1/files",
        &s.token,
        Some(r#"{"site":"alpha","name":"x","path":"/does/not/exist"}"#),
    );
    assert_eq!(code, 400, "{v}");
    let (code, _) = s.call("DELETE", "/v1/files/none", &s.token, None);
    assert_eq!(code, 404);
    let id = s.submit(&job_with_file("bad.dat", 34, ""));
    // The transfer fails at its checksum: the file's site (alpha) counts the error, not
    // beta, where the component was to run; nothing is cached at beta.
    wait_site(&s, "alpha", 30, "charged with the failed transfer", |v| {
        v["submit_errors"].as_u64().unwrap_or(0) >= 1
    });
    assert_eq!(site(&s, "beta")["submit_errors"], 0);
    assert_eq!(files(&s, "bad.dat").len(), 1, "no cached replica");
    let j = s.job(id);
    assert_ne!(j["state"], "finished", "{j}");
    assert!(s.log().contains("checksum mismatch"), "{}", s.log());
}

/// BLAKE3 (hex) through the server crate's own helper.
fn blake3_of(data: &[u8]) -> String {
    let p = std::env::temp_dir().join(format!("coalloc-b3-{}", std::process::id()));
    std::fs::write(&p, data).unwrap();
    let s = coalloc_server::transfer::stat(&p).unwrap().blake3;
    let _ = std::fs::remove_file(p);
    s
}

#[test]
fn rsl_site_variables_are_expanded_where_the_component_lands() {
    let s = Server::start(
        COALLOC,
        "site-vars",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let state = s.dir.to_string_lossy().to_string();
    let rsl = s.dir.parent().unwrap().join("vars.uno");
    let scratch = s.dir.parent().unwrap().join("my-scratch");
    std::fs::write(
        &rsl,
        format!(
            "& (executable = /bin/sh) (count = 1) (barrier = auto) (scratch_dir = {})\n  \
             (arguments = \"-c\" \"echo $1 $2; [ -d $3 ] && echo scratch-made; case $3 in $4/*) echo under-scratch-dir;; esac\" x $(LOGNAME) $(HOME) $(SCRATCH_DIRECTORY) {})\n",
            scratch.display(),
            scratch.display()
        ),
    )
    .unwrap();
    // `job check` no longer refuses them as undefined.
    let rsl_s = rsl.to_string_lossy().to_string();
    stdout(&coalloc(&["job", "check", &rsl_s]));
    let out = stdout(&coalloc(&["submit", &rsl_s, "--state-dir", &state]));
    let id: u64 = out
        .split(|c: char| !c.is_ascii_digit())
        .find(|w| !w.is_empty())
        .unwrap()
        .parse()
        .unwrap();
    let j = s.wait_ended(id, 30);
    assert_eq!(j["state"], "finished", "{j}");
    let who = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    let user = std::env::var("LOGNAME")
        .or_else(|_| std::env::var("USER"))
        .unwrap_or_else(|_| String::from_utf8_lossy(&who.stdout).trim().to_string());
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(
        s.output(id, 0).trim(),
        format!("{user} {home}\nscratch-made\nunder-scratch-dir")
    );
}

#[test]
fn a_stage_in_whose_source_is_missing_fails_the_start_with_its_reason() {
    let s = Server::start(
        COALLOC,
        "stage-missing",
        &three_clusters([4, 4, 4], "policy = \"fcfs\""),
    );
    let comp = json!({
        "count": 1, "job_type": "single", "executable": "/bin/true",
        "attribute": [
            {"name": "file_stage_in", "op": "=", "value": [["/nonexistent/input.dat", "input.dat"]]},
            {"name": "barrier", "op": "=", "value": "auto"},
        ],
    });
    let id = s.submit(&json!({"kind": "unordered", "component": [comp]}));
    let j = s.wait_for(id, 30, "aborted for its stage-in", |j| {
        j["last_abort"]
            .as_str()
            .is_some_and(|r| r.contains("file_stage_in: /nonexistent/input.dat"))
    });
    assert_ne!(j["state"], "finished", "{j}");
    // A destination that leaves the working directory is refused too.
    let comp = json!({
        "count": 1, "job_type": "single", "executable": "/bin/true",
        "attribute": [{"name": "file_stage_out", "op": "=", "value": [["a", "../../escape"]]}],
    });
    let id = s.submit(&json!({"kind": "unordered", "component": [comp]}));
    s.wait_for(id, 30, "refused its stage-out", |j| {
        j["last_abort"]
            .as_str()
            .is_some_and(|r| r.contains("must be a relative path inside"))
    });
}

#[test]
fn kill_9_of_the_server_mid_transfer_resumes_from_the_part_file_after_restart() {
    let mut s = Server::start(COALLOC, "transfer-restart", &config());
    let (src, size) = big_file_on_alpha(&s);
    let id = s.submit(&job_with_file("big.dat", size, "true"));
    let part = s.dir.join("files/beta/big.dat.part");
    // The whole copy takes about 300 ms here, and the API's progress comes every 250 ms, so
    // asking the API each 50 ms misses the middle about one time in four. The part file on
    // disk is what a restart resumes from: watch it each millisecond, and kill the server as
    // soon as it holds some bytes but fewer than three quarters.
    let t = std::time::Instant::now();
    loop {
        let have = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        if have > 0 && have < size * 3 / 4 {
            break;
        }
        assert!(
            have < size * 3 / 4 && t.elapsed() < std::time::Duration::from_secs(60),
            "job {id}: the part file was not seen part-way ({have} of {size} bytes): {}",
            s.job(id)
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    s.kill();
    let cut = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
    assert!(cut > 0 && cut < size, "part file of {cut} bytes");
    s.restart();
    let j = s.wait_ended(id, 120);
    assert_eq!(j["state"], "finished", "{j}");
    // Only what was missing moved again: the measured transfer is the rest.
    let journal = rusqlite::Connection::open(s.dir.join("journal.sqlite")).unwrap();
    let measured: Vec<String> = journal
        .prepare(r#"SELECT entry FROM journal WHERE entry LIKE '%"e":"transfer_measured"%'"#)
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(measured.len(), 1, "{measured:?}");
    let m: Value = serde_json::from_str(&measured[0]).unwrap();
    assert!(
        m["bytes"].as_u64().unwrap() <= size - cut,
        "{m} after a cut at {cut}"
    );
    let replicas = files(&s, "big.dat");
    assert_eq!(replicas.len(), 2, "{replicas:?}");
    assert_eq!(replicas[0]["blake3"], replicas[1]["blake3"]);
    let copy = s.dir.join("files/beta/big.dat");
    assert_eq!(std::fs::metadata(&copy).unwrap().len(), size);
    // The copy is not sparse: give the disk back.
    let _ = std::fs::remove_file(copy);
    let _ = std::fs::remove_file(&src);
}

#[test]
fn a_transfer_past_its_timeout_fails_as_the_file_sites_error() {
    let cfg = config().replace("[server]\n", "[server]\ntransfer_timeout = \"300ms\"\n");
    let s = Server::start(COALLOC, "transfer-timeout", &cfg);
    let (src, size) = big_file_on_alpha(&s);
    s.submit(&job_with_file("big.dat", size, "true"));
    wait_site(
        &s,
        "alpha",
        30,
        "charged with the timed-out transfer",
        |v| v["submit_errors"].as_u64().unwrap_or(0) >= 1,
    );
    assert_eq!(site(&s, "beta")["submit_errors"], 0);
    assert!(s.log().contains("timed out"), "{}", s.log());
    let _ = std::fs::remove_dir_all(s.dir.join("files"));
    let _ = std::fs::remove_file(&src);
}

#[test]
fn cached_replicas_beyond_the_sites_cache_limit_are_evicted_least_recently_used_first() {
    let cfg = config().replace("[server]\n", "[server]\ncache_limit = \"5MB\"\n");
    let s = Server::start(COALLOC, "transfer-evict", &cfg);
    let state = s.dir.to_string_lossy().to_string();
    let mut paths = Vec::new();
    for (name, byte) in [("one.dat", 1u8), ("two.dat", 2u8)] {
        let p = s.dir.parent().unwrap().join(name);
        std::fs::write(&p, vec![byte; 3_000_000]).unwrap();
        let ps = p.to_string_lossy().to_string();
        stdout(&coalloc(&[
            "file",
            "register",
            "alpha",
            name,
            &ps,
            "--state-dir",
            &state,
        ]));
        let id = s.submit(&job_with_file(name, 3_000_000, "true"));
        assert_eq!(s.wait_ended(id, 60)["state"], "finished");
        paths.push(s.dir.join("files/beta").join(name));
    }
    // 3 MB + 3 MB > 5 MB: one.dat (older, its job over) made room for two.dat.
    let on_beta = |name: &str| files(&s, name).iter().any(|r| r["site"] == "beta");
    assert_eq!((on_beta("one.dat"), on_beta("two.dat")), (false, true));
    let t = std::time::Instant::now();
    while paths[0].exists() {
        assert!(t.elapsed().as_secs() < 10, "one.dat's cached copy stays");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(paths[1].exists());
}

#[test]
fn two_components_on_one_site_share_one_transfer_of_their_file() {
    // alpha holds the file and has 2 processors; both components of 8 go to beta (16), the
    // closest site with room.
    let config = three_clusters(
        [2, 16, 4],
        "policy = \"fcfs\"\nfit = \"ctf\"\nclaiming = \"icp\"",
    )
    .replace(
        "name = \"alpha\"\nprocessors = 2\n",
        "name = \"alpha\"\nprocessors = 2\nbandwidth = { beta = \"100MB\", gamma = \"10MB\" }\n",
    );
    let s = Server::start(COALLOC, "transfer-shared", &config);
    let src = s.dir.parent().unwrap().join("grid.dat");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 239) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let (state, src_s) = (
        s.dir.to_string_lossy().to_string(),
        src.to_string_lossy().to_string(),
    );
    stdout(&coalloc(&[
        "file",
        "register",
        "alpha",
        "grid.dat",
        &src_s,
        "--state-dir",
        &state,
    ]));
    let check = format!("cmp -s \"$COALLOC_INPUT_FILE\" '{src_s}' && echo same-at-$COALLOC_SITE");
    let mut events = std::process::Command::new(common::COALLOC)
        .args(["events", "--json", "--job", "1", "--state-dir", &state])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let id = s.submit(&json!({
        "kind": "unordered", "max_wall_time": "2m",
        "input_file": {"name": "grid.dat", "size": data.len(), "distribution": "whole"},
        "component": [barrier_component(COALLOC, 8, "", &check), barrier_component(COALLOC, 8, "", &check)],
    }));
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}\n{}", s.log());
    std::thread::sleep(std::time::Duration::from_millis(300));
    events.kill().unwrap();
    let out = events.wait_with_output().unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |k: &str| -> Vec<&Value> { lines.iter().filter(|e| e["event"] == k).collect() };
    assert_eq!(of("transfer_started").len(), 2, "{lines:?}");
    assert!(of("transfer_failed").is_empty(), "{lines:?}");
    // One moved the bytes; the other waited for it.
    let mut moved: Vec<u64> = of("transfer_done")
        .iter()
        .map(|e| e["moved"].as_u64().unwrap())
        .collect();
    moved.sort();
    assert_eq!(moved, [0, data.len() as u64]);
    assert_eq!(s.output(id, 0).trim(), "same-at-beta");
    assert_eq!(s.output(id, 1).trim(), "same-at-beta");
}

#[test]
fn a_launch_adopted_after_kill_9_of_the_server_still_stages_its_outputs_out() {
    let mut s = Server::start(COALLOC, "stage-restart", &config());
    let gate = s.dir.parent().unwrap().join("go");
    // It runs in its scratch folder, waits for the gate, then writes its output.
    let comp = json!({
        "count": 2, "job_type": "single", "executable": "/bin/sh",
        "arguments": ["-c", format!(
            "\"$COALLOC\" barrier || exit 1; while [ ! -e {} ]; do sleep 0.05; done; echo made-after-restart > result.txt",
            gate.display())],
        "environment": { "COALLOC": common::COALLOC },
        "attribute": [{"name": "file_stage_out", "op": "=", "value": [["result.txt", "res/result.txt"]]}],
    });
    let id = s.submit(&json!({"kind": "unordered", "max_wall_time": "2m", "component": [comp]}));
    s.wait_for(id, 30, "running", |j| j["state"] == "running");
    s.kill_and_restart();
    s.wait_for(id, 30, "adopted", |j| j["state"] == "running");
    std::fs::write(&gate, "").unwrap();
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}\n{}", s.log());
    let out = s
        .dir
        .join("output")
        .join(id.to_string())
        .join("res/result.txt");
    let t = std::time::Instant::now();
    while !out.exists() {
        assert!(
            t.elapsed().as_secs() < 20,
            "nothing staged out:\n{}",
            s.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(
        std::fs::read_to_string(out).unwrap(),
        "made-after-restart\n"
    );
}
