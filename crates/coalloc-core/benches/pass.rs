//! One scheduling pass over 10,000 queued jobs on 100 sites.
//!
//! Setup (not measured): 100 sites of 64 processors, each filled by one running 64-processor
//! job of coalloc's, then 10,000 queued two-component unordered jobs (4–36 processors each,
//! a fixed pattern). The sites are marked unusable while the queue fills, so that the
//! submissions' own passes stay cheap, and usable again before measuring.
//!
//! Measured: one `handle(now, Event::SiteStatus { .. })` and the pass it triggers.
//!
//! - `none fit`: site 0 reports 1 or 0 idle processors (alternately, so that every report is
//!   a change): no queued job fits, the policy tries them all.
//! - `some fit`: site 0 reports all 64 processors idle: the first jobs in queue order that
//!   fit start there (about 3), the others are tried and do not fit. Between iterations (not
//!   measured) their launches fail, which sends them back to the queue's tail, and site 0
//!   goes back to 0 idle, so every iteration sees the same 10,000 queued jobs.
//!
//! Policies: `fpfs`, and `easy` when `QueueConfig::from_name("easy")` accepts it.
//!
//! `cargo bench -p coalloc-core --bench pass`; `COALLOC_BENCH_JOBS` and
//! `COALLOC_BENCH_SITES` change the sizes.

mod common;
use coalloc_core::model::{Component, Job, JobKind, Site, Time};
use coalloc_core::scheduler::sites::SiteFaultLimits;
use coalloc_core::scheduler::*;
use common::queued_job;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::time::{Duration, Instant};

const PROCESSORS: u32 = 64;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Bench {
    s: Scheduler,
    now: Time,
    sites: usize,
    /// The next `none fit` report: 1 or 0 idle.
    toggle: u32,
}

impl Bench {
    fn handle(&mut self, e: Event) {
        self.s.handle(self.now, e).expect("event accepted");
    }

    fn drain(&mut self) -> Vec<Command> {
        std::iter::from_fn(|| self.s.poll_command()).collect()
    }

    fn launches(cmds: &[Command]) -> Vec<LaunchId> {
        cmds.iter()
            .filter_map(|c| match c {
                Command::StartComponent(s) => Some(s.launch),
                _ => None,
            })
            .collect()
    }

    fn new(policy: &str, sites: usize, jobs: usize) -> Bench {
        let config = SchedulerConfig {
            queue: QueueConfig::from_name(policy).expect("a known policy"),
            // The `some fit` iterations abort jobs over and over: no limits.
            max_submit_failures: None,
            max_completion_failures: None,
            site_faults: SiteFaultLimits {
                submit_errors: 0,
                completion_errors: 0,
            },
            ..SchedulerConfig::default()
        };
        let list = (0..sites)
            .map(|i| Site::cluster(format!("s{i}"), PROCESSORS))
            .collect();
        let mut b = Bench {
            s: Scheduler::new(config, list),
            now: 0,
            sites,
            toggle: 0,
        };
        let started = Instant::now();
        // One running job fills each site.
        for _ in 0..sites {
            let filler = Job::new(
                JobKind::Total,
                vec![Component {
                    count: PROCESSORS,
                    ..Component::default()
                }],
            );
            b.handle(Event::Submit(Box::new(filler)));
        }
        let cmds = b.drain();
        let fillers = Self::launches(&cmds);
        assert_eq!(fillers.len(), sites, "one filler per site");
        for launch in fillers {
            b.handle(Event::ComponentStarted { launch });
            b.handle(Event::ComponentReady { launch });
        }
        for site in 0..sites {
            b.handle(Event::SetUsable {
                site,
                usable: false,
            });
        }
        for k in 0..jobs {
            b.handle(Event::Submit(Box::new(queued_job(k))));
        }
        for site in 0..sites {
            b.handle(Event::SetUsable { site, usable: true });
        }
        let cmds = b.drain();
        assert!(Self::launches(&cmds).is_empty(), "nothing fits yet");
        assert_eq!(b.s.queued(), jobs);
        eprintln!(
            "{policy}: {jobs} jobs queued on {sites} sites in {:.1?} (setup, not measured)",
            started.elapsed()
        );
        b
    }

    /// The measured event of `none fit`.
    fn none_fit(&mut self) -> Duration {
        self.now += 1;
        self.toggle ^= 1;
        let e = Event::SiteStatus {
            site: 0,
            idle: self.toggle,
            total: PROCESSORS,
            healthy: true,
            other: 0,
        };
        let t = Instant::now();
        self.s.handle(self.now, e).expect("accepted");
        let d = t.elapsed();
        let cmds = self.drain();
        debug_assert!(Self::launches(&cmds).is_empty());
        d
    }

    /// The measured event of `some fit`, then (not measured) the undoing of its starts.
    fn some_fit(&mut self) -> (Duration, usize) {
        self.now += 1;
        let e = Event::SiteStatus {
            site: 0,
            idle: PROCESSORS,
            total: PROCESSORS,
            healthy: true,
            other: 0,
        };
        let t = Instant::now();
        self.s.handle(self.now, e).expect("accepted");
        let d = t.elapsed();
        let cmds = self.drain();
        let launches = Self::launches(&cmds);
        // Undo: no site may take a job while the launches fail and their jobs re-queue.
        self.handle(Event::SetUsable {
            site: 0,
            usable: false,
        });
        for &launch in &launches {
            self.handle(Event::ComponentFailed {
                fault: Fault::Site,
                launch,
                reason: "bench".to_owned(),
            });
        }
        self.handle(Event::SiteStatus {
            site: 0,
            idle: 0,
            total: PROCESSORS,
            healthy: true,
            other: 0,
        });
        self.toggle = 0;
        self.handle(Event::SetUsable {
            site: 0,
            usable: true,
        });
        let cmds = self.drain();
        assert!(Self::launches(&cmds).is_empty(), "undone");
        (d, launches.len())
    }
}

fn pass(c: &mut Criterion) {
    let jobs = env("COALLOC_BENCH_JOBS", 10_000);
    let sites = env("COALLOC_BENCH_SITES", 100);
    let mut policies = vec!["fpfs"];
    if QueueConfig::from_name("easy").is_ok() {
        policies.push("easy");
    } else {
        eprintln!("no `easy` queue policy: its pass is not measured");
    }
    let mut group = c.benchmark_group(format!("pass, {jobs} queued jobs, {sites} sites"));
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    for policy in policies {
        let mut b = Bench::new(policy, sites, jobs);
        assert_eq!(b.sites, sites);
        group.bench_function(BenchmarkId::new(policy, "none fit"), |bench| {
            bench.iter_custom(|iters| (0..iters).map(|_| b.none_fit()).sum())
        });
        let mut started = 0;
        let mut tries = 0;
        group.bench_function(BenchmarkId::new(policy, "some fit"), |bench| {
            bench.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let (d, n) = b.some_fit();
                        started += n;
                        tries += 1;
                        d
                    })
                    .sum()
            })
        });
        eprintln!(
            "{policy}: `some fit` started {:.1} components per pass",
            started as f64 / tries.max(1) as f64
        );
        assert_eq!(b.s.queued(), jobs, "the queue is the same after the bench");
    }
    group.finish();
}

criterion_group!(benches, pass);
criterion_main!(benches);
