//! A snapshot restored under a changed configuration (issue 23): another queue policy, sites
//! added after the snapshot's, a site's processors changed, and what is refused.

mod common;

use coalloc_core::model::*;
use coalloc_core::scheduler::snapshot::{JobSlots, RestoreChange, RestoreError, Snapshot};
use coalloc_core::scheduler::*;
use common::{drain, job_starts, launches, submit};

fn job(count: u32) -> Job {
    Job::new(
        JobKind::Unordered,
        vec![Component {
            count,
            ..Component::default()
        }],
    )
}

fn sites(sizes: &[(&str, u32)]) -> Vec<Site> {
    sizes
        .iter()
        .map(|&(n, p)| Site::cluster(n.to_string(), p))
        .collect()
}

fn config(queue: QueueConfig) -> SchedulerConfig {
    SchedulerConfig {
        queue,
        ..SchedulerConfig::default()
    }
}

/// FCFS on one site of 4: job 1 (4 processors) started, jobs 2 (4) and 3 (2) queued; the
/// snapshot taken then, through bytes.
fn saved() -> Snapshot {
    let mut s = Scheduler::new(config(QueueConfig::Fcfs), sites(&[("a", 4)]));
    let (_, cmds) = submit(&mut s, 0, job(4));
    assert_eq!(job_starts(&cmds), vec![(1, 0)]);
    for n in [4, 2] {
        let (_, cmds) = submit(&mut s, 1, job(n));
        assert!(job_starts(&cmds).is_empty());
    }
    assert_eq!(s.queued(), 2);
    ciborium::from_reader(&cbor(&s.snapshot().expect("saved"))[..]).expect("reads back")
}

#[test]
fn the_same_configuration_changes_nothing() {
    let (s, changes) =
        Scheduler::restore(config(QueueConfig::Fcfs), &sites(&[("a", 4)]), saved()).unwrap();
    assert!(changes.is_empty(), "{changes:?}");
    assert_eq!((s.policy(), s.queued()), ("fcfs", 2));
}

#[test]
fn another_policy_takes_the_queued_jobs_in_submission_order() {
    let (mut s, changes) =
        Scheduler::restore(config(QueueConfig::Fpfs), &sites(&[("a", 4)]), saved()).unwrap();
    assert_eq!(
        changes,
        vec![RestoreChange::Policy {
            saved: "fcfs",
            configured: "fpfs",
            queued: 2
        }]
    );
    assert_eq!((s.policy(), s.queued()), ("fpfs", 2));
    // Under FPFS job 3 (2 processors) may pass job 2 once 2 processors are free.
    s.handle(
        10,
        Event::SiteStatus {
            site: 0,
            idle: 2,
            total: 4,
            healthy: true,
            other: 0,
        },
    )
    .unwrap();
    let cmds = drain(&mut s);
    assert_eq!(job_starts(&cmds), vec![]); // job 1 holds all 4 of them as coalloc's
    assert_eq!(s.queued(), 2);
}

#[test]
fn an_added_site_joins_and_the_queue_goes_on() {
    let (mut s, changes) = Scheduler::restore(
        config(QueueConfig::Fcfs),
        &sites(&[("a", 4), ("b", 8)]),
        saved(),
    )
    .unwrap();
    assert_eq!(changes, vec![RestoreChange::SitesAdded(vec!["b".into()])]);
    assert_eq!(s.sites().len(), 2);
    assert_eq!(
        s.site_state(1).map(|st| (st.processors, st.idle)),
        Some((8, 8))
    );
    s.handle(10, Event::Tick).unwrap();
    let cmds = drain(&mut s);
    // Both queued jobs fit on the new site, in their order.
    assert_eq!(job_starts(&cmds), vec![(2, 1), (3, 1)]);
    assert_eq!(s.queued(), 0);
}

#[test]
fn a_site_grown_across_the_restart_is_used() {
    let (mut s, changes) =
        Scheduler::restore(config(QueueConfig::Fcfs), &sites(&[("a", 10)]), saved()).unwrap();
    assert_eq!(
        changes,
        vec![RestoreChange::Processors {
            site: "a".into(),
            from: 4,
            to: 10
        }]
    );
    assert_eq!(
        s.site_state(0).map(|st| (st.processors, st.idle)),
        Some((10, 6))
    );
    s.handle(10, Event::Tick).unwrap();
    assert_eq!(job_starts(&drain(&mut s)), vec![(2, 0), (3, 0)]);
}

#[test]
fn a_removed_or_reordered_site_is_refused_with_advice() {
    let big = saved();
    let Err(e) = Scheduler::restore(config(QueueConfig::Fcfs), &sites(&[("b", 4)]), big) else {
        panic!("a removed site is refused");
    };
    assert!(matches!(e, RestoreError::Sites { .. }));
    let text = e.to_string();
    assert!(text.contains("[a]") && text.contains("[b]"), "{text}");
    assert!(text.contains("coalloc site drain"), "{text}");
    let Err(e) = Scheduler::restore(
        config(QueueConfig::Fcfs),
        &sites(&[("b", 4), ("a", 4)]),
        saved(),
    ) else {
        panic!("reordered sites are refused");
    };
    assert!(matches!(e, RestoreError::Sites { .. }));
}

fn cbor<T: serde::Serialize>(v: &T) -> Vec<u8> {
    let mut bytes = Vec::new();
    ciborium::into_writer(v, &mut bytes).expect("serializes");
    bytes
}

/// Written as a head and runs of job slots, read back apart and joined, a snapshot restores
/// the same scheduler as one written whole, for any number of runs (more runs than jobs too).
#[test]
fn a_snapshot_written_in_runs_reads_back_the_same_as_whole() {
    let mut s = Scheduler::new(config(QueueConfig::Fcfs), sites(&[("a", 4)]));
    for (t, n) in [4, 2, 3, 1, 4, 2, 2].into_iter().enumerate() {
        submit(&mut s, t as i64, job(n));
    }
    drain(&mut s);
    let whole = cbor(&s.snapshot().expect("saved"));
    let restored = |snap: Snapshot| {
        let (s, changes) =
            Scheduler::restore(config(QueueConfig::Fcfs), &sites(&[("a", 4)]), snap).unwrap();
        assert!(changes.is_empty());
        let ids: Vec<JobId> = s.jobs().map(|j| j.id).collect();
        assert_eq!(ids, (1..=7).collect::<Vec<_>>(), "every job is back");
        cbor(&s.snapshot().expect("saved"))
    };
    let expected = restored(ciborium::from_reader(&whole[..]).unwrap());
    for n in [1, 2, 3, 7, 20] {
        let snap = s.snapshot().expect("saved");
        let head: Snapshot = ciborium::from_reader(&cbor(&snap.head())[..]).unwrap();
        let runs: Vec<JobSlots> = (0..n)
            .map(|i| ciborium::from_reader(&cbor(&snap.job_slots(i, n))[..]).unwrap())
            .collect();
        assert_eq!(restored(Snapshot::join(head, runs)), expected, "{n} runs");
    }
}

/// Thousands of jobs over many pages of the job table, most cancelled and forgotten (whole
/// pages, pages with holes, the newest page emptied), then a snapshot written in runs: the
/// restored scheduler holds the same jobs and queue, writes the same bytes, and from there
/// decides the same as the one it was taken of.
#[test]
fn a_table_with_forgotten_pages_restores_the_same_and_goes_on_the_same() {
    let mut s = Scheduler::new(config(QueueConfig::Fcfs), sites(&[("a", 4)]));
    // One job holds the whole site: everything after it waits.
    submit(&mut s, 0, job(4));
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..8i64 {
        let ids: Vec<JobId> = (0..700)
            .map(|_| submit(&mut s, round, job(1 + (next() % 4) as u32)).0)
            .collect();
        // Round 3 keeps every job, rounds 5 and 7 none, the others about one in ten.
        let keep = match round {
            3 => 100,
            5 | 7 => 0,
            _ => 10,
        };
        for id in ids {
            if next() % 100 >= keep {
                s.handle(round, Event::Cancel { job: id }).unwrap();
                drain(&mut s);
                assert!(s.forget_ended(id));
            }
        }
    }
    let jobs = |s: &Scheduler| {
        s.jobs()
            .map(|j| (j.id, j.phase, j.job.components[0].count))
            .collect::<Vec<_>>()
    };
    let before = jobs(&s);
    assert!(
        before.len() > 900 && before.len() < 2000,
        "{}",
        before.len()
    );
    let bytes = cbor(&s.snapshot().expect("saved"));
    // What the scheduler does next: a job of 2 arrives, then the job holding the site is
    // cancelled and its launch reported ended, which frees the site for the queue's head.
    let go_on = |sch: &mut Scheduler| {
        let (_, mut cmds) = submit(sch, 10, job(2));
        sch.handle(11, Event::Cancel { job: 1 }).unwrap();
        cmds.extend(drain(sch));
        for launch in launches(&cmds) {
            let _ = sch.handle(12, Event::ComponentFinished { launch });
        }
        let next = drain(sch);
        (format!("{cmds:?}"), job_starts(&next), sch.queued())
    };
    let mut whole = Scheduler::restore(
        config(QueueConfig::Fcfs),
        &sites(&[("a", 4)]),
        ciborium::from_reader(&bytes[..]).unwrap(),
    )
    .unwrap()
    .0;
    let expected = go_on(&mut whole);
    for n in [1, 3, 4] {
        let snap = s.snapshot().expect("saved");
        let head: Snapshot = ciborium::from_reader(&cbor(&snap.head())[..]).unwrap();
        let runs: Vec<JobSlots> = (0..n)
            .map(|i| ciborium::from_reader(&cbor(&snap.job_slots(i, n))[..]).unwrap())
            .collect();
        let (mut back, changes) = Scheduler::restore(
            config(QueueConfig::Fcfs),
            &sites(&[("a", 4)]),
            Snapshot::join(head, runs),
        )
        .unwrap();
        assert!(changes.is_empty());
        assert_eq!(jobs(&back), before, "{n} runs");
        assert_eq!(back.queued(), s.queued(), "{n} runs");
        assert_eq!(cbor(&back.snapshot().expect("saved")), bytes, "{n} runs");
        assert_eq!(go_on(&mut back), expected, "{n} runs");
    }
}
