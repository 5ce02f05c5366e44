//! The Incremental Claiming Policy (seed 000 §3.2–3.3) walked through its steps.

mod common;
use common::{drain, starts, submit, unordered};

use coalloc_core::model::*;
use coalloc_core::placement::Fit;
use coalloc_core::scheduler::*;

/// Three sites; a 4 GB file has replicas on site 0 only; 100 MB/s from 0 to 1, 50 MB/s from
/// 0 to 2.
fn sites() -> Vec<Site> {
    let mut s: Vec<Site> = (0..3).map(|i| Site::cluster(format!("s{i}"), 32)).collect();
    s[0].files = vec!["data".into()];
    s[0].bandwidth.insert("s1".into(), 100_000_000);
    s[0].bandwidth.insert("s2".into(), 50_000_000);
    s
}

fn config(t: f64) -> SchedulerConfig {
    SchedulerConfig {
        fit: Fit::CloseToFiles,
        claiming: Claiming::Icp(IcpParams {
            t,
            ..IcpParams::default()
        }),
        ..SchedulerConfig::default()
    }
}

fn job(counts: &[u32], priority: Priority) -> Job {
    let mut j = unordered(counts);
    j.priority = priority;
    j.extra_mut().input_file = Some(Box::new(InputFile {
        name: "data".into(),
        size: 4_000_000_000,
        distribution: FileDistribution::Whole,
    }));
    j
}

#[test]
fn files_move_first_claiming_starts_at_jct0_and_the_barrier_waits_for_the_jst() {
    let mut s = Scheduler::new(config(0.0), sites());
    // Two components of 20: CTF puts the first next to the file (s0, no transfer) and the
    // second on s1 (4 GB at 100 MB/s = 40 s). FTT = 40 s, JST = 40 s, JCT0 = 0.75·40 = 30 s.
    let (id, cmds) = submit(&mut s, 0, job(&[20, 20], Priority::Low));
    let transfers: Vec<_> = cmds
        .iter()
        .filter_map(|c| match c {
            Command::StartTransfer {
                transfer,
                component,
                from,
                to,
                bytes,
                ..
            } => Some((*transfer, (*component, *from, *to, *bytes))),
            _ => None,
        })
        .collect();
    assert_eq!(transfers.len(), 1);
    let (transfer, what) = transfers[0];
    assert_eq!(what, (1, 0, 1, 4_000_000_000));
    assert!(starts(&cmds).is_empty(), "nothing is claimed before JCT0");
    let claim = s.job(id).unwrap().claim().copied().unwrap();
    assert_eq!(
        (claim.jpt, claim.ftt, claim.jst, claim.jct),
        (0, 40_000, 40_000, 30_000)
    );
    assert_eq!(s.next_wakeup(), Some(30_000));
    s.handle(30_000, Event::Tick).unwrap();
    let st = starts(&drain(&mut s));
    assert_eq!(
        st.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
        [(0, 0), (1, 1)]
    );
    for (l, _, _) in &st {
        s.handle(31_000, Event::ComponentReady { launch: *l })
            .unwrap();
    }
    assert!(drain(&mut s)
        .iter()
        .all(|c| !matches!(c, Command::ReleaseBarrier { .. })));
    // The file arrives at 39 s, but the barrier waits for the JST.
    s.handle(39_000, Event::TransferDone { transfer, ok: true })
        .unwrap();
    assert!(drain(&mut s)
        .iter()
        .all(|c| !matches!(c, Command::ReleaseBarrier { .. })));
    s.handle(40_000, Event::Tick).unwrap();
    assert!(drain(&mut s)
        .iter()
        .any(|c| matches!(c, Command::ReleaseBarrier { job } if *job == id)));
    let r = &s.job(id).unwrap().record;
    assert_eq!(
        (r.claim_tries(), r.run().start, r.start_delay()),
        (1, Some(40_000), Some(0))
    );
}

#[test]
fn a_component_that_cannot_start_is_claimed_at_a_later_try_and_unclaimed_jobs_return_with_lower_l()
{
    let mut s = Scheduler::new(config(0.0), sites());
    let (id, _) = submit(&mut s, 0, job(&[20, 20], Priority::Low));
    // Other users fill s1 and s2 before JCT0; the second component cannot start anywhere.
    for site in [1, 2] {
        s.handle(
            1_000,
            Event::SiteStatus {
                site,
                idle: 4,
                total: 32,
                healthy: true,
                other: 0,
            },
        )
        .unwrap();
    }
    s.handle(30_000, Event::Tick).unwrap();
    let st = starts(&drain(&mut s));
    assert_eq!(st.len(), 1, "T = 0: claim what can be claimed");
    let j = s.job(id).unwrap();
    assert_eq!(j.claim().unwrap().jct, 37_500, "JCT1 = 30 + 0.75·(40 − 30)");
    assert_eq!(j.record.claim_failures(), 1);
    // Tries follow the sequence until the JST; at the JST the job goes back to the queue.
    let mut t = 37_500;
    while t < 40_000 {
        s.handle(t, Event::Tick).unwrap();
        drain(&mut s);
        t = s.job(id).unwrap().claim().copied().unwrap().jct;
    }
    s.handle(40_000, Event::Tick).unwrap();
    let cmds = drain(&mut s);
    assert!(cmds
        .iter()
        .any(|c| matches!(c, Command::CancelComponent { launch, .. } if *launch == st[0].0)));
    assert!(cmds
        .iter()
        .any(|c| matches!(c, Command::Notify(Notice::Requeued { .. }))));
    let j = s.job(id).unwrap();
    assert_eq!(j.l_permille(), Some(625), "L lowered by 0.125");
}

#[test]
fn t_equal_to_one_claims_atomically() {
    let mut s = Scheduler::new(config(1.0), sites());
    let (id, _) = submit(&mut s, 0, job(&[20, 20], Priority::Low));
    for site in [1, 2] {
        s.handle(
            1_000,
            Event::SiteStatus {
                site,
                idle: 4,
                total: 32,
                healthy: true,
                other: 0,
            },
        )
        .unwrap();
    }
    s.handle(30_000, Event::Tick).unwrap();
    assert!(
        starts(&drain(&mut s)).is_empty(),
        "F = 1/2 < T = 1: nothing is claimed"
    );
    assert_eq!(s.job(id).unwrap().record.claim_failures(), 1);
}

#[test]
fn a_high_priority_job_preempts_low_priority_jobs_latest_jst_first() {
    let mut cfg = config(0.0);
    cfg.claiming = Claiming::Icp(IcpParams::default());
    let mut s = Scheduler::new(cfg, sites()[..2].to_vec());
    // The high-priority job is placed (24 on s0 next to its file, 24 on s1 after a 40 s
    // transfer) but claims nothing before JCT0 = 30 s.
    let (h, cmds) = submit(&mut s, 0, job(&[24, 24], Priority::High));
    assert!(starts(&cmds).is_empty());
    // Meanwhile low-priority jobs without files take the processors: A and C on s0, B and D
    // on s1 (worst fit), leaving 8 idle on each.
    let mut low = Vec::new();
    for t in 1..=4 {
        let mut j = Job::new(
            JobKind::Total,
            vec![Component {
                count: 12,
                ..Component::default()
            }],
        );
        j.priority = Priority::Low;
        let (id, cmds) = submit(&mut s, t, j);
        assert_eq!(starts(&cmds).len(), 1);
        low.push(id);
    }
    let (a, b, c, d) = (low[0], low[1], low[2], low[3]);
    assert_eq!(s.site_state(0).unwrap().idle, 8);
    // At JCT0 neither component can start and no other site has room: the high-priority job
    // preempts, on each site, the low-priority job with the latest JST first.
    s.handle(30_000, Event::Tick).unwrap();
    let cmds = drain(&mut s);
    let preempted: Vec<JobId> = cmds
        .iter()
        .filter_map(|x| match x {
            Command::Notify(Notice::Preempted { job, by }) if *by == h => Some(*job),
            _ => None,
        })
        .collect();
    assert_eq!(preempted, [c, a, d, b]);
    let st = starts(&cmds);
    assert_eq!(
        st.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
        [(0, 0), (1, 1)]
    );
    assert_eq!(s.job(a).unwrap().record.preemptions(), 1);
    assert_eq!(
        s.job(a).unwrap().phase,
        coalloc_core::scheduler::jobs::Phase::Queued
    );
}
