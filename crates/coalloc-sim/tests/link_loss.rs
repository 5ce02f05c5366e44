//! `coalloc sim` plays an agent site whose link goes away and comes back (issue 30): within
//! its grace nothing is re-placed; past it the core counts the site lost and the job is
//! placed again on the sites left, and the site is used again once its link is back.

use coalloc_core::model::{Component, Job, JobKind, Site, SECOND};
use coalloc_core::scheduler::SchedulerConfig;
use coalloc_sim::engine::{simulate, Failures, JobFate, LinkLoss, SimJob, SimParams, Workload};
use coalloc_sim::experiment::{run_one, Experiment};
use std::path::Path;

fn job(count: u32, submit_s: i64, runtime_s: i64) -> SimJob {
    let mut job = Job::new(JobKind::Unordered, vec![Component::new(count)]);
    job.submit = Some(submit_s * SECOND);
    SimJob {
        tag: submit_s,
        job,
        runtime: runtime_s * SECOND,
    }
}

fn run(loss: LinkLoss, jobs: Vec<SimJob>) -> Vec<coalloc_sim::engine::JobOutcome> {
    let sites = vec![Site::cluster("s0", 32), Site::cluster("s1", 16)];
    let params = SimParams {
        failures: Failures {
            link_losses: vec![loss],
            ..Failures::default()
        },
        ..SimParams::default()
    };
    let work = Workload {
        jobs,
        local: vec![],
    };
    simulate(sites, SchedulerConfig::default(), &work, &params)
        .unwrap()
        .jobs
}

#[test]
fn a_job_on_a_site_whose_link_stays_silent_past_its_grace_is_placed_again_elsewhere() {
    // Worst fit puts the job on s0 (32 idle); s0's link is silent from 10 s to 300 s.
    let loss = LinkLoss {
        site: 0,
        from: 10 * SECOND,
        to: 300 * SECOND,
        grace: 30 * SECOND,
    };
    let out = run(loss, vec![job(8, 0, 100), job(4, 20, 10), job(4, 400, 10)]);
    let a = out[0].record.as_ref().unwrap();
    assert_eq!(out[0].fate, JobFate::Finished);
    assert_eq!(
        a.completion_failures(),
        1,
        "lost at 40 s: one completion failure"
    );
    let run = a.run.as_ref().unwrap();
    assert_eq!(run.sites[..], [1], "placed again on s1");
    assert_eq!(run.start, Some(40 * SECOND));
    assert_eq!(run.end, Some(140 * SECOND));
    // Submitted while s0 was silent: placed on s1, although s0 had more idle processors.
    let b = out[1].record.as_ref().unwrap().run.as_ref().unwrap();
    assert_eq!(b.sites[..], [1]);
    // After the link is back, s0 is used again (its one lost launch was one error only).
    let c = out[2].record.as_ref().unwrap().run.as_ref().unwrap();
    assert_eq!(c.sites[..], [0]);
}

#[test]
fn a_link_back_within_its_grace_changes_nothing_but_the_time_its_reports_arrive() {
    let loss = LinkLoss {
        site: 0,
        from: 10 * SECOND,
        to: 120 * SECOND,
        grace: 300 * SECOND,
    };
    let out = run(loss, vec![job(8, 0, 100)]);
    let a = out[0].record.as_ref().unwrap();
    assert_eq!(out[0].fate, JobFate::Finished);
    assert_eq!((a.completion_failures(), a.submit_failures()), (0, 0));
    let run = a.run.as_ref().unwrap();
    assert_eq!(run.sites[..], [0]);
    // It ended at 100 s; the server heard it when the link came back.
    assert_eq!(run.end, Some(120 * SECOND));
}

#[test]
fn an_experiment_file_scripts_a_link_loss_and_the_job_is_placed_again() {
    let text = r#"
name = "link loss"
[[site]]
name = "s0"
processors = 32
[[site]]
name = "s1"
processors = 16
[workload]
kind = "seed003"
batch = "unordered"
size = 2
count = 1
runtime = "100s"
[sim]
[[sim.link_losses]]
site = "s0"
from = "10s"
to = "5m"
grace = "30s"
"#;
    let exp = Experiment::parse(text, Path::new("link.toml")).unwrap();
    let runs = exp.runs().unwrap();
    let out = run_one(&runs[0], Path::new(".")).unwrap();
    let r = out.jobs[0].record.as_ref().unwrap();
    assert_eq!(out.jobs[0].fate, JobFate::Finished);
    assert_eq!(r.completion_failures(), 1);
    let run = r.run.as_ref().unwrap();
    assert!(!run.sites.contains(&0), "{:?}", run.sites);
    assert_eq!(run.end, Some(140 * SECOND));
    let bad = text.replace("site = \"s0\"\nfrom", "site = \"s9\"\nfrom");
    let e = Experiment::parse(&bad, Path::new("link.toml")).unwrap_err();
    assert!(e.contains("sim.link_losses: no site named \"s9\""), "{e}");
}
