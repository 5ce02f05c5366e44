//! HSDF (seed 004 §IV-A 4) skips the passes that cannot start anything (a blocked head,
//! already tried at this epoch, that no job has overtaken yet) and is woken only when a job
//! overtakes it: the schedules must be those of the straightforward policy, which orders the
//! whole queue by estimated slowdown at every pass of every period. That reference is kept
//! here ([`Reference`], the policy as it was before the skipping) and both are driven through
//! the scheduler on random workloads (periods or none, ties in submission time and
//! prediction, co-allocated jobs over several sites): every job must start at the same time
//! on the same sites after the same number of placement tries, also when the scheduler is
//! saved and restored from a snapshot every few steps.

mod common;

use coalloc_core::model::*;
use coalloc_core::predictor::{wait_so_far, EstimatedSlowdown, RuntimePredictor};
use coalloc_core::queue::koala_c::KoalaCParams;
use coalloc_core::queue::tags::SplitMix64;
use coalloc_core::queue::{PassCtx, QueuePolicy, StartOptions};
use coalloc_core::scheduler::*;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

/// HSDF as it was: every pass at a multiple of the period orders the whole queue (ending at
/// once when the head was already tried at this epoch); never blocked.
#[derive(Debug)]
struct Reference {
    every: Option<Millis>,
    due: Option<Time>,
    default_runtime: Millis,
    predictor: RuntimePredictor,
    /// Job → (arrival, predicted runtime).
    queue: BTreeMap<JobId, (u64, Millis)>,
    next_seq: u64,
    failed: (u64, BTreeSet<JobId>),
}

fn ceil_multiple(t: Time, p: Millis) -> Time {
    t.div_euclid(p) * p + if t.rem_euclid(p) == 0 { 0 } else { p }
}

impl Reference {
    fn new(params: KoalaCParams) -> Reference {
        Reference {
            every: params.period.filter(|&p| p > 0),
            due: None,
            default_runtime: params.default_runtime,
            predictor: RuntimePredictor::new(),
            queue: BTreeMap::new(),
            next_seq: 0,
            failed: (0, BTreeSet::new()),
        }
    }
}

impl QueuePolicy for Reference {
    fn name(&self) -> &'static str {
        "hsdf"
    }

    fn push(&mut self, id: JobId, job: &Job, now: Time) {
        self.remove(id);
        self.failed.1.remove(&id);
        if let Some(p) = self.every {
            if self.queue.is_empty() && !matches!(self.due, Some(d) if d >= now) {
                self.due = Some(ceil_multiple(now, p));
            }
        }
        let predicted = self.predictor.predict(job, self.default_runtime);
        self.queue.insert(id, (self.next_seq, predicted));
        self.next_seq += 1;
    }

    fn remove(&mut self, id: JobId) {
        self.queue.remove(&id);
    }

    fn len(&self) -> usize {
        self.queue.len()
    }

    fn pass(&mut self, ctx: &mut dyn PassCtx) {
        let now = ctx.now();
        if self.queue.is_empty() {
            return;
        }
        if let Some(p) = self.every {
            let due = *self.due.get_or_insert(ceil_multiple(now, p));
            if now < due {
                return;
            }
            self.due = Some((now.div_euclid(p) + 1) * p);
        }
        let mut jobs: Vec<(Reverse<EstimatedSlowdown>, u64, JobId)> = self
            .queue
            .iter()
            .map(|(&id, &(seq, predicted))| {
                let wait = wait_so_far(now, ctx.record(id).submit);
                (Reverse(EstimatedSlowdown::new(wait, predicted)), seq, id)
            })
            .collect();
        let epoch = ctx.epoch();
        if self.failed.0 != epoch {
            self.failed = (epoch, BTreeSet::new());
        }
        jobs.sort();
        if self.failed.1.contains(&jobs[0].2) {
            return; // the head still does not fit, and the pass would end there
        }
        for (_, _, id) in jobs {
            let first_fit = StartOptions {
                fit: Some(coalloc_core::placement::Fit::First),
                ..StartOptions::default()
            };
            if !ctx.start_with(id, &first_fit) {
                let epoch = ctx.epoch();
                if self.failed.0 != epoch {
                    self.failed = (epoch, BTreeSet::new());
                }
                self.failed.1.insert(id);
                return;
            }
            self.queue.remove(&id);
        }
    }

    fn next_wakeup(&self) -> Option<Time> {
        self.due
            .filter(|_| self.every.is_some() && !self.queue.is_empty())
    }

    fn finished(&mut self, _id: JobId, job: &Job, runtime: Millis) {
        self.predictor.record(job.extra().user.as_deref(), runtime);
    }

    fn fit(&self) -> Option<coalloc_core::placement::Fit> {
        Some(coalloc_core::placement::Fit::First)
    }
}

/// One generated job: submission time, job, runtime.
type Gen = (Time, Job, Millis);

/// `unit`: submission times and runtimes are whole multiples of it (1 s makes exact ties
/// and crossings at event times common).
fn workload(rng: &mut SplitMix64, sizes: &[u32], unit: Millis) -> Vec<Gen> {
    let n = 5 + rng.below(60);
    let mut t = 0;
    let max = *sizes.iter().max().unwrap_or(&1);
    (0..n)
        .map(|_| {
            // Bursts of jobs at the same time, for ties.
            if rng.below(3) > 0 {
                t += rng.below(40_000) as Time / unit * unit;
            }
            let components = if sizes.len() > 1 && rng.below(4) == 0 {
                2
            } else {
                1
            };
            let kind = if components > 1 {
                JobKind::Unordered
            } else {
                JobKind::Total
            };
            let comps = (0..components)
                .map(|_| Component {
                    count: 1 + rng.below(u64::from(max)) as u32,
                    ..Component::default()
                })
                .collect();
            let mut job = Job::new(kind, comps);
            job.extra_mut().user = Some(format!("u{}", rng.below(4)).into());
            // Few distinct estimates, for ties in the prediction.
            job.runtime_estimate = match rng.below(3) {
                0 => None,
                _ => Some([10_000, 60_000, 300_000][rng.below(3) as usize]),
            };
            let runtime = (1 + rng.below(250_000) as Millis / unit) * unit;
            (t, job, runtime)
        })
        .collect()
}

/// What happened to each job: start time, sites, placement tries and failures.
type Outcome = BTreeMap<JobId, (Option<Time>, Vec<SiteId>, u32, u32)>;

/// How [`play`] makes its scheduler.
enum Policy {
    /// The policy the scheduler builds from this configuration; with `Some(k)`, the
    /// scheduler is saved and restored (through CBOR bytes) every `k` steps.
    Built(QueueConfig, Option<usize>),
    Given(Box<dyn QueuePolicy>),
}

/// Play `jobs` on sites of these sizes under `policy`: components start and become ready
/// at once and finish after the job's runtime.
fn play(policy: Policy, sizes: &[u32], jobs: &[Gen]) -> Outcome {
    let sites: Vec<Site> = sizes
        .iter()
        .enumerate()
        .map(|(i, &p)| Site::cluster(format!("s{i}"), p))
        .collect();
    let (mut s, restore_every, config) = match policy {
        Policy::Built(queue, every) => {
            let config = SchedulerConfig {
                queue,
                ..SchedulerConfig::default()
            };
            let s = Scheduler::new(config.clone(), sites.clone());
            (s, every, config)
        }
        Policy::Given(queue) => {
            let s = Scheduler::with_queue(SchedulerConfig::default(), sites.clone(), queue);
            (s, None, SchedulerConfig::default())
        }
    };
    let mut events: BTreeMap<(Time, u64), Event> = BTreeMap::new();
    let mut seq = 0u64;
    let mut runtime_of = BTreeMap::new();
    let mut ids = Vec::new();
    let mut starts: BTreeMap<JobId, (Time, Vec<SiteId>)> = BTreeMap::new();
    let mut next_job = 0;
    let mut now: Time = 0;
    for step in 1..100_000 {
        if restore_every.is_some_and(|k| step % k == 0) {
            let mut bytes = Vec::new();
            ciborium::into_writer(&s.snapshot().expect("saved"), &mut bytes).expect("written");
            let saved = ciborium::from_reader(&bytes[..]).expect("read back");
            let (restored, changes) =
                Scheduler::restore(config.clone(), &sites, saved).expect("restored");
            assert!(changes.is_empty(), "{changes:?}");
            s = restored;
        }
        let arrival = jobs.get(next_job).map(|g| g.0);
        let next = [arrival, events.keys().next().map(|k| k.0), s.next_wakeup()]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = next else { break };
        assert!(t >= now, "time goes back: {t} < {now}");
        now = t;
        let mut cmds = Vec::new();
        if arrival == Some(t) {
            let (_, job, runtime) = &jobs[next_job];
            // A job that could never run here is refused (the same in both runs).
            if let Ok(Reply::Submitted(id)) = s.handle(t, Event::Submit(Box::new(job.clone()))) {
                runtime_of.insert(id, *runtime);
                ids.push(id);
            }
            cmds.extend(common::drain(&mut s));
            next_job += 1;
        } else if events.keys().next().map(|k| k.0) == Some(t) {
            let (_, e) = events.pop_first().expect("an event");
            s.handle(t, e).expect("event accepted");
            cmds.extend(common::drain(&mut s));
        } else {
            s.handle(t, Event::Tick).expect("tick accepted");
            cmds.extend(common::drain(&mut s));
        }
        for c in cmds {
            if let Command::StartComponent(st) = c {
                let entry = starts.entry(st.job).or_insert((t, Vec::new()));
                entry.1.push(st.site);
                for e in [
                    Event::ComponentStarted { launch: st.launch },
                    Event::ComponentReady { launch: st.launch },
                ] {
                    events.insert((t, seq), e);
                    seq += 1;
                }
                let end = t + runtime_of[&st.job];
                events.insert((end, seq), Event::ComponentFinished { launch: st.launch });
                seq += 1;
            }
        }
    }
    ids.iter()
        .map(|&id| {
            let r = &s.job(id).expect("known job").record;
            let (t, sites) = starts.get(&id).cloned().unzip();
            (
                id,
                (
                    t,
                    sites.unwrap_or_default(),
                    r.placement_tries,
                    r.placement_failures,
                ),
            )
        })
        .collect()
}

#[test]
fn hsdf_schedules_as_ordering_the_whole_queue_every_period() {
    let mut blocked_passes = 0;
    for seed in 0..600u64 {
        let mut rng = SplitMix64::new(seed);
        let sites = 1 + rng.below(3) as usize;
        let sizes: Vec<u32> = (0..sites).map(|_| 2 + rng.below(7) as u32).collect();
        let unit = [1, 1_000][rng.below(2) as usize];
        let period = match rng.below(5) {
            0 => None,
            1 => Some(1 + rng.below(20_000) as Millis),
            2 => Some(1_000),
            _ => Some(30_000),
        };
        let params = KoalaCParams {
            period,
            default_runtime: [1, 45_000, 3_600_000][rng.below(3) as usize],
        };
        let jobs = workload(&mut rng, &sizes, unit);
        let new = play(
            Policy::Built(QueueConfig::Hsdf(params), None),
            &sizes,
            &jobs,
        );
        let old = play(
            Policy::Given(Box::new(Reference::new(params))),
            &sizes,
            &jobs,
        );
        assert_eq!(new, old, "seed {seed}: {sizes:?} {params:?}");
        assert!(
            new.values().all(|o| o.0.is_some()),
            "seed {seed}: every job starts"
        );
        blocked_passes += new.values().map(|o| o.3).sum::<u32>();
        // Saved and restored as it goes (the skipping state is partly rebuilt): one seed in
        // ten, as a snapshot of every few steps is slow.
        if seed % 10 != 0 {
            continue;
        }
        let every = 3 + rng.below(20) as usize;
        let restored = play(
            Policy::Built(QueueConfig::Hsdf(params), Some(every)),
            &sizes,
            &jobs,
        );
        assert_eq!(restored, old, "seed {seed}, restored every {every} steps");
    }
    // The workloads do block heads (else the skipping was never exercised).
    assert!(blocked_passes > 1_000, "{blocked_passes}");
}

#[test]
fn a_blocked_head_is_woken_when_a_job_overtakes_it() {
    let params = KoalaCParams {
        period: Some(30_000),
        default_runtime: 3_600_000,
    };
    let mut s = Scheduler::new(
        SchedulerConfig {
            queue: QueueConfig::Hsdf(params),
            ..SchedulerConfig::default()
        },
        vec![Site::cluster("s0", 4)],
    );
    let job = |count: u32, estimate: Millis| {
        let mut j = Job::new(
            JobKind::Total,
            vec![Component {
                count,
                ..Component::default()
            }],
        );
        j.runtime_estimate = Some(estimate);
        j
    };
    let (a, out) = common::submit(&mut s, 0, job(3, 1_000_000));
    assert_eq!(
        common::job_starts(&out),
        [(a, 0)],
        "0 is a multiple of the period"
    );
    // b (4 processors, predicted 100 s) waits for a; at 30 s it is tried and blocked.
    let (b, _) = common::submit(&mut s, 10_000, job(4, 100_000));
    s.handle(30_000, Event::Tick).unwrap();
    assert_eq!(s.job(b).unwrap().record.placement_failures, 1);
    // c (1 processor, predicted 10 s, submitted at 40 s) would fit, but b stays ahead until
    // (t - 40) / 10 > (t - 10) / 100, t > 43.33 s: woken at 60 s, not at every multiple.
    let (c, _) = common::submit(&mut s, 40_000, job(1, 10_000));
    assert_eq!(s.next_wakeup(), Some(60_000));
    s.handle(60_000, Event::Tick).unwrap();
    assert_eq!(common::job_starts(&common::drain(&mut s)), [(c, 0)]);
    // The same pass tried b again (it is behind c, not the head); nothing can overtake it
    // now, so no wakeup until something changes.
    assert_eq!(s.job(b).unwrap().record.placement_failures, 2);
    assert_eq!(s.next_wakeup(), None);
}
