//! On-Demand plans made once (`scheduler/clouds.rs`, "Plans made once"; seed 004 §III-B,
//! §IV-A): a scheduler that reuses a demand plan while its inputs are unchanged decides
//! exactly what one that makes every plan afresh decides. Random workloads on two clusters,
//! a free private cloud and a paid public cloud, every period-driven policy of seed 004 and
//! FCFS, driven event by event on virtual time; every command with its time, and the bills,
//! must be equal.

use coalloc_core::model::*;
use coalloc_core::provisioning::{Bill, OnDemandParams, Provisioning, VmId};
use coalloc_core::queue::koala_c::KoalaCParams;
use coalloc_core::queue::tags::TagsSetsParams;
use coalloc_core::scheduler::*;
use std::collections::BTreeMap;

const M: Millis = MINUTE;

/// A small deterministic generator (SplitMix64), so that the test needs no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// `(submit, processors, runtime)` per job: bursts of arrivals, 1–20 processors, runtimes
/// from seconds to hours.
fn workload(seed: u64, jobs: usize) -> Vec<(Time, u32, Millis)> {
    let mut r = Rng(seed);
    let mut t = 0;
    (0..jobs)
        .map(|_| {
            t += if r.below(4) == 0 {
                r.below(90 * M as u64) as Time
            } else {
                r.below(2 * M as u64) as Time
            };
            let most = if r.below(3) == 0 { 20 } else { 6 };
            let size = 1 + r.below(most) as u32;
            let runtime = match r.below(3) {
                0 => 1_000 + r.below(5 * M as u64) as Millis,
                1 => 5 * M + r.below(40 * M as u64) as Millis,
                _ => 45 * M + r.below(4 * HOUR as u64) as Millis,
            };
            (t, size, runtime)
        })
        .collect()
}

fn sites() -> Vec<Site> {
    let cloud = |name: &str, min, max, latency, price| {
        Site::cloud(
            name,
            CloudLimits {
                vm_processors: 1,
                min_vms: min,
                max_vms: max,
                lease_latency: latency,
                price_micros_per_vm_hour: price,
            },
        )
    };
    vec![
        Site::cluster("c1", 16),
        Site::cluster("c2", 16),
        cloud("private", 2, 12, M, 0),
        cloud("public", 0, 24, 2 * M, 65_000),
    ]
}

/// What a run decided: every command with its time, and the bills at the end; and how many
/// demand plans it made afresh.
#[derive(Debug)]
struct Run {
    commands: Vec<(Time, String)>,
    bills: Vec<Bill>,
    end: Time,
    plans: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Submit(usize),
    Ready(LaunchId),
    Finish(LaunchId),
    VmUp(VmId),
    VmGone(VmId),
    CancelTaken(LaunchId),
}

/// Run the workload under `queue` with On-Demand provisioning; `reuse` as the scheduler's
/// plan reuse.
fn run(queue: QueueConfig, work: &[(Time, u32, Millis)], reuse: bool) -> Run {
    let config = SchedulerConfig {
        queue,
        provisioning: Provisioning::OnDemand(OnDemandParams {
            idle_time: 5 * M,
            ..OnDemandParams::default()
        }),
        ..SchedulerConfig::default()
    };
    let sites = sites();
    let latency: Vec<Millis> = sites
        .iter()
        .map(|s| s.cloud.as_ref().map_or(0, |c| c.lease_latency))
        .collect();
    let mut s = Scheduler::new(config, sites);
    s.set_plan_reuse(reuse);
    let mut events: BTreeMap<(Time, u64), Ev> = BTreeMap::new();
    let mut seq = 0u64;
    let mut push = |events: &mut BTreeMap<(Time, u64), Ev>, t: Time, e: Ev| {
        seq += 1;
        events.insert((t, seq), e);
    };
    for (i, &(t, _, _)) in work.iter().enumerate() {
        push(&mut events, t, Ev::Submit(i));
    }
    // Launch → the job's index; the launches still running.
    let mut launch_job: BTreeMap<LaunchId, usize> = BTreeMap::new();
    let mut job_launch: BTreeMap<JobId, LaunchId> = BTreeMap::new();
    let mut out = Run {
        commands: Vec::new(),
        bills: Vec::new(),
        end: 0,
        plans: 0,
    };
    for _ in 0..2_000_000 {
        let next_event = events.keys().next().map(|&(t, _)| t);
        let t = match (next_event, s.next_wakeup()) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => break,
        };
        let mut batch = Vec::new();
        while let Some(entry) = events.first_entry() {
            if entry.key().0 != t {
                break;
            }
            let e = entry.remove();
            let event = match e {
                Ev::Submit(i) => {
                    let (_, count, runtime) = work[i];
                    let mut job = Job::new(JobKind::Total, vec![Component::new(count)]);
                    job.runtime_estimate = Some(runtime + (i as Millis % 7) * M);
                    Event::Submit(Box::new(job))
                }
                Ev::Ready(launch) => {
                    batch.push(Event::ComponentStarted { launch });
                    Event::ComponentReady { launch }
                }
                Ev::Finish(launch) => {
                    if launch_job.remove(&launch).is_none() {
                        continue; // killed meanwhile
                    }
                    Event::ComponentFinished { launch }
                }
                Ev::VmUp(vm) => Event::VmLeased { vm },
                Ev::VmGone(vm) => Event::VmReleased { vm },
                Ev::CancelTaken(launch) => Event::CancelTaken { launch },
            };
            batch.push(event);
        }
        if batch.is_empty() {
            batch.push(Event::Tick);
        }
        for reply in s.handle_all(t, batch) {
            reply.expect("event accepted");
        }
        out.end = t;
        while let Some(c) = s.poll_command() {
            match &c {
                Command::StartComponent(st) => {
                    let i = (st.job - 1) as usize;
                    launch_job.insert(st.launch, i);
                    job_launch.insert(st.job, st.launch);
                    push(&mut events, t, Ev::Ready(st.launch));
                }
                Command::ReleaseBarrier { job } => {
                    let launch = job_launch[job];
                    let runtime = work[launch_job[&launch]].2;
                    push(&mut events, t + runtime, Ev::Finish(launch));
                }
                Command::CancelComponent { launch, .. } => {
                    launch_job.remove(launch);
                    // The cancel takes effect at once (the core's `draining`).
                    if s.draining().get(*launch).is_some() {
                        push(&mut events, t, Ev::CancelTaken(*launch));
                    }
                }
                Command::LeaseVm { site, vm } => {
                    push(&mut events, t + latency[*site], Ev::VmUp(*vm))
                }
                Command::ReleaseVm { vm, .. } => push(&mut events, t, Ev::VmGone(*vm)),
                _ => {}
            }
            out.commands.push((t, format!("{c:?}")));
        }
    }
    out.bills = s.bills(out.end);
    out.plans = s.plans_made();
    out
}

fn policies() -> Vec<(&'static str, QueueConfig)> {
    let k = KoalaCParams {
        period: Some(30 * SECOND),
        ..KoalaCParams::default()
    };
    vec![
        ("ff", QueueConfig::Ff(k)),
        ("rr", QueueConfig::Rr(k)),
        ("sjf", QueueConfig::Sjf(k)),
        ("sjf-ideal", QueueConfig::SjfIdeal(k)),
        ("hsdf", QueueConfig::Hsdf(k)),
        (
            "tags-sets",
            QueueConfig::TagsSets(TagsSetsParams {
                sets: vec![vec![0, 1, 2, 3], vec![1, 2, 3]],
                limits: vec![20 * M],
                period: Some(30 * SECOND),
            }),
        ),
        ("fcfs", QueueConfig::Fcfs),
    ]
}

#[test]
fn reused_plans_give_the_same_schedules_leases_releases_and_bills() {
    for seed in [1, 2] {
        let work = workload(seed, 200);
        for (name, queue) in policies() {
            let fresh = run(queue.clone(), &work, false);
            let reused = run(queue, &work, true);
            let count = |what: &str| {
                fresh
                    .commands
                    .iter()
                    .filter(|(_, c)| c.starts_with(what))
                    .count()
            };
            // The runs are not trivial: every job ran, VMs came and went, money was spent.
            assert_eq!(count("JobFinished"), work.len(), "{name}, seed {seed}");
            assert!(count("LeaseVm") > 10 && count("ReleaseVm") > 10, "{name}");
            assert!(fresh.bills[3].cost_micros > 0, "{name}");
            assert_eq!(
                fresh.commands.len(),
                reused.commands.len(),
                "{name}, seed {seed}"
            );
            for (a, b) in fresh.commands.iter().zip(&reused.commands) {
                assert_eq!(a, b, "{name}, seed {seed}: the first command that differs");
            }
            assert_eq!(
                (&fresh.commands, &fresh.bills, fresh.end),
                (&reused.commands, &reused.bills, reused.end),
                "{name}, seed {seed}"
            );
            println!(
                "{name}, seed {seed}: {} plans with reuse, {} without",
                reused.plans, fresh.plans
            );
            // Reuse happened: fewer plans made afresh, but under FCFS (no demand of its own,
            // so never reused). HSDF is never blocked, so it reuses only between passes.
            let (r, f) = (reused.plans, fresh.plans);
            if name == "fcfs" {
                assert_eq!(r, f, "{name}");
            } else {
                assert!(
                    r < f,
                    "{name}, seed {seed}: {r} plans made with reuse, {f} without"
                );
            }
        }
    }
}
