//! The discrete-event engine: it gives trace replay's schedules when the sites are ideal,
//! and its local jobs, start latency, faults and transfers behave as specified.

use coalloc_core::model::{Component, FileDistribution, InputFile, Job, JobKind, Site, SECOND};
use coalloc_core::scheduler::sites::SiteFaultLimits;
use coalloc_core::scheduler::{Claiming, IcpParams, QueueConfig, SchedulerConfig};
use coalloc_sim::engine::site::Local;
use coalloc_sim::engine::{
    simulate, Failures, JobFate, Outage, Scripted, SimJob, SimParams, Workload,
};
use coalloc_sim::metrics::Metrics;
use coalloc_sim::replay::{replay, trace_jobs, TraceJob};
use coalloc_sim::swf;
use coalloc_sim::workload::trace::{sim_jobs, Split};
use std::path::Path;

fn kth(first: usize) -> Vec<TraceJob> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces/KTH-SP2-1996-2.1-cln.swf.gz");
    let filter = swf::Filter {
        first: Some(first),
        ..swf::Filter::default()
    };
    trace_jobs(&swf::read(path, &filter).unwrap())
}

fn config(name: &str) -> SchedulerConfig {
    SchedulerConfig {
        queue: QueueConfig::from_name(name).unwrap(),
        ..SchedulerConfig::default()
    }
}

fn job(sizes: &[u32], submit_s: i64, runtime_s: i64) -> SimJob {
    let mut job = Job::new(
        JobKind::Unordered,
        sizes.iter().map(|&n| Component::new(n)).collect(),
    );
    job.submit = Some(submit_s * SECOND);
    SimJob {
        tag: submit_s,
        job,
        runtime: runtime_s * SECOND,
    }
}

fn sites(sizes: &[u32]) -> Vec<Site> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| Site::cluster(format!("s{i}"), n))
        .collect()
}

#[test]
fn ideal_sites_give_the_replay_schedule_job_by_job() {
    let trace = kth(3000);
    for policy in ["fcfs", "easy"] {
        let expected = replay(&trace, sites(&[100]), config(policy)).unwrap();
        let work = Workload {
            jobs: sim_jobs(&trace, Split::Whole),
            local: vec![],
        };
        let out = simulate(sites(&[100]), config(policy), &work, &SimParams::default()).unwrap();
        // Without the records (as a replay runs) the outcomes keep the same start and end.
        let lean = SimParams {
            keep_records: false,
            ..SimParams::default()
        };
        let lean = simulate(sites(&[100]), config(policy), &work, &lean).unwrap();
        let mut compared = 0;
        for (i, ((r, o), l)) in expected
            .jobs
            .iter()
            .zip(&out.jobs)
            .zip(&lean.jobs)
            .enumerate()
        {
            assert_eq!(r.number, o.tag);
            let rec = o.record.as_ref();
            let times = (rec.and_then(|r| r.start()), rec.and_then(|r| r.end()));
            assert_eq!(out.times(i), times);
            assert_eq!((lean.times(i), &l.fate), (times, &o.fate));
            assert!(l.record.is_none());
            let start = rec.and_then(|r| r.start()).map(|t| t / SECOND);
            let end = rec.and_then(|r| r.end()).map(|t| t / SECOND);
            assert_eq!((r.start, r.end), (start, end), "{policy}: job {}", r.number);
            compared += usize::from(start.is_some());
        }
        assert!(compared > 2900, "{policy}: only {compared} jobs ran");
    }
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_other_failures() {
    let work = Workload {
        jobs: (0..40).map(|i| job(&[8, 8], i * 30, 100)).collect(),
        local: vec![],
    };
    let mut params = SimParams {
        failures: Failures {
            start: 0.2,
            mtbf: Some(400 * SECOND),
            ..Failures::default()
        },
        ..SimParams::default()
    };
    let cfg = || SchedulerConfig {
        max_submit_failures: None,
        max_completion_failures: None,
        site_faults: SiteFaultLimits {
            submit_errors: 0,
            completion_errors: 0,
        },
        ..config("fcfs")
    };
    let a = simulate(sites(&[32, 32]), cfg(), &work, &params).unwrap();
    let b = simulate(sites(&[32, 32]), cfg(), &work, &params).unwrap();
    assert_eq!(a, b);
    let m = Metrics::of(&a);
    assert_eq!(m.finished, 40, "every job finishes in the end: {m:?}");
    assert!(m.submit_failures > 0 && m.completion_failures > 0, "{m:?}");
    params.seed = 2;
    let c = simulate(sites(&[32, 32]), cfg(), &work, &params).unwrap();
    assert_ne!(
        Metrics::of(&c).submit_failures + Metrics::of(&c).completion_failures * 1000,
        m.submit_failures + m.completion_failures * 1000
    );
}

/// TAGS keeps the jobs it started and drops those that ended without finishing (too many
/// failed starts): the engine's core forgets an ended job after its instant, and TAGS
/// looked for the end in the job's record, which the core had already given away, then
/// asked for the forgotten job's record at a later pass and panicked.
#[test]
fn tags_drops_its_started_jobs_that_failed_for_good() {
    let work = Workload {
        jobs: (0..40).map(|i| job(&[8], i * 30, 100)).collect(),
        local: vec![],
    };
    let params = SimParams {
        failures: Failures {
            start: 0.6,
            mtbf: Some(150 * SECOND),
            ..Failures::default()
        },
        ..SimParams::default()
    };
    let tags = coalloc_core::queue::tags::TagsChainParams {
        chains: vec![vec![0, 1]],
        limits: vec![60 * SECOND],
        dispatch: coalloc_core::queue::tags::ChainDispatch::RoundRobin,
        period: None,
    };
    let cfg = SchedulerConfig {
        queue: QueueConfig::TagsChain(tags),
        ..SchedulerConfig::default()
    };
    let out = simulate(sites(&[16, 16]), cfg, &work, &params).unwrap();
    let m = Metrics::of(&out);
    assert!(m.failed > 0, "some jobs fail for good: {m:?}");
    assert_eq!(m.finished + m.failed + m.unfinished, 40, "{m:?}");
}

#[test]
fn start_latency_delays_the_barrier_and_holds_processors_meanwhile() {
    let work = Workload {
        jobs: vec![job(&[10, 10], 0, 50)],
        local: vec![],
    };
    let params = SimParams {
        start_latency: 3 * SECOND,
        window_end: Some(100 * SECOND),
        ..SimParams::default()
    };
    let out = simulate(sites(&[16, 16]), config("fcfs"), &work, &params).unwrap();
    let r = out.jobs[0].record.as_ref().unwrap();
    assert_eq!((r.start(), r.end()), (Some(3_000), Some(53_000)));
    let m = Metrics::of(&out);
    // 20 processors held 3 s before the barrier, 50 s after, over 32 × 100 s.
    assert!((m.wasted - 60.0 / 3200.0).abs() < 1e-9, "{m:?}");
    assert!((m.global_load - 1000.0 / 3200.0).abs() < 1e-9, "{m:?}");
}

#[test]
fn local_jobs_run_fcfs_and_gp_kills_them_at_a_deadline() {
    // One site of 32: a local job of 30 runs from t = 0 for 1000 s. A global job of 2 × 16
    // with a deadline at 100 s cannot fit before; GP kills the local job at the deadline.
    let mut g = job(&[16, 16], 0, 100);
    g.job.set_deadline(Some(100 * SECOND));
    let work = Workload {
        jobs: vec![g],
        local: vec![vec![
            Local {
                submit: 0,
                size: 30,
                runtime: 1000 * SECOND,
            },
            Local {
                submit: 10 * SECOND,
                size: 2,
                runtime: 10 * SECOND,
            },
        ]],
    };
    let cfg = SchedulerConfig {
        queue: QueueConfig::from_name("rpp").unwrap(),
        ..SchedulerConfig::default()
    };
    let out = simulate(sites(&[32]), cfg, &work, &SimParams::default()).unwrap();
    assert_eq!(out.jobs[0].fate, JobFate::Finished);
    let r = out.jobs[0].record.as_ref().unwrap();
    assert_eq!(r.start(), Some(100 * SECOND));
    assert!(out.local[0][0].killed);
    assert_eq!(out.local[0][0].end, Some(100 * SECOND));
    // The small local job ran at once and was not killed.
    assert_eq!(
        (out.local[0][1].start, out.local[0][1].killed),
        (Some(10 * SECOND), false)
    );
    let m = Metrics::of(&out);
    assert_eq!((m.local_jobs, m.local_killed, m.success_rate), (2, 1, 1.0));
}

#[test]
fn an_outage_fails_what_runs_there_and_the_job_is_re_placed() {
    let work = Workload {
        jobs: vec![job(&[16], 0, 100)],
        local: vec![],
    };
    let params = SimParams {
        failures: Failures {
            outages: vec![Outage {
                site: 0,
                from: 50 * SECOND,
                to: 500 * SECOND,
            }],
            ..Failures::default()
        },
        ..SimParams::default()
    };
    // Worst fit puts the job on the larger site 0 first.
    let out = simulate(sites(&[32, 16]), config("fcfs"), &work, &params).unwrap();
    let r = out.jobs[0].record.as_ref().unwrap();
    assert_eq!(out.jobs[0].fate, JobFate::Finished);
    assert_eq!(r.completion_failures(), 1);
    assert_eq!(
        (r.start(), r.end()),
        (Some(50 * SECOND), Some(150 * SECOND))
    );
    assert_eq!(r.sites(), &[1]);
}

#[test]
fn input_files_are_transferred_before_the_start() {
    // A job with a 4 GB file held only at site 1, placed on site 0 (the larger), at 1 GB/s:
    // the transfer takes 4 s and the job starts after it.
    let mut j = job(&[16], 0, 10);
    j.job = j.job.with(|e| {
        e.input_file = Some(Box::new(InputFile {
            name: "data".into(),
            size: 4_000_000_000,
            distribution: FileDistribution::Whole,
        }))
    });
    let mut s = sites(&[64, 16]);
    s[1].files.push("data".into());
    s[0].bandwidth.insert("s1".into(), 1_000_000_000);
    let params = SimParams::default();
    let work = Workload {
        jobs: vec![j],
        local: vec![],
    };
    // Transfers belong to KOALA's claiming (seed 000 §3.2).
    let cfg = SchedulerConfig {
        claiming: Claiming::Icp(IcpParams::default()),
        ..config("fcfs")
    };
    let out = simulate(s, cfg, &work, &params).unwrap();
    let r = out.jobs[0].record.as_ref().unwrap();
    assert_eq!(r.sites(), &[0]);
    assert_eq!(r.start(), Some(4 * SECOND));
}

#[test]
fn samples_never_show_a_site_over_allocated() {
    let jobs = (0..60).map(|i| job(&[12, 12, 12], i * 20, 150)).collect();
    let local = (0..2)
        .map(|s| {
            (0..80)
                .map(|i| Local {
                    submit: (i * 15 + s) * SECOND,
                    size: 1 + (i as u32 * 7) % 20,
                    runtime: 90 * SECOND,
                })
                .collect()
        })
        .collect();
    let params = SimParams {
        start_latency: 2 * SECOND,
        sample_interval: Some(5 * SECOND),
        failures: Failures {
            start: 0.05,
            ..Failures::default()
        },
        ..SimParams::default()
    };
    let cfg = SchedulerConfig {
        max_submit_failures: None,
        site_faults: SiteFaultLimits {
            submit_errors: 0,
            completion_errors: 0,
        },
        ..config("fpfs")
    };
    let out = simulate(sites(&[32, 32]), cfg, &Workload { jobs, local }, &params).unwrap();
    assert!(out.samples.len() > 100);
    for s in &out.samples {
        assert!(s.coalloc + s.others + s.idle == 32, "{s:?}");
    }
    let m = Metrics::of(&out);
    assert_eq!(m.finished, 60, "{m:?}");
    assert_eq!(m.local_finished, 160);
}

#[test]
fn a_full_queue_holds_jobs_back_and_samples_go_on_after_a_batch() {
    // Five jobs arrive at once; the queue takes two at a time. The held jobs enter as room
    // appears, and the load samples keep coming after the instant of the batch.
    let work = Workload {
        jobs: (0..5)
            .map(|i| SimJob {
                tag: i,
                ..job(&[32], 0, 100)
            })
            .collect(),
        local: vec![],
    };
    let cfg = SchedulerConfig {
        max_queued: Some(2),
        ..config("fcfs")
    };
    let params = SimParams {
        sample_interval: Some(50 * SECOND),
        ..SimParams::default()
    };
    let out = simulate(sites(&[32]), cfg, &work, &params).unwrap();
    let starts: Vec<i64> = out
        .jobs
        .iter()
        .map(|j| j.record.as_ref().unwrap().start().unwrap() / SECOND)
        .collect();
    assert_eq!(starts, vec![0, 100, 200, 300, 400]);
    assert!(out.jobs.iter().all(|j| j.fate == JobFate::Finished));
    // Job 4 entered the queue when job 1 started (at 100 s), the queue holding 2 again.
    assert!(out.jobs[4].submit > 0);
    assert!(out
        .samples
        .iter()
        .any(|s| s.time >= 400 * SECOND && s.coalloc == 32));
}

#[test]
fn scripted_cancels_and_program_failures_happen_when_the_history_says() {
    // One site of 16, FCFS. J0 runs 0..100. J1 (queued behind it) is cancelled 30 s after
    // its arrival, at 40, without ever starting. J2 runs from 100 and its program fails after
    // its 50 s: with no retry allowed it fails at 150. J3 starts at 100 beside J2 and is
    // cancelled 80 s after its arrival, at 110, while it runs; J4 is left alone.
    let work = Workload {
        jobs: vec![
            job(&[16], 0, 100),
            job(&[16], 10, 50),
            job(&[8], 20, 50),
            job(&[8], 30, 20),
            job(&[8], 40, 10),
        ],
        local: vec![],
    };
    let params = SimParams {
        scripted: [
            (1, Scripted::CancelAfter(30 * SECOND)),
            (2, Scripted::FailsAtEnd("exit code 3".into())),
            (3, Scripted::CancelAfter(80 * SECOND)),
        ]
        .into_iter()
        .collect(),
        ..SimParams::default()
    };
    let cfg = SchedulerConfig {
        max_completion_failures: Some(0),
        ..config("fcfs")
    };
    let out = simulate(sites(&[16]), cfg, &work, &params).unwrap();
    let got: Vec<(String, Option<i64>, Option<i64>)> = out
        .jobs
        .iter()
        .map(|j| {
            let fate = match &j.fate {
                JobFate::Finished => "finished".to_owned(),
                JobFate::Failed(m) => format!("failed: {m}"),
                other => format!("{other:?}"),
            };
            let r = j.record.as_ref();
            let s = |t: Option<i64>| t.map(|t| t / SECOND);
            (
                fate,
                s(r.and_then(|r| r.start())),
                s(r.and_then(|r| r.end())),
            )
        })
        .collect();
    let row = |f: &str, start: Option<i64>, end: i64| (f.to_owned(), start, Some(end));
    assert_eq!(
        got,
        vec![
            row("finished", Some(0), 100),
            row("failed: cancelled", None, 40),
            row(
                "failed: component 0 on site `s0`: exit code 3 (limit of 0 failures after start reached)",
                Some(100),
                150
            ),
            row("failed: cancelled", Some(100), 110),
            row("finished", Some(110), 120),
        ]
    );
}

/// What `coalloc whatif` replays from a history (issue 34 item 4): a site's own start
/// latency, a job's own start-up, a component that ends before the others of its job (its processors go to the
/// next job then), and an aborted start, which the core backs off from as configured.
#[test]
fn site_latency_component_run_times_and_aborted_starts_are_replayed() {
    // One site of 8: A (4 + 4, 10 s) first; B (4, 1 s) arrives at 1 s and fits only when
    // one of A's components ends: A's first component runs 2 s, its second 10 s.
    let work = Workload {
        jobs: vec![job(&[4, 4], 0, 10), job(&[4], 1, 1)],
        local: vec![],
    };
    let params = SimParams {
        site_start_latency: [(0, 500)].into_iter().collect(),
        component_runtimes: [(0, vec![2 * SECOND, 10 * SECOND])].into_iter().collect(),
        ..SimParams::default()
    };
    let out = simulate(sites(&[8]), config("fcfs"), &work, &params).unwrap();
    let times = |i: usize| {
        let r = out.jobs[i].record.as_ref().unwrap();
        (r.start().unwrap(), r.end().unwrap())
    };
    // A: placed at 0, at the barrier after the site's 500 ms, ends with its longer component.
    assert_eq!(times(0), (500, 10_500));
    // B: placed when A's first component ends (2.5 s), starts 500 ms later.
    assert_eq!(times(1), (3_000, 4_000));
    // Without the component run times B waits for the whole of A.
    let whole = SimParams {
        component_runtimes: Default::default(),
        ..params.clone()
    };
    let out = simulate(sites(&[8]), config("fcfs"), &work, &whole).unwrap();
    assert_eq!(out.jobs[1].record.as_ref().unwrap().start(), Some(11_000));
    // A job's own start-up (one that waited at its site in the history) instead of the
    // site's: A reaches the barrier 3 s after its placement, so B's turn comes 2.5 s later.
    let own = SimParams {
        job_start_latency: [(0, 3 * SECOND)].into_iter().collect(),
        ..params.clone()
    };
    let out = simulate(sites(&[8]), config("fcfs"), &work, &own).unwrap();
    let r = |i: usize| out.jobs[i].record.as_ref().unwrap();
    assert_eq!((r(0).start(), r(0).end()), (Some(3_000), Some(13_000)));
    assert_eq!((r(1).start(), r(1).end()), (Some(5_500), Some(6_500)));

    // An aborted start: A's first start fails (its program, not the site), the core waits
    // its back-off of 10 s and starts it again; B, on the other site, is left alone.
    let work = Workload {
        jobs: vec![job(&[4], 0, 5), job(&[4], 0, 5)],
        local: vec![],
    };
    let mut cfg = config("fcfs");
    cfg.retry_backoff = 10 * SECOND;
    cfg.retry_backoff_max = 10 * SECOND;
    let params = SimParams {
        aborted_starts: [(0, vec!["process 0 exited with 1".to_owned()])]
            .into_iter()
            .collect(),
        ..SimParams::default()
    };
    let out = simulate(sites(&[4, 4]), cfg, &work, &params).unwrap();
    let a = out.jobs[0].record.as_ref().unwrap();
    assert_eq!(out.jobs[0].fate, JobFate::Finished);
    assert_eq!(
        (a.submit_failures(), a.start(), a.end()),
        (1, Some(10_000), Some(15_000))
    );
    let b = out.jobs[1].record.as_ref().unwrap();
    assert_eq!((b.submit_failures(), b.start()), (0, Some(0)));
}
