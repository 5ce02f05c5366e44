//! Cloud sites in the simulator (seed 004 §III-B, §V-A): lease latency, On-Demand leases and
//! releases, and the bill, checked against a hand computation.

use coalloc_core::model::{CloudLimits, Component, Job, JobKind, Site, MINUTE};
use coalloc_core::provisioning::{Bill, OnDemandParams, Provisioning};
use coalloc_core::queue::koala_c::KoalaCParams;
use coalloc_core::scheduler::{QueueConfig, SchedulerConfig};
use coalloc_sim::engine::{simulate, Failures, JobFate, SimJob, SimParams, Workload};
use coalloc_sim::metrics::Metrics;

const M: i64 = MINUTE;

fn job(count: u32, submit: i64, runtime: i64) -> SimJob {
    let mut job = Job::new(JobKind::Total, vec![Component::new(count)]);
    job.submit = Some(submit);
    SimJob {
        tag: submit,
        job,
        runtime,
    }
}

fn cloud(name: &str, min: u32, max: u32, latency: i64, price_micros: u64) -> Site {
    let limits = CloudLimits {
        vm_processors: 1,
        min_vms: min,
        max_vms: max,
        lease_latency: latency,
        price_micros_per_vm_hour: price_micros,
    };
    Site::cloud(name, limits)
}

fn ff(provisioning: Provisioning) -> SchedulerConfig {
    SchedulerConfig {
        queue: QueueConfig::Ff(KoalaCParams::default()),
        provisioning,
        ..SchedulerConfig::default()
    }
}

/// The hand computation. A 2-processor cluster and a public cloud of one-processor VMs (at
/// most 4, none kept, 2 min lease latency, $0.065 per VM-hour); FF, On-Demand with a 1 min
/// release margin.
///
/// - J1 (2 processors, 30 min) arrives at 0 and takes the cluster until 30 min.
/// - J2 (3 processors, 90 min) arrives at 0: nothing fits, so VMs 1–3 are leased at 0, run
///   at 2 min, and J2 runs on them from 2 to 92 min.
/// - J3 (1 processor, 5 min) arrives at 10 min: the cluster and VMs 1–3 are busy, so VM 4 is
///   leased at 10, runs at 12, and J3 runs from 12 to 17 min.
/// - VM 4 is idle from 17 min; its first paid hour (12–72 min) has a minute left at 71 min:
///   released at 71 min, billed 59 min → 1 VM-hour.
/// - VMs 1–3 are idle from 92 min, inside their second hour (62–122 min): released at
///   121 min, billed 119 min → 2 VM-hours each, 6 in all.
///
/// Total: 7 VM-hours × $0.065 = $0.455.
#[test]
fn the_bill_of_a_small_run_matches_the_hand_computation() {
    let sites = vec![Site::cluster("c", 2), cloud("ec2", 0, 4, 2 * M, 65_000)];
    let work = Workload {
        jobs: vec![job(2, 0, 30 * M), job(3, 0, 90 * M), job(1, 10 * M, 5 * M)],
        local: vec![],
    };
    let out = simulate(
        sites,
        ff(Provisioning::OnDemand(OnDemandParams::default())),
        &work,
        &SimParams::default(),
    )
    .unwrap();
    let times: Vec<(i64, i64, usize)> = out
        .jobs
        .iter()
        .map(|j| {
            assert_eq!(j.fate, JobFate::Finished);
            let r = j.record.as_ref().unwrap();
            (r.start().unwrap() / M, r.end().unwrap() / M, r.sites()[0])
        })
        .collect();
    assert_eq!(times, [(0, 30, 0), (2, 92, 1), (12, 17, 1)]);
    let c = out.clouds[1];
    assert_eq!((c.leases, c.lease_failures, c.peak_vms), (4, 0, 4));
    assert_eq!(c.bill, Bill::of(7, 65_000).into());
    assert_eq!(out.end, 121 * M, "the last event is the last release");
    let m = Metrics::of(&out);
    assert!((m.cost - 0.455).abs() < 1e-9, "{}", m.cost);
    assert_eq!((m.vm_hours, m.paid_vm_hours, m.leases), (7, 7, 4));
}

/// A free private cloud with one VM kept and a 10 min idle time: the kept VM is leased at 0
/// (up at 1 min); J1 (2 processors, 20 min) arrives at 5 min, needs one more VM, leased at
/// 5 (up at 6); J1 runs 6–26 min. At 36 min both VMs have been idle 10 min and one goes (the
/// minimum stays) — the end of the run. VM-hours 1 + 1, cost 0.
#[test]
fn a_free_cloud_costs_nothing_and_keeps_its_minimum() {
    let out = simulate(
        vec![cloud("one", 1, 4, M, 0)],
        ff(Provisioning::OnDemand(OnDemandParams {
            idle_time: 10 * M,
            ..OnDemandParams::default()
        })),
        &Workload {
            jobs: vec![job(2, 5 * M, 20 * M)],
            local: vec![],
        },
        &SimParams::default(),
    )
    .unwrap();
    let r = out.jobs[0].record.as_ref().unwrap();
    assert_eq!((r.start(), r.end()), (Some(6 * M), Some(26 * M)));
    assert_eq!(out.end, 36 * M);
    assert_eq!(out.clouds[0].bill, Bill::of(2, 0).into());
    assert_eq!(Metrics::of(&out).cost, 0.0);
}

#[test]
fn failed_leases_are_retried_and_every_job_still_runs() {
    let work = Workload {
        jobs: (0..30).map(|i| job(2, i * 5 * M, 20 * M)).collect(),
        local: vec![],
    };
    let params = SimParams {
        failures: Failures {
            lease: 0.3,
            ..Failures::default()
        },
        ..SimParams::default()
    };
    let run = || {
        simulate(
            vec![Site::cluster("c", 2), cloud("ec2", 0, 8, M, 65_000)],
            ff(Provisioning::OnDemand(OnDemandParams::default())),
            &work,
            &params,
        )
        .unwrap()
    };
    let out = run();
    assert!(out.jobs.iter().all(|j| j.fate == JobFate::Finished));
    let c = out.clouds[1];
    assert!(c.lease_failures > 0 && c.leases > c.lease_failures, "{c:?}");
    assert_eq!(run(), out, "the same seed gives the same run");
}

#[test]
fn static_clouds_are_full_from_the_start_and_free() {
    let out = simulate(
        vec![cloud("ec2", 0, 4, 2 * M, 65_000)],
        ff(Provisioning::Static),
        &Workload {
            jobs: vec![job(4, 0, 10 * M)],
            local: vec![],
        },
        &SimParams::default(),
    )
    .unwrap();
    assert_eq!(out.jobs[0].record.as_ref().unwrap().start(), Some(0));
    assert_eq!(Metrics::of(&out).cost, 0.0);
}
