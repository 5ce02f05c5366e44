//! Trace replay on the shipped KTH-SP2 trace: FCFS job by job against an independent FCFS,
//! and EASY schedules that are valid, deterministic and better than FCFS.

use coalloc_core::model::Site;
use coalloc_core::scheduler::{QueueConfig, SchedulerConfig};
use coalloc_sim::replay::{
    read_trace_jobs, replay, replay_file, trace_jobs, FileReplayError, Replay, TraceJob,
};
use coalloc_sim::swf;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;

const PROCESSORS: u32 = 100;

fn kth(first: Option<usize>) -> Vec<TraceJob> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/KTH-SP2-1996-2.1-cln.swf.gz");
    let filter = swf::Filter {
        first,
        ..swf::Filter::default()
    };
    let trace = swf::read(path, &filter).unwrap();
    trace
        .jobs
        .iter()
        .map(|j| TraceJob {
            number: j.job_number,
            submit: j.submit_time,
            runtime: j.run_time().unwrap(),
            requested: j.requested_time_or_run_time().unwrap(),
            processors: j.processors().unwrap() as u32,
            user: j.user_id(),
        })
        .collect()
}

/// The replay's own reader (`read_trace_jobs`, which never holds the whole SWF jobs) reads
/// the same jobs as the whole trace does, with and without a filter.
#[test]
fn the_direct_reader_reads_the_same_jobs_as_the_whole_trace() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/KTH-SP2-1996-2.1-cln.swf.gz");
    assert_eq!(
        read_trace_jobs(&path, &swf::Filter::default()).unwrap(),
        kth(None)
    );
    let small = swf::Filter {
        max_processors: Some(8),
        first: Some(5_000),
        ..swf::Filter::default()
    };
    let direct = read_trace_jobs(&path, &small).unwrap();
    let whole = trace_jobs(&swf::read(&path, &small).unwrap());
    assert_eq!(direct, whole);
    assert!(
        direct.len() > 3_000 && direct.len() < 5_000,
        "{}",
        direct.len()
    );
    assert_eq!(kth(None).len(), 28_475);
}

fn run(jobs: &[TraceJob], queue: QueueConfig) -> Replay {
    let config = SchedulerConfig {
        queue,
        ..SchedulerConfig::default()
    };
    replay(jobs, vec![Site::cluster("kth", PROCESSORS)], config).unwrap()
}

/// FCFS on one site, written independently of the scheduler: jobs start in file order, each
/// at the earliest time no earlier than its submission and the previous start at which
/// enough processors are free.
fn reference_fcfs(jobs: &[TraceJob]) -> Vec<(i64, i64)> {
    let mut free = PROCESSORS;
    let mut ends: BinaryHeap<Reverse<(i64, u32)>> = BinaryHeap::new();
    let mut last_start = 0;
    jobs.iter()
        .map(|j| {
            let mut t = j.submit.max(last_start);
            loop {
                while let Some(&Reverse((e, p))) = ends.peek() {
                    if e > t {
                        break;
                    }
                    ends.pop();
                    free += p;
                }
                if free >= j.processors {
                    break;
                }
                t = ends.peek().map(|Reverse((e, _))| *e).unwrap();
            }
            free -= j.processors;
            ends.push(Reverse((t + j.runtime, j.processors)));
            last_start = t;
            (t, t + j.runtime)
        })
        .collect()
}

#[test]
fn fcfs_matches_an_independent_fcfs_job_by_job() {
    let jobs = kth(None);
    assert_eq!(jobs.len(), 28_475);
    let got = run(&jobs, QueueConfig::Fcfs);
    let want = reference_fcfs(&jobs);
    let mismatches: Vec<_> = got
        .jobs
        .iter()
        .zip(&want)
        .filter(|(g, w)| (g.start, g.end) != (Some(w.0), Some(w.1)))
        .take(5)
        .collect();
    assert!(mismatches.is_empty(), "{mismatches:?}");
    // The same figure an independent Python FCFS gave (see bench/RESULTS.md).
    let wait: i64 = got.jobs.iter().map(|j| j.start.unwrap() - j.submit).sum();
    assert_eq!(wait, 11_107_614_273);
}

/// Every job starts after its submission, runs for its runtime, and at no instant do the
/// running jobs hold more processors than the site has.
fn assert_valid(r: &Replay, jobs: &[TraceJob]) {
    let mut changes: Vec<(i64, i64)> = Vec::new();
    for (s, j) in r.jobs.iter().zip(jobs) {
        let (start, end) = (s.start.unwrap(), s.end.unwrap());
        assert!(
            start >= j.submit,
            "job {} starts before its submission",
            j.number
        );
        assert_eq!(end - start, j.runtime, "job {}", j.number);
        if end > start {
            changes.push((start, i64::from(j.processors)));
            changes.push((end, -i64::from(j.processors)));
        }
    }
    // Ends before starts at one instant.
    changes.sort();
    let mut busy = 0;
    for (t, d) in changes {
        busy += d;
        assert!(
            busy <= i64::from(PROCESSORS),
            "over-allocated at {t}: {busy}"
        );
    }
}

#[test]
fn easy_schedules_are_valid_deterministic_and_beat_fcfs() {
    let jobs = kth(Some(5_000));
    let easy = run(&jobs, QueueConfig::Easy);
    assert_valid(&easy, &jobs);
    assert_eq!(
        run(&jobs, QueueConfig::Easy),
        easy,
        "same inputs, same schedule"
    );
    let fcfs = run(&jobs, QueueConfig::Fcfs);
    assert_valid(&fcfs, &jobs);
    let mean_wait = |r: &Replay| r.summary(u64::from(PROCESSORS)).mean_wait;
    assert!(
        mean_wait(&easy) < mean_wait(&fcfs) / 2.0,
        "EASY {} vs FCFS {}",
        mean_wait(&easy),
        mean_wait(&fcfs)
    );
    let conservative = run(&jobs[..1_000], QueueConfig::Conservative);
    assert_valid(&conservative, &jobs[..1_000]);
}

/// Issue 22: a site list with a cloud provisioned On-Demand used to stop the replay with
/// "the scheduler stopped with 1 job(s) still waiting" (the VM leases were never answered).
/// A replay is a run of the engine, which leases the VMs, and every job completes. The cloud's VMs come 60 s
/// after they are asked for, so no job that needs the cloud starts at once.
#[test]
fn a_cloud_site_is_replayed_on_the_engine() {
    use coalloc_core::model::CloudLimits;
    let jobs: Vec<TraceJob> = kth(Some(400))
        .into_iter()
        .filter(|j| j.processors <= 32)
        .collect();
    let cloud = Site::cloud(
        "ec2",
        CloudLimits {
            vm_processors: 8,
            min_vms: 0,
            max_vms: 4,
            lease_latency: 60_000,
            price_micros_per_vm_hour: 65_000,
        },
    );
    let sites = vec![Site::cluster("kth", 32), cloud];
    let config = SchedulerConfig {
        queue: QueueConfig::from_name("fcfs").unwrap(),
        ..SchedulerConfig::default()
    };
    let r = replay(&jobs, sites, config.clone()).unwrap();
    assert_eq!(r.refused, vec![]);
    assert_eq!(r.jobs.len(), jobs.len());
    assert!(r.jobs.iter().all(|j| j.end.is_some()));
    assert_valid(&r, &jobs);
    // Without the cloud the same jobs wait longer: the cloud was used.
    let alone = replay(&jobs, vec![Site::cluster("kth", 32)], config).unwrap();
    let wait = |r: &Replay| -> i64 { r.jobs.iter().map(|j| j.start.unwrap() - j.submit).sum() };
    assert!(wait(&r) < wait(&alone), "{} vs {}", wait(&r), wait(&alone));
}

/// A trace file of its own for a test, removed when dropped.
struct TempTrace(std::path::PathBuf);

impl TempTrace {
    fn new(name: &str, text: &str) -> TempTrace {
        let path = std::env::temp_dir().join(format!("coalloc-{}-{name}.swf", std::process::id()));
        std::fs::write(&path, text).unwrap();
        TempTrace(path)
    }
}

impl Drop for TempTrace {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// An SWF job line: number, submit, runtime, processors, requested time, user.
fn swf_line(n: i64, submit: i64, run: i64, procs: u32, req: i64, user: i64) -> String {
    format!("{n} {submit} 0 {run} {procs} -1 -1 {procs} {req} -1 1 {user} -1 -1 -1 -1 -1 -1\n")
}

fn replay_both(path: &Path, filter: &swf::Filter, queue: QueueConfig) -> (Replay, Replay) {
    let config = SchedulerConfig {
        queue,
        ..SchedulerConfig::default()
    };
    let sites = vec![Site::cluster("kth", PROCESSORS)];
    let jobs = read_trace_jobs(path, filter).unwrap();
    let whole = replay(&jobs, sites.clone(), config.clone()).unwrap();
    let fed = replay_file(path, filter, sites, config).unwrap();
    (whole, fed)
}

/// The replay of a trace read while it runs (`replay_file`, the jobs fed in chunks) is the
/// replay of the whole trace read first, job by job, under FCFS and EASY, with a filter too.
#[test]
fn a_trace_replayed_as_it_is_read_is_replayed_as_when_read_first() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/KTH-SP2-1996-2.1-cln.swf.gz");
    for queue in [QueueConfig::Fcfs, QueueConfig::Easy] {
        for filter in [
            swf::Filter::default(),
            swf::Filter {
                max_processors: Some(8),
                first: Some(5_000),
                ..swf::Filter::default()
            },
        ] {
            let (whole, fed) = replay_both(&path, &filter, queue.clone());
            assert!(whole.jobs.len() > 3_000);
            assert_eq!(fed, whole, "{queue:?} {filter:?}");
        }
    }
}

/// Jobs of one submit time on both sides of a chunk's end (4,096 jobs) arrive together, as
/// when the trace is read first; so do jobs of a plain-text trace.
#[test]
fn an_instant_split_between_chunks_is_one_instant() {
    let mut text = String::from("; a synthetic trace\n");
    for n in 1..=9_000 {
        // 300 jobs a second: instants of 300 jobs, one across each chunk boundary.
        text += &swf_line(n, n / 300, 50 + n % 7 * 30, 1 + (n % 13) as u32, 400, n % 5);
    }
    let t = TempTrace::new("split", &text);
    for queue in [QueueConfig::Fcfs, QueueConfig::Easy] {
        let (whole, fed) = replay_both(&t.0, &swf::Filter::default(), queue);
        assert_eq!(whole.jobs.len(), 9_000);
        assert_eq!(fed, whole);
    }
}

/// A job the scheduler refuses (larger than the site) is refused in a replay read as it
/// runs too, with the same reason: a fed run keeps such fates apart from its ends.
#[test]
fn a_refused_job_is_refused_in_a_replay_read_as_it_runs() {
    let mut text = String::new();
    for n in 1..=5_000 {
        let procs = if n == 4_500 {
            PROCESSORS + 1
        } else {
            1 + (n % 9) as u32
        };
        text += &swf_line(n.into(), n.into(), 60, procs, 90, 1);
    }
    let t = TempTrace::new("refused", &text);
    let (whole, fed) = replay_both(&t.0, &swf::Filter::default(), QueueConfig::Easy);
    assert_eq!(fed, whole);
    assert_eq!(fed.refused.len(), 1, "{:?}", fed.refused);
    assert_eq!(fed.refused[0].0, 4_500);
    let job = fed.jobs.iter().find(|j| j.number == 4_500).expect("listed");
    assert_eq!((job.start, job.end), (None, None));
    assert_eq!(fed.jobs.iter().filter(|j| j.end.is_some()).count(), 4_999);
}

/// A trace whose jobs are not in submit order is read whole and replayed as before.
#[test]
fn a_trace_out_of_submit_order_is_replayed_all_the_same() {
    let mut text = String::new();
    for n in 1..=6_000 {
        // Job 5,000 comes 100 s before the one before it (in the second chunk).
        let submit = if n == 5_000 { n - 100 } else { n };
        text += &swf_line(n, submit, 90, 1 + (n % 40) as u32, 120, 1);
    }
    let t = TempTrace::new("unsorted", &text);
    let (whole, fed) = replay_both(&t.0, &swf::Filter::default(), QueueConfig::Easy);
    assert_eq!(fed, whole);
    assert!(whole.jobs.iter().all(|j| j.end.is_some()));
}

/// An error in the file after the run has started is the file's error, as when read first.
#[test]
fn an_error_late_in_the_trace_is_the_traces_error() {
    let mut text = String::new();
    for n in 1..=6_000 {
        text += &swf_line(n, n, 30, 4, 60, 1);
    }
    text += "6001 6001 0 x 4 -1 -1 4 60 -1 1 1 -1 -1 -1 -1 -1 -1\n";
    let t = TempTrace::new("bad", &text);
    let sites = vec![Site::cluster("kth", PROCESSORS)];
    let first = read_trace_jobs(&t.0, &swf::Filter::default()).unwrap_err();
    match replay_file(
        &t.0,
        &swf::Filter::default(),
        sites,
        SchedulerConfig::default(),
    ) {
        Err(FileReplayError::Trace(e)) => assert_eq!(e.to_string(), first.to_string()),
        other => panic!("{other:?}"),
    }
    assert!(first.to_string().starts_with("6001:13:"), "{first}");
}
