//! The Repeated Placement Policy with deadlines, Wait-X and GP / LP (seed 001 §2.2), driven
//! event by event through the scheduler.

mod common;
use common::unordered as job_of;

use coalloc_core::model::*;
use coalloc_core::queue::rpp::{
    gp_failure, lp_deadline_failure, lp_mp_failure, GlobalPriority, RppParams,
};
use coalloc_core::scheduler::*;

const D: Time = 1_000 * SECOND;

/// The tries of Lp = 0.7, S = 0, D = 1000 s.
const SEQUENCE: [Time; 13] = [
    700_000, 910_000, 973_000, 991_900, 997_570, 999_271, 999_781, 999_934, 999_980, 999_994,
    999_998, 999_999, 1_000_000,
];

fn unordered(counts: &[u32], deadline: Option<Time>) -> Job {
    let mut job = job_of(counts);
    job.set_deadline(deadline);
    job
}

fn config(params: RppParams) -> SchedulerConfig {
    SchedulerConfig {
        queue: QueueConfig::Rpp(params),
        record_try_times: 16,
        ..SchedulerConfig::default()
    }
}

fn lp() -> RppParams {
    RppParams {
        priority: GlobalPriority::Lp,
        ..RppParams::default()
    }
}

struct H {
    s: Scheduler,
    now: Time,
    /// Every command so far, with the time it came out.
    log: Vec<(Time, Command)>,
}

impl H {
    fn new(params: RppParams, sizes: &[u32]) -> H {
        let sites = sizes
            .iter()
            .enumerate()
            .map(|(i, &p)| Site::cluster(format!("s{i}"), p))
            .collect();
        H {
            s: Scheduler::new(config(params), sites),
            now: 0,
            log: Vec::new(),
        }
    }

    fn at(&mut self, t: Time, e: Event) -> Vec<Command> {
        self.now = t;
        self.s.handle(t, e).expect("event accepted");
        self.drain()
    }

    fn tick(&mut self, t: Time) -> Vec<Command> {
        self.at(t, Event::Tick)
    }

    /// Tick at every wake-up up to and including `until`.
    fn run_until(&mut self, until: Time) -> Vec<Command> {
        let mut out = Vec::new();
        while let Some(t) = self.s.next_wakeup().filter(|&t| t <= until) {
            out.extend(self.tick(t));
        }
        out
    }

    fn drain(&mut self) -> Vec<Command> {
        let cmds: Vec<Command> = std::iter::from_fn(|| self.s.poll_command()).collect();
        self.log.extend(cmds.iter().map(|c| (self.now, c.clone())));
        cmds
    }

    fn submit(&mut self, job: Job) -> (JobId, Vec<Command>) {
        let id = match self.s.handle(self.now, Event::Submit(Box::new(job))) {
            Ok(Reply::Submitted(id)) => id,
            other => panic!("{other:?}"),
        };
        (id, self.drain())
    }

    /// Every site reports this many idle processors (the rest busy with local jobs).
    fn local_load(&mut self, t: Time, idle: &[u32]) {
        for (site, &idle) in idle.iter().enumerate() {
            let total = self.s.sites()[site].processors;
            self.at(
                t,
                Event::SiteStatus {
                    site,
                    idle,
                    total,
                    healthy: true,
                    other: 0,
                },
            );
        }
    }

    fn record(&self, id: JobId) -> JobRecord {
        self.s.job(id).expect("known job").record.clone()
    }
}

fn starts(cmds: &[Command]) -> Vec<(LaunchId, JobId, SiteId, u32)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::StartComponent(s) => Some((s.launch, s.job, s.site, s.count)),
            _ => None,
        })
        .collect()
}

fn kills(cmds: &[Command]) -> Vec<(SiteId, u32)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::KillLocal { site, processors } => Some((*site, *processors)),
            _ => None,
        })
        .collect()
}

fn released(cmds: &[Command]) -> bool {
    cmds.iter()
        .any(|c| matches!(c, Command::ReleaseBarrier { .. }))
}

fn failure(cmds: &[Command]) -> Option<(JobId, String, JobRecord)> {
    cmds.iter().find_map(|c| match c {
        Command::JobFailed {
            job,
            reason,
            record,
        } => Some((*job, reason.clone(), (**record).clone())),
        _ => None,
    })
}

fn ready_all(h: &mut H, t: Time, launches: &[LaunchId]) -> Vec<Command> {
    let mut out = Vec::new();
    for &l in launches {
        out.extend(h.at(t, Event::ComponentReady { launch: l }));
    }
    out
}

#[test]
fn the_rpp_sequence_takes_lp_of_the_time_left_and_reaches_the_deadline() {
    let p = RppParams::default();
    assert_eq!(
        (p.lp, p.mp, p.ignore, p.priority),
        (0.7, None, None, GlobalPriority::Gp)
    );
    assert_eq!(p.first_try(0, D), 700 * SECOND);
    assert_eq!(p.next_try(700 * SECOND, D), 910 * SECOND);
    assert_eq!(p.next_try(910 * SECOND, D), 973 * SECOND);
    assert_eq!(p.try_times(0, D), SEQUENCE);
    // Rounding: to the nearest ms, at least 1 ms a step, the last try at the deadline.
    let p2 = RppParams {
        lp: 0.2,
        ..RppParams::default()
    };
    assert_eq!(p2.try_times(0, 4), [1, 2, 3, 4]);
    assert_eq!(p.try_times(0, 3), [2, 3]);
    let once = RppParams {
        lp: 1.0,
        ..RppParams::default()
    };
    assert_eq!(once.try_times(5, 10), [10]);
    // Wait-X with I = 100 s: nothing before D − I.
    let wait = RppParams {
        ignore: Some(100 * SECOND),
        ..RppParams::default()
    };
    assert_eq!(
        wait.try_times(0, D),
        [
            900_000, 970_000, 991_000, 997_300, 999_190, 999_757, 999_927, 999_978, 999_993,
            999_998, 999_999, 1_000_000
        ]
    );
}

#[test]
fn a_job_that_never_fits_is_tried_at_every_pt_then_fails_at_the_deadline_under_lp() {
    let mut h = H::new(lp(), &[32, 32]);
    h.local_load(0, &[4, 4]);
    let (id, cmds) = h.submit(unordered(&[8, 8], Some(D)));
    assert!(starts(&cmds).is_empty());
    assert_eq!(h.s.next_wakeup(), Some(700 * SECOND));
    let out = h.run_until(D - 1);
    assert!(failure(&out).is_none());
    assert_eq!(h.s.next_wakeup(), Some(D));
    let out = h.tick(D);
    let (job, reason, record) = failure(&out).expect("failed at the deadline");
    assert_eq!(job, id);
    assert_eq!(reason, lp_deadline_failure(D, 13));
    assert_eq!(
        reason,
        "deadline missed: not placed by its deadline (1000) after 13 placement tries \
         (LP: local jobs are not killed)"
    );
    assert_eq!(record.try_times, SEQUENCE);
    assert_eq!(record.run().end, Some(D));
    assert!(kills(&h.log.iter().map(|(_, c)| c.clone()).collect::<Vec<_>>()).is_empty());
    assert_eq!(h.s.queued(), 0);
    assert_eq!(h.s.next_wakeup(), None);
}

#[test]
fn wait_x_ignores_the_job_until_d_minus_i() {
    let params = RppParams {
        ignore: Some(100 * SECOND),
        ..RppParams::default()
    };
    let mut h = H::new(params, &[32, 32]);
    // Every processor idle: RPP would place at PT0 = 700 s, Wait-100s not before 900 s.
    let (id, cmds) = h.submit(unordered(&[8, 8], Some(D)));
    assert!(starts(&cmds).is_empty());
    assert_eq!(h.s.next_wakeup(), Some(900 * SECOND));
    assert!(starts(&h.tick(700 * SECOND)).is_empty());
    assert!(starts(&h.tick(900 * SECOND - 1)).is_empty());
    assert!(h.record(id).try_times.is_empty());
    let out = h.tick(900 * SECOND);
    assert_eq!(starts(&out).len(), 2);
    assert_eq!(h.record(id).try_times, [900 * SECOND]);
    assert_eq!(h.s.job(id).unwrap().hold_until(), Some(D));
}

#[test]
fn a_job_placed_at_pt1_is_held_at_its_barrier_until_the_deadline() {
    let mut h = H::new(RppParams::default(), &[32, 32]);
    h.local_load(0, &[4, 4]);
    let (id, _) = h.submit(unordered(&[8, 8], Some(D)));
    assert!(starts(&h.tick(700 * SECOND)).is_empty());
    // Room appears at 800 s, but the job waits for its next try at PT1 = 910 s.
    h.local_load(800 * SECOND, &[32, 32]);
    assert!(h
        .log
        .iter()
        .all(|(_, c)| starts(std::slice::from_ref(c)).is_empty()));
    assert_eq!(h.record(id).try_times, [700 * SECOND]);
    assert_eq!(h.s.next_wakeup(), Some(910 * SECOND));
    let out = h.tick(910 * SECOND);
    let st = starts(&out);
    assert_eq!(st.len(), 2);
    assert_eq!(h.record(id).try_times, [700 * SECOND, 910 * SECOND]);
    assert_eq!(h.s.queued(), 0);
    // Every component is at the barrier by 920 s; the barrier waits for the deadline.
    let launches: Vec<LaunchId> = st.iter().map(|s| s.0).collect();
    let out = ready_all(&mut h, 920 * SECOND, &launches);
    assert!(!released(&out));
    assert_eq!(h.s.next_wakeup(), Some(D));
    let out = h.tick(D);
    assert!(released(&out));
    let released_at: Vec<Time> = h
        .log
        .iter()
        .filter(|(_, c)| released(std::slice::from_ref(c)))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(released_at, [D]);
    let record = h.record(id);
    assert_eq!(
        (record.run().placed, record.run().start),
        (Some(910 * SECOND), Some(D))
    );
    // 16 processors claimed from 910 s to 1000 s.
    assert_eq!(record.run().wasted, 16 * 90 * SECOND as u64);
    let mut last = Vec::new();
    for &l in &launches {
        last = h.at(1_100 * SECOND, Event::ComponentFinished { launch: l });
    }
    let record = last
        .iter()
        .find_map(|c| match c {
            Command::JobFinished { job, record } if *job == id => Some(record.clone()),
            _ => None,
        })
        .expect("finished");
    assert_eq!(record.wasted(), 1_440_000);
}

#[test]
fn gp_kills_local_jobs_at_the_deadline() {
    let mut h = H::new(RppParams::default(), &[32, 24]);
    h.local_load(0, &[6, 2]);
    let (id, _) = h.submit(unordered(&[8, 8], Some(D)));
    let out = h.run_until(D - 1);
    assert!(kills(&out).is_empty() && starts(&out).is_empty());
    let out = h.tick(D);
    // Placed as if the local jobs were gone (worst fit over 32 and 24): 8 on each site, so
    // 8 − 6 = 2 processors freed on s0 and 8 − 2 = 6 on s1.
    assert_eq!(kills(&out), [(0, 2), (1, 6)]);
    let st = starts(&out);
    assert_eq!(
        st.iter().map(|s| (s.1, s.2, s.3)).collect::<Vec<_>>(),
        [(id, 0, 8), (id, 1, 8)]
    );
    // The kill comes before the starts.
    let first_start = out
        .iter()
        .position(|c| matches!(c, Command::StartComponent(_)))
        .unwrap();
    let last_kill = out
        .iter()
        .rposition(|c| matches!(c, Command::KillLocal { .. }))
        .unwrap();
    assert!(last_kill < first_start);
    let mut tries = SEQUENCE.to_vec();
    tries.push(D); // the kill try
    assert_eq!(h.record(id).try_times, tries);
    // Nothing held: the job starts as soon as its components are ready.
    let launches: Vec<LaunchId> = st.iter().map(|s| s.0).collect();
    assert!(released(&ready_all(&mut h, D + 5, &launches)));
    assert_eq!(h.record(id).run().start, Some(D + 5));
}

#[test]
fn lp_fails_where_gp_kills() {
    let mut h = H::new(lp(), &[32, 24]);
    h.local_load(0, &[6, 2]);
    let (id, _) = h.submit(unordered(&[8, 8], Some(D)));
    let out = h.run_until(D);
    assert!(kills(&out).is_empty() && starts(&out).is_empty());
    let (job, reason, _) = failure(&out).expect("failed");
    assert_eq!((job, reason), (id, lp_deadline_failure(D, 13)));
    assert_eq!(h.log.last().map(|(t, _)| *t), Some(D));
}

#[test]
fn gp_fails_when_even_killing_local_jobs_does_not_make_room() {
    let mut h = H::new(RppParams::default(), &[32, 24]);
    // A coalloc job holds most of s0 and s1, so local kills cannot free enough.
    let (big, cmds) = h.submit(unordered(&[30, 20], None));
    assert_eq!(starts(&cmds).len(), 2);
    let (id, _) = h.submit(unordered(&[8, 8], Some(D)));
    let out = h.run_until(D);
    assert!(kills(&out).is_empty());
    let (job, reason, _) = failure(&out).expect("failed");
    assert_eq!(job, id);
    assert_eq!(reason, gp_failure(D, 13));
    assert_eq!(
        reason,
        "deadline missed: not placed at its deadline (1000) even with local jobs killed, \
         after 13 placement tries (GP)"
    );
    assert!(h.s.job(big).is_some());
}

#[test]
fn mp_limits_the_tries_lp_fails_at_once_and_gp_waits_for_the_deadline() {
    let lp2 = RppParams {
        mp: Some(2),
        ..lp()
    };
    let mut h = H::new(lp2, &[32, 32]);
    h.local_load(0, &[4, 4]);
    let (id, _) = h.submit(unordered(&[8, 8], Some(D)));
    assert!(failure(&h.tick(700 * SECOND)).is_none());
    let out = h.tick(910 * SECOND);
    let (job, reason, record) = failure(&out).expect("failed after Mp tries");
    assert_eq!((job, reason.as_str()), (id, lp_mp_failure(D, 2).as_str()));
    assert_eq!(
        reason,
        "deadline missed: not placed in 2 placement tries (the limit Mp) before its deadline \
         (1000) (LP: local jobs are not killed)"
    );
    assert_eq!(record.try_times, [700 * SECOND, 910 * SECOND]);
    assert_eq!(h.s.next_wakeup(), None);

    let gp2 = RppParams {
        mp: Some(2),
        ..RppParams::default()
    };
    let mut h = H::new(gp2, &[32, 32]);
    h.local_load(0, &[4, 4]);
    let (id, _) = h.submit(unordered(&[8, 8], Some(D)));
    h.tick(700 * SECOND);
    h.tick(910 * SECOND);
    // No more plain tries: the next wake-up is the deadline.
    assert_eq!(h.s.next_wakeup(), Some(D));
    let out = h.tick(D);
    assert_eq!(kills(&out), [(0, 4), (1, 4)]);
    assert_eq!(starts(&out).len(), 2);
    assert_eq!(h.record(id).try_times, [700_000, 910_000, D, D]);
}

#[test]
fn due_jobs_go_in_order_of_try_time_not_arrival() {
    let mut h = H::new(RppParams::default(), &[16]);
    let (a, _) = h.submit(unordered(&[16], Some(D)));
    // Submitted later with an earlier deadline: PT0 = 350 s, before A's 700 s.
    let (b, _) = h.submit(unordered(&[16], Some(500 * SECOND)));
    let out = h.run_until(D);
    let order: Vec<(Time, JobId)> = h
        .log
        .iter()
        .filter_map(|(t, c)| match c {
            Command::StartComponent(s) => Some((*t, s.job)),
            _ => None,
        })
        .collect();
    // B takes the site at 350 s; A cannot fit at any try and, under GP, fails at D (there
    // are no local jobs to kill).
    assert_eq!(order, [(350 * SECOND, b)]);
    let (job, _, _) = failure(&out).expect("A failed");
    assert_eq!(job, a);

    // Same try time: arrival order decides.
    let mut h = H::new(RppParams::default(), &[16]);
    let (first, _) = h.submit(unordered(&[16], Some(D)));
    let (second, _) = h.submit(unordered(&[16], Some(D)));
    let out = h.tick(700 * SECOND);
    assert_eq!(
        starts(&out).iter().map(|s| s.1).collect::<Vec<_>>(),
        [first]
    );
    assert_eq!(h.record(second).try_times, [700 * SECOND]);
    assert_eq!(h.s.next_wakeup(), Some(910 * SECOND));
}

#[test]
fn jobs_without_a_deadline_are_tried_at_every_pass_in_arrival_order() {
    let mut h = H::new(RppParams::default(), &[32]);
    h.local_load(0, &[10]);
    let (big, cmds) = h.submit(unordered(&[20], None));
    assert!(starts(&cmds).is_empty());
    // A smaller job passes the one that does not fit (FPFS-like).
    let (small, cmds) = h.submit(unordered(&[8], None));
    assert_eq!(
        starts(&cmds).iter().map(|s| s.1).collect::<Vec<_>>(),
        [small]
    );
    assert_eq!(h.s.next_wakeup(), None);
    // Room appears: the waiting job is tried at that pass.
    h.local_load(50, &[30]);
    let started: Vec<JobId> = h
        .log
        .iter()
        .filter_map(|(_, c)| match c {
            Command::StartComponent(s) => Some(s.job),
            _ => None,
        })
        .collect();
    assert_eq!(started, [small, big]);
    assert!(h.s.job(big).unwrap().hold_until().is_none());
}

#[test]
fn a_job_aborted_before_its_deadline_is_placed_again_at_once() {
    let mut h = H::new(RppParams::default(), &[32, 32]);
    let (id, _) = h.submit(unordered(&[8, 8], Some(D)));
    let st = starts(&h.tick(700 * SECOND));
    assert_eq!(st.len(), 2);
    let out = h.at(
        750 * SECOND,
        Event::ComponentFailed {
            fault: Fault::Site,
            launch: st[0].0,
            reason: "node down".into(),
        },
    );
    // Back in the queue and planned from the same S: PT0 has passed, so it is tried at once.
    let again = starts(&out);
    assert_eq!(again.len(), 2);
    assert_eq!(h.record(id).try_times, [700 * SECOND, 750 * SECOND]);
    assert_eq!(h.s.job(id).unwrap().hold_until(), Some(D));
}

#[test]
fn the_policy_is_configured_by_name_and_checks_its_parameters() {
    assert!(QueueConfig::NAMES.contains(&"rpp"));
    assert_eq!(
        QueueConfig::from_name("RPP"),
        Ok(QueueConfig::Rpp(RppParams::default()))
    );
    assert_eq!(QueueConfig::Rpp(RppParams::default()).build().name(), "rpp");
    assert_eq!(GlobalPriority::from_name("lp"), Ok(GlobalPriority::Lp));
    assert!(GlobalPriority::from_name("xp").is_err());
    assert_eq!(RppParams::default().validate(), Ok(()));
    let bad = |p: RppParams| p.validate().unwrap_err();
    assert_eq!(
        bad(RppParams {
            lp: 0.0,
            ..RppParams::default()
        }),
        "Lp must be in (0, 1], got 0"
    );
    assert_eq!(
        bad(RppParams {
            mp: Some(0),
            ..RppParams::default()
        }),
        "Mp must be at least 1 (leave it out for no limit)"
    );
    assert_eq!(
        bad(RppParams {
            ignore: Some(-1),
            ..RppParams::default()
        }),
        "the ignore time I must not be negative"
    );
}
