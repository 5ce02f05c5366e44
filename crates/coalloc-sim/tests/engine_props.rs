//! Properties of the simulator on random small workloads with local jobs, start latency,
//! injected failures and outages: no site is ever over-allocated, every job ends, a finished
//! job ran for exactly its runtime on one site per component after its submission, and the
//! same inputs give the same run.

use coalloc_core::model::{Component, Job, JobKind, Site, SECOND};
use coalloc_core::scheduler::sites::SiteFaultLimits;
use coalloc_core::scheduler::{QueueConfig, SchedulerConfig};
use coalloc_sim::engine::site::Local;
use coalloc_sim::engine::{simulate, Failures, JobFate, Outage, SimJob, SimParams, Workload};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    sites: Vec<u32>,
    jobs: Vec<(i64, Vec<u32>, i64)>,
    locals: Vec<Vec<(i64, u32, i64)>>,
    latency: i64,
    start_failure: f64,
    mtbf: Option<i64>,
    outage: Option<(usize, i64, i64)>,
    policy: &'static str,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (2usize..4).prop_flat_map(|n| {
        (
            prop::collection::vec(8u32..40, n),
            prop::collection::vec(
                (0i64..600, prop::collection::vec(1u32..12, 1..4), 1i64..300),
                1..25,
            ),
            prop::collection::vec(
                prop::collection::vec((0i64..600, 1u32..16, 1i64..200), 0..10),
                n,
            ),
            0i64..5,
            prop_oneof![Just(0.0), 0.0..0.3],
            prop_oneof![Just(None), (100i64..2000).prop_map(Some)],
            prop_oneof![Just(None), (0..n, 0i64..500, 1i64..300).prop_map(Some)],
            prop_oneof![Just("fcfs"), Just("fpfs"), Just("easy"), Just("sjf")],
            any::<u64>(),
        )
            .prop_map(
                |(sites, jobs, locals, latency, start_failure, mtbf, outage, policy, seed)| Case {
                    sites,
                    jobs,
                    locals,
                    latency,
                    start_failure,
                    mtbf,
                    outage,
                    policy,
                    seed,
                },
            )
    })
}

fn run(c: &Case) -> coalloc_sim::engine::Outcome {
    let sites: Vec<Site> = c
        .sites
        .iter()
        .enumerate()
        .map(|(i, &p)| Site::cluster(format!("s{i}"), p))
        .collect();
    let mut jobs: Vec<SimJob> = c
        .jobs
        .iter()
        .enumerate()
        .map(|(i, (submit, sizes, runtime))| {
            let mut job = Job::new(
                JobKind::Unordered,
                sizes.iter().map(|&n| Component::new(n)).collect(),
            );
            job.submit = Some(submit * SECOND);
            job.runtime_estimate = Some(runtime * SECOND);
            SimJob {
                tag: i as i64,
                job,
                runtime: runtime * SECOND,
            }
        })
        .collect();
    jobs.sort_by_key(|j| j.job.submit);
    let local = c
        .locals
        .iter()
        .map(|l| {
            let mut v: Vec<Local> = l
                .iter()
                .map(|&(s, size, r)| Local {
                    submit: s * SECOND,
                    size,
                    runtime: r * SECOND,
                })
                .collect();
            v.sort_by_key(|l| l.submit);
            v
        })
        .collect();
    let config = SchedulerConfig {
        queue: QueueConfig::from_name(c.policy).unwrap(),
        max_submit_failures: None,
        max_completion_failures: None,
        site_faults: SiteFaultLimits {
            submit_errors: 0,
            completion_errors: 0,
        },
        ..SchedulerConfig::default()
    };
    let params = SimParams {
        seed: c.seed,
        start_latency: c.latency * SECOND,
        sample_interval: Some(7 * SECOND),
        failures: Failures {
            start: c.start_failure,
            mtbf: c.mtbf.map(|m| m * SECOND),
            transfer: 0.0,
            lease: 0.0,
            outages: c
                .outage
                .map(|(site, from, len)| Outage {
                    site,
                    from: from * SECOND,
                    to: (from + len) * SECOND,
                })
                .into_iter()
                .collect(),
            link_losses: Vec::new(),
        },
        ..SimParams::default()
    };
    simulate(sites, config, &Workload { jobs, local }, &params).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn runs_are_sound_and_deterministic(c in case()) {
        let out = run(&c);
        for s in &out.samples {
            prop_assert_eq!(s.coalloc + s.others + s.idle, c.sites[s.site], "{:?}", s);
        }
        for j in &out.jobs {
            let largest = *c.sites.iter().max().unwrap();
            match &j.fate {
                JobFate::Finished => {
                    let r = j.record.as_ref().unwrap();
                    let (start, end) = (r.start().unwrap(), r.end().unwrap());
                    prop_assert!(start >= j.submit);
                    prop_assert_eq!(end - start, j.runtime);
                    prop_assert_eq!(r.sites().len(), j.components);
                }
                JobFate::Refused(_) => {}
                other => {
                    // Only a job no site combination can hold may stay unplaced.
                    let c_max = c.jobs[j.tag as usize].1.iter().max().copied().unwrap_or(0);
                    prop_assert!(c_max > largest || j.size > c.sites.iter().map(|&p| u64::from(p)).sum(),
                        "job {} ended {:?}", j.tag, other);
                }
            }
        }
        prop_assert_eq!(run(&c), out);
    }
}
