//! Reserve claiming in the simulator (issue 31): the sites' calendars answer the core's
//! queries from their local jobs' known ends, every component starts at the common start,
//! and local jobs keep a reservation's processors free.

use coalloc_core::model::{Component, Job, JobKind, Site, SECOND};
use coalloc_core::scheduler::{Claiming, SchedulerConfig};
use coalloc_sim::engine::site::Local;
use coalloc_sim::engine::{simulate, JobFate, SimJob, SimParams, Workload};

fn local(submit_s: i64, size: u32, runtime_s: i64) -> Local {
    Local {
        submit: submit_s * SECOND,
        size,
        runtime: runtime_s * SECOND,
    }
}

#[test]
fn components_start_together_at_the_reservation_and_local_jobs_keep_out() {
    let out = with_lead(None);
    let j = &out.jobs[0];
    assert_eq!(j.fate, JobFate::Finished);
    let rec = j.record.as_ref().unwrap();
    // s1 is free at 300 s: the common start; s0 was asked again from then.
    assert_eq!(rec.start(), Some(300 * SECOND));
    assert_eq!(rec.end(), Some(400 * SECOND));
    assert_eq!(rec.sites(), &[0, 1]);
    assert_eq!(rec.first_jst(), Some(5 * SECOND));
    assert_eq!(rec.last_jst(), Some(300 * SECOND));
    let start = |site: usize, i: usize| out.local[site][i].start.map(|t| t / SECOND);
    // The local jobs that would overlap the reservation wait until the job is done.
    assert_eq!(start(0, 0), Some(400));
    assert_eq!(start(1, 0), Some(0));
    assert_eq!(start(1, 1), Some(400));
    // The components held their processors from the start on, not before.
    assert_eq!(out.usage[0].running, 4 * 100 * 1_000);
    assert_eq!(out.usage[1].running, 4 * 100 * 1_000);
    // No reservation stood unused: each was taken at its start and deleted at the end.
    assert_eq!(out.usage[0].reserved, 0);
}

#[test]
fn a_reservation_left_by_a_component_that_ended_early_is_counted_reserved_and_idle() {
    let sites = vec![Site::cluster("s0", 8), Site::cluster("s1", 8)];
    let mut job = Job::new(
        JobKind::Unordered,
        vec![Component::new(4), Component::new(4)],
    );
    job.submit = Some(0);
    job.set_max_wall_time(Some(200 * SECOND));
    let work = Workload {
        jobs: vec![SimJob {
            tag: 1,
            job,
            runtime: 100 * SECOND,
        }],
        // s1 is full until 300 s.
        local: vec![vec![], vec![local(0, 8, 300)]],
    };
    let config = SchedulerConfig {
        claiming: Claiming::from_name("reserve").unwrap(),
        ..SchedulerConfig::default()
    };
    let params = SimParams {
        window_end: Some(1_000 * SECOND),
        // Component 0 ends after 50 s, component 1 after 100 s.
        component_runtimes: [(0, vec![50 * SECOND, 100 * SECOND])].into(),
        ..SimParams::default()
    };
    let out = simulate(sites, config, &work, &params).unwrap();
    let rec = out.jobs[0].record.as_ref().unwrap();
    assert_eq!(
        (rec.start(), rec.end()),
        (Some(300 * SECOND), Some(400 * SECOND))
    );
    // s0's reservation stood idle from 350 s until the job ended and deleted it at 400 s.
    assert_eq!(out.usage[0].running, 4 * 50 * 1_000);
    assert_eq!(out.usage[0].reserved, 4 * 50 * 1_000);
    assert_eq!(out.usage[1].reserved, 0);
}

/// Two 8-processor sites that take reservations at most `ahead` seconds before their start.
fn sites_ahead(ahead: Option<&str>) -> Vec<Site> {
    let mut sites = vec![Site::cluster("s0", 8), Site::cluster("s1", 8)];
    for s in &mut sites {
        if let Some(a) = ahead {
            s.manager.insert("reserve_ahead".into(), a.into());
        }
    }
    sites
}

/// One job of two 4-processor components submitted at 5 s on two 8-processor sites with
/// other users' jobs, under reserve claiming and a lead-time limit (`None`: none): the
/// outcome.
fn with_lead(ahead: Option<&str>) -> coalloc_sim::engine::Outcome {
    let mut job = Job::new(
        JobKind::Unordered,
        vec![Component::new(4), Component::new(4)],
    );
    job.submit = Some(5 * SECOND);
    job.set_max_wall_time(Some(200 * SECOND));
    let work = Workload {
        jobs: vec![SimJob {
            tag: 1,
            job,
            runtime: 100 * SECOND,
        }],
        local: vec![
            // s0: 6 processors for 400 s from 10 s would overlap the reservation of 4.
            vec![local(10, 6, 400)],
            // s1: full until 300 s; then a full job that must wait for the reservation.
            vec![local(0, 8, 300), local(10, 8, 50)],
        ],
    };
    let config = SchedulerConfig {
        claiming: Claiming::from_name("reserve").unwrap(),
        ..SchedulerConfig::default()
    };
    let params = SimParams {
        window_end: Some(2_000 * SECOND),
        ..SimParams::default()
    };
    simulate(sites_ahead(ahead), config, &work, &params).unwrap()
}

#[test]
fn a_lead_long_enough_changes_nothing() {
    let out = with_lead(Some("300s"));
    let rec = out.jobs[0].record.as_ref().unwrap();
    assert_eq!(rec.start(), Some(300 * SECOND));
    assert_eq!(rec.submit_failures(), 0);
    assert_eq!(out.local[0][0].start, Some(400 * SECOND));
}

#[test]
fn a_short_lead_lets_local_jobs_take_the_processors_first() {
    // Reservations are taken at most 100 s ahead: the common start (300 s) is agreed at
    // 5 s but reserved only at 200 s; s0's local job (6 of 8 processors from 10 s for 400 s)
    // has taken the processors by then, so s0 refuses, the run is rolled back, and the job
    // starts only once that local job has ended.
    let out = with_lead(Some("100s"));
    let j = &out.jobs[0];
    assert_eq!(j.fate, JobFate::Finished);
    let rec = j.record.as_ref().unwrap();
    assert_eq!(out.local[0][0].start, Some(10 * SECOND));
    let start = rec.start().unwrap();
    assert!(start >= 410 * SECOND, "started at {start}");
    assert!(rec.submit_failures() >= 1, "a run rolled back: {rec:?}");
}
