//! Listing at scale, end to end against a real `coalloc serve`: `GET /v1/jobs` a page at a
//! time with its cursor and filters, and `coalloc status` (active jobs by default, filters,
//! pages streamed).

mod common;

use coalloc_testkit::server::{barrier_component, job, three_clusters, Server};
use common::COALLOC;
use serde_json::{json, Value};

/// A two-component job that would only check in at the barrier.
fn queued_job(user: &str, name: &str) -> Value {
    let mut j = job(vec![
        barrier_component(COALLOC, 1, "", "true"),
        barrier_component(COALLOC, 1, "", "true"),
    ]);
    j["user"] = json!(user);
    j["name"] = json!(name);
    j
}

/// `coalloc status ARGS --json` against this server: the jobs' numbers and states.
fn status(s: &Server, args: &[&str]) -> Vec<(u64, String)> {
    let out = s.cli_ok(&[&["status", "--json"], args].concat());
    let v: Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["id"].as_u64().unwrap(),
                j["state"].as_str().unwrap().into(),
            )
        })
        .collect()
}

#[test]
fn pages_return_every_job_exactly_once_while_jobs_are_submitted() {
    let s = Server::start(COALLOC, "listing-pages", &three_clusters([4, 4, 4], ""));
    s.hold_the_queue();
    let before: Vec<u64> = (0..120)
        .map(|i| s.submit(&queued_job("ann", &format!("a{i}"))))
        .collect();
    assert_eq!(before, (1..=120).collect::<Vec<_>>());
    std::thread::scope(|scope| {
        // Jobs keep coming while the pages are walked.
        let more = scope.spawn(|| {
            (0..120)
                .map(|i| s.submit(&queued_job("bob", &format!("b{i}"))))
                .collect::<Vec<_>>()
        });
        let mut seen = Vec::new();
        let mut after = 0;
        let mut pages = 0;
        loop {
            let page = s.get(&format!("/v1/jobs?limit=7&after={after}"));
            pages += 1;
            let jobs = page["jobs"].as_array().unwrap();
            assert!(jobs.len() <= 7, "{page}");
            seen.extend(jobs.iter().map(|j| j["id"].as_u64().unwrap()));
            match page["next"].as_u64() {
                Some(n) => after = n,
                None => break,
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let more = more.join().unwrap();
        // In number order, each once, and with no hole: every job that existed is there.
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        let last = *seen.last().unwrap();
        assert_eq!(seen, (1..=last).collect::<Vec<_>>());
        assert!(last >= 120, "every job submitted before the walk is listed");
        assert!(pages >= 120 / 7, "{pages} pages");
        assert_eq!(more.len(), 120);
        // What the walk did not reach comes on the pages after its end.
        let rest = s.get(&format!("/v1/jobs?after={last}"));
        let rest: Vec<u64> = rest["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_u64().unwrap())
            .collect();
        assert_eq!(rest, (last + 1..=240).collect::<Vec<_>>());
    });
    // Filters: user and name; a bad state or limit is a 400 with a message.
    let bob = s.get("/v1/jobs?user=bob&limit=1000");
    assert_eq!(bob["jobs"].as_array().unwrap().len(), 120);
    assert!(bob.get("next").is_none(), "{}", bob["next"]);
    let one = s.get("/v1/jobs?name=a7");
    assert_eq!(one["jobs"][0]["id"], 8);
    assert_eq!(one["jobs"].as_array().unwrap().len(), 1);
    let (code, v) = s.call("GET", "/v1/jobs?state=runing", &s.token, None);
    assert_eq!(code, 400);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("unknown state `runing`"),
        "{v}"
    );
    let (code, v) = s.call("GET", "/v1/jobs?limit=0", &s.token, None);
    assert_eq!(code, 400, "{v}");
    let (code, v) = s.call("GET", "/v1/jobs?colour=red", &s.token, None);
    assert_eq!(code, 400, "{v}");
}

#[test]
fn status_shows_the_active_jobs_unless_told_otherwise() {
    let s = Server::start(COALLOC, "listing-status", &three_clusters([4, 4, 4], ""));
    let done = s.submit(&job(vec![barrier_component(COALLOC, 1, "", "true")]));
    s.wait_ended(done, 60);
    s.hold_the_queue();
    let ann = s.submit(&queued_job("ann", "x"));
    let bob = s.submit(&queued_job("bob", "y"));
    let queued = |id: u64| (id, "queued".to_string());
    assert_eq!(status(&s, &[]), vec![queued(ann), queued(bob)]);
    assert_eq!(
        status(&s, &["--state", "finished"]),
        vec![(done, "finished".to_string())]
    );
    assert_eq!(status(&s, &["--state", "all"]).len(), 3);
    assert_eq!(status(&s, &["--user", "bob"]), vec![queued(bob)]);
    assert_eq!(status(&s, &["--state", "running"]), vec![]);
    assert_eq!(
        status(&s, &["--since", "1h", "--name", "x"]),
        vec![queued(ann)]
    );
    // The table: a header, then one line per job.
    let text = s.cli_ok(&["status"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("job  name  user  state"), "{text}");
    assert!(
        lines[1].starts_with(&format!("{ann}    x     ann   queued")),
        "{text}"
    );
}

/// The numbers of a listing page's jobs.
fn ids(page: &Value) -> Vec<u64> {
    page["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_u64().unwrap())
        .collect()
}

#[test]
fn ended_jobs_age_out_into_the_history_and_stay_there_after_a_kill() {
    let config =
        three_clusters([4, 4, 4], "").replace("[server]\n", "[server]\nmin_job_age = \"1s\"\n");
    let mut s = Server::start(COALLOC, "listing-history", &config);
    let mut done = Vec::new();
    for user in ["ann", "bob", "ann"] {
        let mut j = job(vec![barrier_component(COALLOC, 1, "", "true")]);
        j["user"] = json!(user);
        done.push(s.submit(&j));
    }
    for &id in &done {
        s.wait_ended(id, 60);
    }
    s.hold_the_queue();
    let cancelled = s.submit(&queued_job("bob", "c"));
    let (code, v) = s.call("DELETE", &format!("/v1/jobs/{cancelled}"), &s.token, None);
    assert_eq!(code, 200, "{v}");
    let waiting = s.submit(&queued_job("ann", "w"));
    // Within a few seconds every ended job has left memory; the queued one stays.
    let t = std::time::Instant::now();
    while ids(&s.get("/v1/jobs?state=all")) != vec![waiting] {
        assert!(
            t.elapsed().as_secs() < 20,
            "{}",
            s.get("/v1/jobs?state=all")
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let check = |s: &Server| {
        let h = s.get("/v1/history");
        assert_eq!(ids(&h), vec![1, 2, 3, cancelled], "{h}");
        let states: Vec<&str> = h["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["state"].as_str().unwrap())
            .collect();
        assert_eq!(states, ["finished", "finished", "finished", "failed"]);
        assert_eq!(ids(&s.get("/v1/history?user=ann")), vec![1, 3]);
        assert_eq!(ids(&s.get("/v1/history?state=failed")), vec![cancelled]);
        assert_eq!(ids(&s.get("/v1/history?state=queued")), Vec::<u64>::new());
        let page = s.get("/v1/history?limit=2&after=1");
        assert_eq!(ids(&page), vec![2, 3]);
        assert_eq!(page["next"], 3);
        // One job, from the history: its full view.
        let one = s.job(2);
        assert_eq!(one["state"], "finished");
        assert_eq!(one["user"], "bob");
        assert_eq!(one["components"][0]["executable"], "/bin/sh");
        assert_eq!(s.job(cancelled)["last_abort"], "cancelled");
        // The command line.
        let v: Value =
            serde_json::from_str(&s.cli_ok(&["history", "--json", "--user", "bob"])).unwrap();
        let got: Vec<u64> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_u64().unwrap())
            .collect();
        assert_eq!(got, vec![2, cancelled]);
    };
    check(&s);
    // A restart replays the forgetting: the aged jobs stay out of memory and in the history.
    s.kill_and_restart();
    assert_eq!(ids(&s.get("/v1/jobs?state=all")), vec![waiting]);
    check(&s);
    assert_eq!(s.submit(&queued_job("ann", "after")), waiting + 1);
}

#[test]
fn a_batch_submits_many_jobs_in_one_request() {
    let s = Server::start(COALLOC, "listing-batch", &three_clusters([4, 4, 4], ""));
    s.hold_the_queue();
    let mut jobs: Vec<Value> = (0..50)
        .map(|i| queued_job("ann", &format!("j{i}")))
        .collect();
    // A job no site can hold is refused by the scheduler; the others go in.
    jobs.insert(
        3,
        json!({"kind": "total", "component": [{"count": 40, "executable": "/bin/true"}]}),
    );
    let body = json!({ "jobs": jobs }).to_string();
    let (code, v) = s.call("POST", "/v1/jobs/batch", &s.token, Some(&body));
    assert_eq!(code, 201, "{v}");
    let got: Vec<Option<u64>> = serde_json::from_value(v["jobs"].clone()).unwrap();
    let mut want: Vec<Option<u64>> = (1..=50).map(Some).collect();
    want.insert(3, None);
    assert_eq!(got, want);
    assert_eq!(v["errors"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["errors"][0]["index"], 3);
    assert_eq!(
        ids(&s.get("/v1/jobs?limit=100")),
        (1..=50).collect::<Vec<_>>()
    );
    // A job that does not parse refuses the whole batch, and names it.
    let bad = json!({ "jobs": [queued_job("a", "x"), {"kind": "sideways"}] }).to_string();
    let (code, v) = s.call("POST", "/v1/jobs/batch", &s.token, Some(&bad));
    assert_eq!(code, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap().starts_with("batch: job 1: "),
        "{v}"
    );
    assert_eq!(ids(&s.get("/v1/jobs?after=50")), Vec::<u64>::new());
}

/// Every job numbered 1..=n, each once: in memory (`/v1/jobs`) or in the history.
fn each_job_once(s: &Server, n: u64) {
    let mut all = Vec::new();
    for path in ["/v1/jobs?state=all", "/v1/history?state=all"] {
        let mut after = 0;
        loop {
            let page = s.get(&format!("{path}&limit=10000&after={after}"));
            all.extend(ids(&page));
            match page["next"].as_u64() {
                Some(next) => after = next,
                None => break,
            }
        }
    }
    all.sort_unstable();
    assert_eq!(all, (1..=n).collect::<Vec<_>>());
}

#[test]
fn a_kill_while_ended_jobs_move_to_the_history_loses_nothing() {
    let config =
        three_clusters([4, 4, 4], "").replace("[server]\n", "[server]\nmin_job_age = \"1s\"\n");
    let mut s = Server::start(COALLOC, "listing-kill-aging", &config);
    s.hold_the_queue();
    let spec = queued_job("ann", "a").to_string();
    let (code, v) = s.call("POST", "/v1/jobs?array=0-6999", &s.token, Some(&spec));
    assert_eq!(code, 201, "{v}");
    let (code, v) = s.call("DELETE", "/v1/arrays/1", &s.token, None);
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["cancelled"].as_array().unwrap().len(), 7_000);
    // Kill the server again and again while the 7,000 ended jobs move to the history
    // (5,000 a transaction), each time at another moment.
    for delay in [950, 1_050, 1_200, 1_400] {
        std::thread::sleep(std::time::Duration::from_millis(delay));
        s.kill_and_restart();
        each_job_once(&s, 7_000);
    }
    let t = std::time::Instant::now();
    while !ids(&s.get("/v1/jobs?state=all&limit=1")).is_empty() {
        assert!(t.elapsed().as_secs() < 60);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    each_job_once(&s, 7_000);
}
