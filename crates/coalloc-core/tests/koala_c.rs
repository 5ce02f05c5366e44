//! KOALA-C's queue policies (seed 004 §IV): FF, RR, SJF, SJF-ideal, HSDF, TAGS-chain and
//! TAGS-sets, driven event by event through the scheduler.

mod common;

use coalloc_core::model::*;
use coalloc_core::predictor::RuntimePredictor;
use coalloc_core::queue::koala_c::KoalaCParams;
use coalloc_core::queue::tags::{ChainDispatch, SplitMix64, TagsChainParams, TagsSetsParams};
use coalloc_core::scheduler::*;
use common::{drain, failure, job_starts as starts, take_cancels};
use std::collections::BTreeMap;

/// A one-site job (seed 004's jobs; our `JobKind::Total`).
fn job(count: u32, user: &str, estimate: Option<Millis>) -> Job {
    let mut j = Job::new(
        JobKind::Total,
        vec![Component {
            count,
            ..Component::default()
        }],
    );
    j.extra_mut().user = Some(user.into());
    j.runtime_estimate = estimate;
    j
}

struct H {
    s: Scheduler,
    /// The current launch of every job.
    launches: BTreeMap<JobId, LaunchId>,
}

impl H {
    fn new(queue: QueueConfig, sizes: &[u32]) -> H {
        let config = SchedulerConfig {
            queue,
            ..SchedulerConfig::default()
        };
        let sites = sizes
            .iter()
            .enumerate()
            .map(|(i, &p)| Site::cluster(format!("s{i}"), p))
            .collect();
        H {
            s: Scheduler::new(config, sites),
            launches: BTreeMap::new(),
        }
    }

    /// The commands so far, every draining launch's cancel taken at once at `t`.
    fn drain(&mut self, t: Time) -> Vec<Command> {
        let cmds = drain(&mut self.s);
        let cmds = take_cancels(&mut self.s, t, cmds);
        for c in &cmds {
            if let Command::StartComponent(s) = c {
                self.launches.insert(s.job, s.launch);
            }
        }
        cmds
    }

    fn at(&mut self, t: Time, e: Event) -> Vec<Command> {
        self.s.handle(t, e).expect("event accepted");
        self.drain(t)
    }

    fn submit(&mut self, t: Time, job: Job) -> (JobId, Vec<Command>) {
        let id = match self.s.handle(t, Event::Submit(Box::new(job))) {
            Ok(Reply::Submitted(id)) => id,
            other => panic!("{other:?}"),
        };
        (id, self.drain(t))
    }

    /// The job's component runs and reaches the barrier: the job commits (starts) at `t`.
    fn commit(&mut self, t: Time, id: JobId) -> Vec<Command> {
        let launch = self.launches[&id];
        let mut out = self.at(t, Event::ComponentStarted { launch });
        out.extend(self.at(t, Event::ComponentReady { launch }));
        assert!(
            out.iter()
                .any(|c| matches!(c, Command::ReleaseBarrier { job } if *job == id)),
            "job {id} commits at {t}"
        );
        out
    }

    fn finish(&mut self, t: Time, id: JobId) -> Vec<Command> {
        let launch = self.launches[&id];
        let out = self.at(t, Event::ComponentFinished { launch });
        assert!(out
            .iter()
            .any(|c| matches!(c, Command::JobFinished { job, .. } if *job == id)));
        out
    }

    fn record(&self, id: JobId) -> &JobRecord {
        &self.s.job(id).expect("known job").record
    }
}

fn params() -> KoalaCParams {
    KoalaCParams::default()
}

#[test]
fn ff_takes_the_first_site_with_room_and_rr_goes_round() {
    let run = |queue: QueueConfig| {
        let mut h = H::new(queue, &[4, 1, 4]);
        let mut all = Vec::new();
        for size in [1, 2, 1, 1, 1] {
            all.extend(starts(&h.submit(0, job(size, "u", None)).1));
        }
        // Neither policy skips: the 4-processor job fits nowhere, so the 1-processor job
        // behind it waits although a site has room.
        let (big, out) = h.submit(0, job(4, "u", None));
        assert!(starts(&out).is_empty());
        let (small, out) = h.submit(0, job(1, "u", None));
        assert!(starts(&out).is_empty());
        assert_eq!(h.s.queued(), 2);
        // One placement try per pass on the blocked head, none on the job behind it.
        assert_eq!(h.record(big).placement_failures, 2);
        assert_eq!(h.record(small).placement_tries, 0);
        (h.s.policy(), all)
    };
    assert_eq!(
        run(QueueConfig::Ff(params())),
        ("ff", vec![(1, 0), (2, 0), (3, 0), (4, 1), (5, 2)])
    );
    // RR: after site 0 the 2-processor job skips site 1 (1 processor) for site 2; then
    // round again from site 0.
    assert_eq!(
        run(QueueConfig::Rr(params())),
        ("rr", vec![(1, 0), (2, 2), (3, 0), (4, 1), (5, 2)])
    );
}

#[test]
fn the_predictor_takes_the_mean_of_the_users_last_two_runtimes() {
    let mut p = RuntimePredictor::new();
    let alice = job(1, "alice", Some(77));
    assert_eq!(
        p.predict(&alice, 1_000),
        77,
        "no history: the job's estimate"
    );
    assert_eq!(
        p.predict(&job(1, "alice", None), 1_000),
        1_000,
        "then the default"
    );
    p.record(Some("alice"), 1_000);
    assert_eq!(p.predict(&alice, 1_000), 1_000, "one runtime: that one");
    p.record(Some("alice"), 3_001);
    assert_eq!(p.predict(&alice, 1_000), 2_000, "the mean, rounded down");
    p.record(Some("alice"), 5_000);
    assert_eq!(p.predict(&alice, 1_000), 4_000, "only the last two count");
    assert_eq!(p.from_history(Some("bob")), None);
}

/// Runs the same workload under SJF or SJF-ideal and returns the order in which the three
/// waiting jobs start.
fn sjf_order(queue: QueueConfig) -> Vec<JobId> {
    let mut h = H::new(queue, &[1]);
    // History: alice ran 1000 and 3000 ms (mean 2000), bob 500 ms.
    let mut t = 0;
    for (user, runtime) in [("alice", 1_000), ("alice", 3_000), ("bob", 500)] {
        let (id, out) = h.submit(t, job(1, user, None));
        assert_eq!(starts(&out), [(id, 0)]);
        h.commit(t, id);
        t += runtime;
        h.finish(t, id);
    }
    assert_eq!(t, 4_500);
    let (blocker, _) = h.submit(t, job(1, "carol", None));
    h.commit(t, blocker);
    // The estimates are the true runtimes (what SJF-ideal sees).
    let (a, _) = h.submit(5_000, job(1, "alice", Some(100)));
    let (b, _) = h.submit(5_001, job(1, "bob", Some(5_000)));
    let (c, _) = h.submit(5_002, job(1, "dave", Some(300)));
    assert_eq!((a, b, c), (5, 6, 7));
    assert_eq!(h.s.queued(), 3);
    let mut order = Vec::new();
    let mut out = h.finish(6_000, blocker);
    let mut t = 6_000;
    for _ in 0..3 {
        let st = starts(&out);
        assert_eq!(st.len(), 1);
        order.push(st[0].0);
        h.commit(t, st[0].0);
        t += 10;
        out = h.finish(t, st[0].0);
    }
    order
}

#[test]
fn sjf_orders_by_predicted_runtime_and_sjf_ideal_by_the_true_one() {
    // SJF: dave 300 (no history: his estimate), bob 500 (his one runtime), alice 2000 (the
    // mean of her last two) — alice's estimate of 100 is not used.
    assert_eq!(sjf_order(QueueConfig::Sjf(params())), [7, 6, 5]);
    // SJF-ideal: the true runtimes 100, 300, 5000.
    assert_eq!(sjf_order(QueueConfig::SjfIdeal(params())), [5, 7, 6]);
}

#[test]
fn hsdf_starts_the_highest_estimated_slowdown_first() {
    let mut h = H::new(QueueConfig::Hsdf(params()), &[1]);
    let (blocker, _) = h.submit(0, job(1, "b", None));
    h.commit(0, blocker);
    let (x, _) = h.submit(0, job(1, "x", Some(1_000)));
    let (z, _) = h.submit(200, job(1, "z", Some(400)));
    let (y, _) = h.submit(950, job(1, "y", Some(100)));
    // At 1000: x (1000 + 1000) / 1000 = 2, z (800 + 400) / 400 = 3, y (50 + 100) / 100 = 1.5.
    let out = h.finish(1_000, blocker);
    assert_eq!(starts(&out), [(z, 0)]);
    h.commit(1_000, z);
    // At 1400: x (1400 + 1000) / 1000 = 2.4, y (450 + 100) / 100 = 5.5.
    let out = h.finish(1_400, z);
    assert_eq!(starts(&out), [(y, 0)]);
    h.commit(1_400, y);
    let out = h.finish(1_500, y);
    assert_eq!(starts(&out), [(x, 0)]);
}

#[test]
fn tags_sets_kills_at_the_limit_and_restarts_in_the_next_set() {
    let sets = TagsSetsParams {
        sets: vec![vec![0, 1, 2], vec![1, 2]],
        limits: vec![1_000],
        period: None,
    };
    sets.check_sites(3).unwrap();
    let mut h = H::new(QueueConfig::TagsSets(sets), &[2, 2, 2]);
    assert_eq!(h.s.policy(), "tags-sets");
    let (id, out) = h.submit(0, job(2, "u", None));
    assert_eq!(starts(&out), [(id, 0)], "set 1, first fit: site 0");
    let first = h.launches[&id];
    h.commit(10, id);
    assert_eq!(h.s.next_wakeup(), Some(1_010), "start + set 1's limit");
    assert!(h.at(1_009, Event::Tick).is_empty());
    let out = h.at(1_010, Event::Tick);
    assert_eq!(
        out[0],
        Command::CancelComponent {
            launch: first,
            job: id,
            component: 0,
            site: 0
        }
    );
    assert!(out.iter().any(|c| matches!(
        c,
        Command::Notify(Notice::Requeued { job, reason })
            if *job == id && reason.contains("runtime limit")
    )));
    assert_eq!(h.record(id).limit_kills(), 1);
    // Set 2 has no site 0: first fit in {1, 2} is site 1, from scratch.
    assert_eq!(starts(&out), [(id, 1)]);
    assert_ne!(h.launches[&id], first);
    h.commit(1_020, id);
    assert_eq!(h.s.next_wakeup(), None, "the last set has no limit");
    let out = h.finish(5_000, id);
    let record = out
        .iter()
        .find_map(|c| match c {
            Command::JobFinished { record, .. } => Some(record.clone()),
            _ => None,
        })
        .expect("finished");
    assert_eq!(
        (
            record.start(),
            record.end(),
            record.limit_kills(),
            record.sites().to_vec()
        ),
        (Some(1_020), Some(5_000), 1, vec![1])
    );
}

/// TAGS is told of finished jobs, not of cancelled or failed ones: it looks for those when a
/// job ended other than by finishing (`PassCtx::unfinished_ends`), in the pass of the same
/// instant, before the core forgets them (a look later would find no record).
#[test]
fn tags_forgets_running_jobs_that_were_cancelled() {
    let sets = TagsSetsParams {
        sets: vec![vec![0, 1]],
        limits: vec![],
        period: None,
    };
    // As the simulator runs it: an ended job is forgotten after its instant.
    let config = SchedulerConfig {
        queue: QueueConfig::TagsSets(sets),
        forget_ended: true,
        ..SchedulerConfig::default()
    };
    let mut h = H {
        s: Scheduler::new(config, vec![Site::cluster("s0", 2), Site::cluster("s1", 2)]),
        launches: BTreeMap::new(),
    };
    let (a, out) = h.submit(0, job(2, "u", None));
    assert_eq!(starts(&out), [(a, 0)]);
    let (b, out) = h.submit(0, job(2, "u", None));
    assert_eq!(starts(&out), [(b, 1)]);
    h.commit(10, a);
    h.commit(10, b);
    let (c, out) = h.submit(20, job(2, "u", None));
    assert!(starts(&out).is_empty(), "both sites are full");
    let out = h.at(30, Event::Cancel { job: a });
    assert_eq!(starts(&out), [(c, 0)], "a's site is free for c");
    assert!(h.s.job(a).is_none(), "the core forgot a");
    // Another end of the kind TAGS is not told of: its look must not meet `a` again.
    let out = h.at(40, Event::Cancel { job: b });
    assert!(out
        .iter()
        .any(|c| matches!(c, Command::JobFailed { job, .. } if *job == b)));
    h.commit(50, c);
    h.finish(60, c);
    assert_eq!(h.s.queued(), 0);
}

#[test]
fn tags_sets_scans_set_1_before_the_jobs_killed_into_set_2() {
    let mut h = H::new(two_decreasing_sets(), &[1, 1]);
    let (j1, _) = h.submit(0, job(1, "u", None));
    let (j2, _) = h.submit(0, job(1, "u", None));
    h.commit(0, j1);
    h.commit(0, j2);
    let (j3, out) = h.submit(5, job(1, "u", None));
    assert!(starts(&out).is_empty());
    // Both reach set 1's limit; the waiting set-1 job goes first, then the first killed job
    // gets set 2's only site, and the second waits for it.
    let out = h.at(1_000, Event::Tick);
    assert_eq!(starts(&out), [(j3, 0), (j1, 1)]);
    assert_eq!(h.s.queued(), 1);
    h.commit(1_000, j1);
    let out = h.finish(1_500, j1);
    assert_eq!(starts(&out), [(j2, 1)]);
    assert_eq!(h.record(j2).limit_kills(), 1);
}

/// TAGS-chain over sites 0→1 and 2→3, a limit of 1 s on the first, round-robin dispatch.
/// TAGS-sets on {s0, s1} (limit 1 s), then {s1}.
fn two_decreasing_sets() -> QueueConfig {
    QueueConfig::TagsSets(TagsSetsParams {
        sets: vec![vec![0, 1], vec![1]],
        limits: vec![1_000],
        period: None,
    })
}

fn two_chains_round_robin() -> QueueConfig {
    QueueConfig::TagsChain(TagsChainParams {
        chains: vec![vec![0, 1], vec![2, 3]],
        limits: vec![1_000],
        dispatch: ChainDispatch::RoundRobin,
        period: None,
    })
}

#[test]
fn tags_chain_dispatches_round_robin_and_moves_killed_jobs_down_their_chain() {
    let mut h = H::new(two_chains_round_robin(), &[1, 1, 1, 1]);
    let mut st = Vec::new();
    for _ in 0..4 {
        st.extend(starts(&h.submit(0, job(1, "u", None)).1));
    }
    // Jobs 1 and 3 go to chain 1, jobs 2 and 4 to chain 2; each waits for its chain's first
    // site.
    assert_eq!(st, [(1, 0), (2, 2)]);
    h.commit(0, 1);
    h.commit(0, 2);
    assert_eq!(h.s.next_wakeup(), Some(1_000));
    let out = h.at(1_000, Event::Tick);
    let cancelled: Vec<(JobId, SiteId)> = out
        .iter()
        .filter_map(|c| match c {
            Command::CancelComponent { job, site, .. } => Some((*job, *site)),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled, [(1, 0), (2, 2)]);
    // First sites first, then the killed jobs on the second site of their own chain.
    assert_eq!(starts(&out), [(3, 0), (4, 2), (1, 1), (2, 3)]);
    assert_eq!(
        (h.record(1).limit_kills(), h.record(2).limit_kills()),
        (1, 1)
    );
    h.commit(1_000, 1);
    h.commit(1_000, 3);
    // Job 3 has chain 1's first limit; job 1, on the last site, has none.
    assert_eq!(h.s.next_wakeup(), Some(2_000));
    h.finish(9_000, 1);
    assert_eq!(h.record(1).limit_kills(), 1);
}

/// A job that cannot fit a chain's first site even when it is empty would wait there for
/// good, holding up the jobs behind it: submission refuses it, naming the sites, as it
/// refuses a job no site can hold. Tags-sets enters at its first set.
#[test]
fn tags_refuses_a_job_that_cannot_fit_where_new_jobs_enter() {
    let mut h = H::new(two_chains_round_robin(), &[4, 16, 8, 16]);
    let refused = h.s.handle(0, Event::Submit(Box::new(job(8, "u", None))));
    match refused {
        Err(Rejected::Invalid(m)) => assert!(
            m.contains("where the queue policy puts new jobs (s0)"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    // Small enough for both chains' first sites: taken, and started on chain 1's.
    let (id, out) = h.submit(0, job(4, "u", None));
    assert_eq!(starts(&out), [(id, 0)]);
    let mut h = H::new(two_decreasing_sets(), &[4, 16]);
    let (id, out) = h.submit(0, job(16, "u", None));
    assert_eq!(starts(&out), [(id, 1)]);
}

/// A job killed at its level's limit skips the later levels whose sites could never hold
/// it, to the first that could; when none could, it fails with the reason instead of
/// waiting for ever at the head of its next level's queue, in front of every job there.
#[test]
fn a_killed_tags_job_skips_levels_too_small_for_it_or_fails() {
    // One chain: s0 (8, limit 1 s), s1 (4, limit 2 s), s2 (8).
    let chain = || {
        QueueConfig::TagsChain(TagsChainParams {
            chains: vec![vec![0, 1, 2]],
            limits: vec![1_000, 2_000],
            dispatch: ChainDispatch::RoundRobin,
            period: None,
        })
    };
    let mut h = H::new(chain(), &[8, 4, 8]);
    let (id, out) = h.submit(0, job(6, "u", None));
    assert_eq!(starts(&out), [(id, 0)]);
    h.commit(10, id);
    let out = h.at(1_010, Event::Tick);
    assert_eq!(h.record(id).limit_kills(), 1);
    assert_eq!(starts(&out), [(id, 2)], "past s1, too small, to s2");
    // A job of 4 behind it at s1 is not held up.
    let (small, out) = h.submit(1_020, job(4, "u", None));
    assert_eq!(starts(&out), [(small, 0)]);
    h.commit(1_030, small);
    let out = h.at(2_030, Event::Tick);
    assert_eq!(starts(&out), [(small, 1)]);

    // Decreasing sets {s0, s1}, {s1}: a job of 6 killed in set 1 fits no later set.
    let mut h = H::new(two_decreasing_sets(), &[8, 4]);
    let (id, out) = h.submit(0, job(6, "u", None));
    assert_eq!(starts(&out), [(id, 0)]);
    h.commit(10, id);
    let out = h.at(1_010, Event::Tick);
    let reason = failure(&out, id).expect("the job failed");
    assert!(
        reason.contains("killed at the runtime limit of its level (sites 0, 1), and no later level of `tags-sets` could ever hold it (sites 1)"),
        "{reason}"
    );
    assert!(starts(&out).is_empty());
    assert_eq!(h.s.queued(), 0);
}

#[test]
fn tags_chain_random_dispatch_follows_the_seed() {
    let seed = 42;
    let mut h = H::new(
        QueueConfig::TagsChain(TagsChainParams {
            chains: vec![vec![0], vec![1], vec![2]],
            limits: vec![],
            dispatch: ChainDispatch::Random { seed },
            period: None,
        }),
        &[10, 10, 10],
    );
    let mut rng = SplitMix64::new(seed);
    let expected: Vec<(JobId, SiteId)> = (1..=8).map(|id| (id, rng.below(3) as usize)).collect();
    let mut st = Vec::new();
    for _ in 0..8 {
        st.extend(starts(&h.submit(0, job(1, "u", None)).1));
    }
    assert_eq!(st, expected);
    assert!(st
        .iter()
        .map(|s| s.1)
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| w[0] != w[1]));
}

#[test]
fn tags_parameters_are_checked() {
    let sets = |sets: Vec<Vec<SiteId>>, limits: Vec<Millis>| TagsSetsParams {
        sets,
        limits,
        period: None,
    };
    assert_eq!(
        sets(vec![vec![0, 1], vec![0, 1]], vec![10]).validate(),
        Err("set 2 must be a proper subset of set 1 (seed 004 §IV-C: decreasing sets)".into())
    );
    assert!(sets(vec![vec![0, 1], vec![2]], vec![10])
        .validate()
        .is_err());
    assert_eq!(
        sets(vec![vec![0, 1, 2], vec![0, 1], vec![1]], vec![20, 10]).validate(),
        Err("runtime limits must increase: 20 ms is followed by 10 ms".into())
    );
    assert_eq!(
        sets(vec![vec![0, 1], vec![1]], vec![]).validate(),
        Err("tags-sets with 2 sets needs 1 runtime limits (the last has none), not 0".into())
    );
    assert_eq!(
        sets(vec![vec![0, 1], vec![1]], vec![10]).check_sites(3),
        Err("set 1 must hold every site (seed 004 §IV-C); it lacks site 2".into())
    );
    assert!(sets(vec![vec![0, 1, 2], vec![2]], vec![10])
        .check_sites(3)
        .is_ok());
    let chain = |chains: Vec<Vec<SiteId>>, limits: Vec<Millis>| TagsChainParams {
        chains,
        limits,
        ..TagsChainParams::default()
    };
    assert_eq!(
        chain(vec![vec![0, 1], vec![2]], vec![10]).validate(),
        Err("every chain needs as many sites: chain 1 has 2, chain 2 has 1".into())
    );
    assert_eq!(
        chain(vec![vec![0, 1], vec![1, 2]], vec![10]).validate(),
        Err("site 1 appears more than once in the chains".into())
    );
    assert_eq!(
        chain(vec![vec![0, 1]], vec![0]).validate(),
        Err("runtime limits must be positive, not 0 ms".into())
    );
    assert_eq!(
        chain(vec![vec![0, 5]], vec![10]).check_sites(3),
        Err("site index 5 is out of range: there are 3 sites".into())
    );
    // Named without parameters, a TAGS policy cannot schedule: jobs fail with the reason.
    let mut h = H::new(QueueConfig::from_name("tags-sets").unwrap(), &[4]);
    let (id, out) = h.submit(0, job(1, "u", None));
    assert!(out.iter().any(|c| matches!(
        c,
        Command::JobFailed { job, reason, .. } if *job == id
            && reason == "queue policy `tags-sets` is misconfigured: tags-sets needs at least one \
                          set of sites"
    )));
    assert_eq!(h.s.queued(), 0);
}

#[test]
fn a_period_schedules_only_at_its_multiples() {
    let mut h = H::new(
        QueueConfig::Ff(KoalaCParams {
            period: Some(30_000),
            ..params()
        }),
        &[4],
    );
    let (a, out) = h.submit(7_000, job(1, "u", None));
    assert!(starts(&out).is_empty());
    assert_eq!(h.s.next_wakeup(), Some(30_000));
    assert_eq!(starts(&h.at(30_000, Event::Tick)), [(a, 0)]);
    assert_eq!(h.s.next_wakeup(), None, "nothing waits");
    let (b, out) = h.submit(31_000, job(1, "u", None));
    assert!(starts(&out).is_empty());
    assert_eq!(h.s.next_wakeup(), Some(60_000));
    assert_eq!(starts(&h.at(60_000, Event::Tick)), [(b, 0)]);
}

#[test]
fn every_name_parses() {
    for name in [
        "ff",
        "rr",
        "sjf",
        "sjf-ideal",
        "hsdf",
        "tags-chain",
        "tags-sets",
    ] {
        let q = QueueConfig::from_name(name).unwrap();
        assert!(QueueConfig::NAMES.contains(&name));
        assert_eq!(q.build().name(), name);
    }
}

#[test]
fn a_blocked_head_needs_no_wakeup_until_something_changes() {
    let ff = QueueConfig::Ff(KoalaCParams {
        period: Some(30_000),
        ..params()
    });
    let chain = QueueConfig::TagsChain(TagsChainParams {
        chains: vec![vec![0]],
        limits: vec![],
        dispatch: ChainDispatch::RoundRobin,
        period: Some(30_000),
    });
    for queue in [ff, chain] {
        let mut h = H::new(queue, &[4]);
        let (a, _) = h.submit(7_000, job(4, "u", None));
        assert_eq!(starts(&h.at(30_000, Event::Tick)), [(a, 0)]);
        h.commit(30_000, a);
        let (b, _) = h.submit(31_000, job(2, "u", None));
        assert_eq!(h.s.next_wakeup(), Some(60_000));
        assert!(starts(&h.at(60_000, Event::Tick)).is_empty());
        // The head is blocked and nothing can change before a job ends or arrives.
        assert_eq!(h.s.next_wakeup(), None, "{}", h.s.policy());
        assert_eq!(h.record(b).placement_failures, 1);
        // An arrival: the next multiple's pass tries the head again (and it is blocked).
        let (c, _) = h.submit(70_000, job(1, "u", None));
        assert_eq!(h.s.next_wakeup(), Some(90_000));
        assert!(starts(&h.at(90_000, Event::Tick)).is_empty());
        assert_eq!(h.s.next_wakeup(), None);
        assert_eq!(h.record(b).placement_failures, 2);
        // A passed multiple (120 s) is not made up for: the end at 130 s frees processors,
        // and the jobs start at the next multiple.
        assert!(starts(&h.finish(130_000, a)).is_empty());
        assert_eq!(h.s.next_wakeup(), Some(150_000));
        let started = starts(&h.at(150_000, Event::Tick));
        assert_eq!(started.len(), 2, "{}: {started:?}", h.s.policy());
        assert!(started.iter().any(|&(j, _)| j == b) && started.iter().any(|&(j, _)| j == c));
    }
}
