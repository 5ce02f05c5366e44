//! The co-allocation transaction and fault handling, walked event by event.

mod common;
use common::{failure, unordered};

use coalloc_core::model::*;
use coalloc_core::scheduler::*;

fn sites(sizes: &[u32]) -> Vec<Site> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &p)| Site::cluster(format!("s{i}"), p))
        .collect()
}

struct H {
    s: Scheduler,
    now: Time,
}

impl H {
    fn new(config: SchedulerConfig, sizes: &[u32]) -> H {
        H {
            s: Scheduler::new(config, sites(sizes)),
            now: 0,
        }
    }

    fn at(&mut self, t: Time, e: Event) -> Vec<Command> {
        self.now = t;
        self.s.handle(t, e).expect("event accepted");
        self.drain()
    }

    fn drain(&mut self) -> Vec<Command> {
        std::iter::from_fn(|| self.s.poll_command()).collect()
    }

    fn submit(&mut self, job: Job) -> (JobId, Vec<Command>) {
        let id = match self.s.handle(self.now, Event::Submit(Box::new(job))) {
            Ok(Reply::Submitted(id)) => id,
            other => panic!("{other:?}"),
        };
        (id, self.drain())
    }
}

fn starts(cmds: &[Command]) -> Vec<(LaunchId, usize, SiteId, u32)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::StartComponent(s) => Some((s.launch, s.component, s.site, s.count)),
            _ => None,
        })
        .collect()
}

fn cancels(cmds: &[Command]) -> Vec<LaunchId> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::CancelComponent { launch, .. } => Some(*launch),
            _ => None,
        })
        .collect()
}

fn released(cmds: &[Command]) -> bool {
    cmds.iter()
        .any(|c| matches!(c, Command::ReleaseBarrier { .. }))
}

fn ready_all(h: &mut H, t: Time, launches: &[LaunchId]) -> Vec<Command> {
    let mut out = Vec::new();
    for &l in launches {
        out.extend(h.at(t, Event::ComponentStarted { launch: l }));
        out.extend(h.at(t, Event::ComponentReady { launch: l }));
    }
    out
}

#[test]
fn three_components_start_together_commit_at_the_barrier_and_finish() {
    let mut h = H::new(SchedulerConfig::default(), &[64, 32, 32]);
    let (id, cmds) = h.submit(unordered(&[16, 8, 8]));
    let st = starts(&cmds);
    // Modified worst-fit: 16 on the 64-site, then the unmarked 32-sites.
    assert_eq!(
        st.iter().map(|s| (s.1, s.2, s.3)).collect::<Vec<_>>(),
        [(0, 0, 16), (1, 1, 8), (2, 2, 8)]
    );
    let start = match &cmds[0] {
        Command::StartComponent(s) => s.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(start.config.sizes[..], [16, 8, 8]);
    assert_eq!((start.config.rank_offset, start.config.total), (0, 32));
    let launches: Vec<LaunchId> = st.iter().map(|s| s.0).collect();
    // Two of three at the barrier: no commit yet.
    let out = ready_all(&mut h, 10, &launches[..2]);
    assert!(!released(&out));
    let out = ready_all(&mut h, 20, &launches[2..]);
    assert!(released(&out));
    assert_eq!(h.s.site_state(0).unwrap().idle, 48);
    for (k, &l) in launches.iter().enumerate() {
        let out = h.at(100 + k as Time, Event::ComponentFinished { launch: l });
        if k < 2 {
            assert!(out
                .iter()
                .all(|c| !matches!(c, Command::JobFinished { .. })));
        } else {
            let record = out
                .iter()
                .find_map(|c| match c {
                    Command::JobFinished { job, record } if *job == id => Some(record.clone()),
                    _ => None,
                })
                .expect("finished");
            assert_eq!(
                (record.submit, record.start(), record.end()),
                (0, Some(20), Some(102))
            );
            assert_eq!(record.sites().to_vec(), [0, 1, 2]);
            // 16 processors held 20 ms + 8 held 20 ms + 8 held 20 ms before the release.
            assert_eq!(record.wasted(), 640);
        }
    }
    assert_eq!(h.s.site_state(0).unwrap().idle, 64);
}

#[test]
fn a_required_failure_before_commit_aborts_atomically_and_the_job_is_placed_again() {
    let mut h = H::new(SchedulerConfig::default(), &[32, 32, 32]);
    let (id, cmds) = h.submit(unordered(&[8, 8, 8]));
    let first: Vec<LaunchId> = starts(&cmds).iter().map(|s| s.0).collect();
    h.at(5, Event::ComponentStarted { launch: first[0] });
    let out = h.at(
        6,
        Event::ComponentFailed {
            fault: Fault::Site,
            launch: first[1],
            reason: "exec failed".into(),
        },
    );
    // The others are cancelled, and the job starts again with fresh launches.
    assert_eq!(cancels(&out), [first[0], first[2]]);
    assert!(out
        .iter()
        .any(|c| matches!(c, Command::Notify(Notice::Requeued { job, .. }) if *job == id)));
    let again = starts(&out);
    assert_eq!(again.len(), 3);
    assert!(again.iter().all(|s| !first.contains(&s.0)));
    assert_eq!(h.s.job(id).unwrap().record.submit_failures(), 1);
    // A late report about an aborted launch changes nothing.
    assert!(h
        .at(7, Event::ComponentReady { launch: first[0] })
        .is_empty());
    // The site of the failure counted one submission error.
    assert_eq!(h.s.site_state(again[1].2).unwrap().idle, 24);
}

#[test]
fn an_interactive_failure_is_substituted_on_another_site() {
    let mut h = H::new(SchedulerConfig::default(), &[32, 32, 32]);
    let mut job = unordered(&[8, 8]);
    job.components[1].start_type = StartType::Interactive;
    let (id, cmds) = h.submit(job);
    let st = starts(&cmds);
    let failed_site = st[1].2;
    let out = h.at(
        1,
        Event::ComponentFailed {
            fault: Fault::Site,
            launch: st[1].0,
            reason: "node down".into(),
        },
    );
    assert!(out.iter().any(|c| matches!(
        c,
        Command::Notify(Notice::InteractiveFailed { component: 1, .. })
    )));
    let sub = starts(&out);
    assert_eq!(sub.len(), 1);
    assert_eq!(sub[0].1, 1);
    assert_ne!(sub[0].2, failed_site);
    assert!(
        cancels(&out).is_empty(),
        "the required component keeps running"
    );
    let out = ready_all(&mut h, 2, &[st[0].0, sub[0].0]);
    assert!(released(&out));
    assert_eq!(h.s.job(id).unwrap().record.submit_failures(), 0);
}

#[test]
fn an_optional_failure_is_ignored() {
    let mut h = H::new(SchedulerConfig::default(), &[32, 32]);
    let mut job = unordered(&[8, 4]);
    job.components[1].start_type = StartType::Optional;
    let (_, cmds) = h.submit(job);
    let st = starts(&cmds);
    // The required component alone commits the job: the optional one need not be ready.
    let out = ready_all(&mut h, 1, &[st[0].0]);
    assert!(released(&out));
    let out = h.at(
        2,
        Event::ComponentFailed {
            fault: Fault::Site,
            launch: st[1].0,
            reason: "gone".into(),
        },
    );
    assert!(out.iter().any(|c| matches!(
        c,
        Command::Notify(Notice::OptionalFailed { component: 1, .. })
    )));
    assert!(cancels(&out).is_empty());
    let out = h.at(3, Event::ComponentFinished { launch: st[0].0 });
    assert!(out.iter().any(|c| matches!(c, Command::JobFinished { .. })));
}

#[test]
fn a_failure_after_commit_requeues_the_job_and_counts_a_site_error() {
    let mut h = H::new(SchedulerConfig::default(), &[32, 32]);
    let (id, cmds) = h.submit(unordered(&[8, 8]));
    let st = starts(&cmds);
    ready_all(&mut h, 1, &[st[0].0, st[1].0]);
    let out = h.at(
        9,
        Event::ComponentFailed {
            fault: Fault::Site,
            launch: st[1].0,
            reason: "segfault".into(),
        },
    );
    assert_eq!(cancels(&out), [st[0].0]);
    assert_eq!(starts(&out).len(), 2, "placed and started again");
    let j = h.s.job(id).unwrap();
    assert_eq!(j.record.completion_failures(), 1);
    assert_eq!(h.s.site_state(st[1].2).unwrap().completion_errors, 1);
}

#[test]
fn consecutive_errors_make_a_site_unusable_until_an_operator_says_otherwise() {
    let mut config = SchedulerConfig::default();
    config.site_faults.submit_errors = 2;
    config.max_submit_failures = None;
    let mut h = H::new(config, &[64, 16]);
    let (_, mut cmds) = h.submit(Job::new(
        JobKind::Total,
        vec![Component {
            count: 8,
            ..Component::default()
        }],
    ));
    // Worst fit sends it to site 0 each time; two failures there disable site 0.
    for t in 1..=2 {
        let st = starts(&cmds);
        assert_eq!(st[0].2, 0);
        cmds = h.at(
            t,
            Event::ComponentFailed {
                fault: Fault::Site,
                launch: st[0].0,
                reason: "no such file".into(),
            },
        );
    }
    assert!(cmds
        .iter()
        .any(|c| matches!(c, Command::Notify(Notice::SiteUnusable { site: 0, .. }))));
    assert_eq!(starts(&cmds)[0].2, 1, "placement avoids the unusable site");
    let out = h.at(
        3,
        Event::SetUsable {
            site: 0,
            usable: true,
        },
    );
    assert!(out
        .iter()
        .any(|c| matches!(c, Command::Notify(Notice::SiteUsable { site: 0 }))));
    assert!(h.s.site_state(0).unwrap().usable());
}

#[test]
fn a_job_past_its_abort_limit_fails_with_the_reason() {
    let config = SchedulerConfig {
        max_submit_failures: Some(1),
        site_faults: sites::SiteFaultLimits {
            submit_errors: 0,
            completion_errors: 0,
        },
        ..SchedulerConfig::default()
    };
    let mut h = H::new(config, &[16]);
    let (id, mut cmds) = h.submit(unordered(&[4]));
    for t in 1..=2 {
        let st = starts(&cmds);
        cmds = h.at(
            t,
            Event::ComponentFailed {
                fault: Fault::Site,
                launch: st[0].0,
                reason: "boom".into(),
            },
        );
    }
    let reason = failure(&cmds, id).expect("failed");
    assert_eq!(
        reason,
        "component 0 on site `s0`: boom (limit of 1 aborted starts reached)"
    );
}

#[test]
fn a_launch_that_never_starts_times_out() {
    let config = SchedulerConfig {
        pending_timeout: Some(30_000),
        ..SchedulerConfig::default()
    };
    let mut h = H::new(config, &[16, 16]);
    let (_, cmds) = h.submit(unordered(&[4]));
    let l = starts(&cmds)[0].0;
    assert_eq!(h.s.next_wakeup(), Some(30_000));
    let out = h.at(30_000, Event::Tick);
    assert_eq!(cancels(&out), [l]);
    assert!(out.iter().any(
        |c| matches!(c, Command::Notify(Notice::Requeued { reason, .. })
        if reason.ends_with("did not start within the pending timeout (30s)"))
    ));
}

#[test]
fn edits_before_commit_and_refusal_after() {
    let mut h = H::new(SchedulerConfig::default(), &[32, 32, 32]);
    let (id, cmds) = h.submit(unordered(&[8, 8]));
    let st = starts(&cmds);
    h.s.handle(
        1,
        Event::Edit {
            job: id,
            edit: Edit::Add(Component {
                count: 4,
                ..Component::default()
            }),
        },
    )
    .unwrap();
    let added = starts(&h.drain());
    assert_eq!(added.len(), 1);
    assert_eq!(added[0].1, 2);
    h.s.handle(
        1,
        Event::Edit {
            job: id,
            edit: Edit::Delete(1),
        },
    )
    .unwrap();
    assert_eq!(cancels(&h.drain()), [st[1].0]);
    let out = ready_all(&mut h, 2, &[st[0].0, added[0].0]);
    assert!(released(&out), "the deleted component is not waited for");
    let refused = h.s.handle(
        3,
        Event::Edit {
            job: id,
            edit: Edit::Delete(0),
        },
    );
    assert_eq!(refused, Err(Rejected::Committed(id)));
}

#[test]
fn cancel_cancels_every_live_launch() {
    let mut h = H::new(SchedulerConfig::default(), &[32, 32]);
    let (id, cmds) = h.submit(unordered(&[8, 8]));
    let st = starts(&cmds);
    let out = h.at(1, Event::Cancel { job: id });
    assert_eq!(cancels(&out), [st[0].0, st[1].0]);
    assert!(out
        .iter()
        .any(|c| matches!(c, Command::JobFailed { reason, .. } if reason == "cancelled")));
    assert_eq!(h.s.site_state(0).unwrap().idle, 32);
    assert_eq!(
        h.s.handle(2, Event::Cancel { job: id }),
        Err(Rejected::Ended(id))
    );
    assert_eq!(
        h.s.handle(2, Event::Cancel { job: 99 }),
        Err(Rejected::UnknownJob(99))
    );
}

#[test]
fn submissions_that_can_never_run_are_refused() {
    let mut h = H::new(SchedulerConfig::default(), &[32, 32]);
    let mut ordered = unordered(&[4]);
    ordered.kind = JobKind::Ordered;
    ordered.components[0].site = Some("nowhere".into());
    let e = h.s.handle(0, Event::Submit(Box::new(ordered))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "component 0 names site `nowhere`, which is not in the site list"
    );
    let e =
        h.s.handle(0, Event::Submit(Box::new(unordered(&[40]))))
            .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("the job can never run here: component 0"),
        "{e}"
    );
    assert_eq!(h.s.jobs().count(), 0);
}

#[test]
fn fcfs_blocks_behind_the_head_and_fpfs_lets_a_fitting_job_pass() {
    for (queue, small_starts) in [(QueueConfig::Fcfs, false), (QueueConfig::Fpfs, true)] {
        let config = SchedulerConfig {
            queue,
            ..SchedulerConfig::default()
        };
        let mut h = H::new(config, &[32, 32]);
        let (_, cmds) = h.submit(unordered(&[24, 24]));
        assert_eq!(starts(&cmds).len(), 2);
        let (_, cmds) = h.submit(unordered(&[16, 16])); // does not fit now
        assert!(starts(&cmds).is_empty());
        let (_, cmds) = h.submit(unordered(&[4]));
        assert_eq!(!starts(&cmds).is_empty(), small_starts);
    }
}

#[test]
fn the_monitor_sees_other_users_and_placement_follows() {
    let mut h = H::new(SchedulerConfig::default(), &[64, 32]);
    h.at(
        0,
        Event::SiteStatus {
            site: 0,
            idle: 8,
            total: 64,
            healthy: true,
            other: 0,
        },
    );
    let (_, cmds) = h.submit(unordered(&[16]));
    assert_eq!(starts(&cmds)[0].2, 1);
}

#[test]
fn a_job_left_with_only_an_optional_component_commits_when_it_is_ready() {
    let config = SchedulerConfig {
        interactive_default: InteractiveDefault::Delete,
        ..SchedulerConfig::default()
    };
    let mut h = H::new(config, &[8, 8]);
    let mut job = unordered(&[2, 2]);
    job.components[0].start_type = StartType::Interactive;
    job.components[1].start_type = StartType::Optional;
    let (_, cmds) = h.submit(job);
    let st = starts(&cmds);
    let out = h.at(
        1,
        Event::ComponentFailed {
            fault: Fault::Site,
            launch: st[0].0,
            reason: "x".into(),
        },
    );
    assert!(!released(&out), "no component is at the barrier yet");
    let out = ready_all(&mut h, 2, &[st[1].0]);
    assert!(released(&out));
}

#[test]
fn events_of_one_instant_are_decided_together() {
    // Two running jobs of 5 end at t = 100; a big job (10) and then a small one (5) wait.
    // One event at a time, the first end lets the small job pass the big one (FPFS); taken
    // together, both ends free 10 processors first and the big job, queued earlier, starts.
    for together in [false, true] {
        let config = SchedulerConfig {
            queue: QueueConfig::Fpfs,
            ..SchedulerConfig::default()
        };
        let mut h = H::new(config, &[10]);
        let a = starts(&h.submit(unordered(&[5])).1)[0].0;
        let b = starts(&h.submit(unordered(&[5])).1)[0].0;
        let (big, _) = h.submit(unordered(&[10]));
        let (small, _) = h.submit(unordered(&[5]));
        let ends = [
            Event::ComponentFinished { launch: a },
            Event::ComponentFinished { launch: b },
        ];
        let cmds = if together {
            h.s.handle_all(100, ends);
            h.drain()
        } else {
            ends.into_iter().flat_map(|e| h.at(100, e)).collect()
        };
        let started: Vec<JobId> = cmds
            .iter()
            .filter_map(|c| match c {
                Command::StartComponent(s) => Some(s.job),
                _ => None,
            })
            .collect();
        assert_eq!(started, if together { vec![big] } else { vec![small] });
    }
}

#[test]
fn a_component_that_dies_before_the_barrier_is_a_submission_error() {
    // Regression: a launch that started its processes but failed before reporting at the
    // barrier was counted as a completion error, which only a finished component resets.
    let mut h = H::new(SchedulerConfig::default(), &[16]);
    let (_, cmds) = h.submit(unordered(&[4]));
    let (launch, ..) = starts(&cmds)[0];
    h.at(1, Event::ComponentStarted { launch });
    h.at(
        2,
        Event::ComponentFailed {
            fault: Fault::Site,
            launch,
            reason: "crashed at start-up".into(),
        },
    );
    let st = h.s.site_state(0).unwrap();
    assert_eq!((st.submit_errors, st.completion_errors), (1, 0));
}

/// A job whose component `silent` starts and never checks in: each try is aborted at the
/// barrier timeout and the next one waits a back-off that doubles up to its cap.
#[test]
fn a_silent_component_times_out_at_the_barrier_and_the_job_retries_with_growing_waits() {
    let config = SchedulerConfig {
        barrier_timeout: Some(60_000),
        retry_backoff: 10_000,
        retry_backoff_max: 40_000,
        max_submit_failures: Some(10),
        ..SchedulerConfig::default()
    };
    let mut h = H::new(config, &[16, 16]);
    let (id, mut cmds) = h.submit(unordered(&[4, 4]));
    let mut t = 0;
    let mut waits = Vec::new();
    for _ in 0..4 {
        let st = starts(&cmds);
        assert_eq!(st.len(), 2, "a whole new try at {t}");
        h.at(t, Event::ComponentStarted { launch: st[0].0 });
        h.at(t, Event::ComponentReady { launch: st[0].0 });
        h.at(t, Event::ComponentStarted { launch: st[1].0 });
        assert_eq!(h.s.next_wakeup(), Some(t + 60_000));
        let out = h.at(t + 60_000, Event::Tick);
        assert_eq!(cancels(&out), [st[1].0, st[0].0]);
        assert!(!released(&out));
        let reason = out
            .iter()
            .find_map(|c| match c {
                Command::Notify(Notice::Requeued { reason, .. }) => Some(reason.clone()),
                _ => None,
            })
            .expect("requeued");
        assert!(
            reason.contains("did not check in at the barrier within the barrier timeout (1m)"),
            "{reason}"
        );
        assert_eq!(h.s.job(id).map(|j| j.phase), Some(jobs::Phase::Queued));
        let next = h.s.next_wakeup().expect("the retry is timed");
        waits.push(next - (t + 60_000));
        assert!(h.s.job(id).is_some_and(|j| j.retry_at() == Some(next)));
        assert_eq!(h.s.queued(), 0, "out of the queue during its back-off");
        t = next;
        cmds = h.at(t, Event::Tick);
    }
    assert_eq!(waits, [10_000, 20_000, 40_000, 40_000]);
}

#[test]
fn a_job_sets_its_own_barrier_timeout_and_a_checked_in_component_is_not_timed_out() {
    let config = SchedulerConfig {
        barrier_timeout: Some(600_000),
        ..SchedulerConfig::default()
    };
    let mut h = H::new(config, &[16, 16]);
    let job = unordered(&[4]).with(|e| e.barrier_timeout = Some(5_000));
    let (_, cmds) = h.submit(job);
    let l = starts(&cmds)[0].0;
    h.at(1_000, Event::ComponentStarted { launch: l });
    assert_eq!(h.s.next_wakeup(), Some(6_000));
    let out = h.at(6_000, Event::Tick);
    assert_eq!(cancels(&out), [l]);

    // A component at the barrier in time is left alone when its timer fires.
    let (_, cmds) = h.submit(unordered(&[4]));
    let l = starts(&cmds)[0].0;
    h.at(7_000, Event::ComponentStarted { launch: l });
    assert!(released(&h.at(8_000, Event::ComponentReady { launch: l })));
    let out = h.at(607_000, Event::Tick);
    assert!(cancels(&out).is_empty(), "{out:?}");
}

#[test]
fn a_job_cancelled_during_its_back_off_ends_and_does_not_come_back() {
    let config = SchedulerConfig {
        retry_backoff: 10_000,
        retry_backoff_max: 10_000,
        ..SchedulerConfig::default()
    };
    let mut h = H::new(config, &[16]);
    let (id, cmds) = h.submit(unordered(&[4]));
    let l = starts(&cmds)[0].0;
    h.at(
        1,
        Event::ComponentFailed {
            fault: Fault::Site,
            launch: l,
            reason: "boom".into(),
        },
    );
    assert!(h.s.job(id).is_some_and(|j| j.retry_at() == Some(10_001)));
    h.at(2, Event::Cancel { job: id });
    let out = h.at(10_001, Event::Tick);
    assert!(starts(&out).is_empty());
    assert_eq!(h.s.job(id).map(|j| j.phase), Some(jobs::Phase::Ended));
}

/// Issue 20: a job whose own program fails before the barrier fails after its tries and
/// leaves every site usable; the same failures of the sites' make them unusable.
#[test]
fn the_jobs_own_failures_count_against_the_job_only_and_the_sites_against_the_site() {
    for (fault, sites_usable) in [(Fault::Job, true), (Fault::Site, false)] {
        let config = SchedulerConfig {
            max_submit_failures: Some(5),
            ..SchedulerConfig::default()
        };
        let mut h = H::new(config, &[16, 16, 16]);
        let (id, mut cmds) = h.submit(unordered(&[4, 4, 4]));
        let mut t = 0;
        while h.s.job(id).is_some_and(|j| j.phase != jobs::Phase::Ended) {
            let st = starts(&cmds);
            if st.is_empty() {
                break;
            }
            t += 1;
            cmds = h.at(
                t,
                Event::ComponentFailed {
                    launch: st[0].0,
                    reason: "process 0 exited with 3".into(),
                    fault,
                },
            );
        }
        let record = &h.s.job(id).expect("known").record;
        let usable: Vec<bool> = (0..3)
            .map(|s| h.s.site_state(s).is_some_and(|x| x.usable()))
            .collect();
        if sites_usable {
            assert_eq!(record.submit_failures(), 6, "failed after its 5 retries");
            assert_eq!(usable, [true; 3]);
            let errors: Vec<u32> = (0..3)
                .map(|s| h.s.site_state(s).map_or(9, |x| x.submit_errors))
                .collect();
            assert_eq!(errors, [0; 3]);
        } else {
            assert!(usable.contains(&false), "{usable:?}");
        }
    }
}

/// Issue 20: a site its errors took out is probed, let back on probation once its monitor
/// has read it healthy for a while, taken out at once by an error on probation with a longer
/// wait before the next probe, and kept by a success; an operator's down is never probed.
#[test]
fn a_site_out_for_its_errors_comes_back_by_itself_on_probation() {
    use coalloc_core::scheduler::recovery::SiteRecovery;
    use coalloc_core::scheduler::sites::SiteControl;
    let config = SchedulerConfig {
        site_faults: sites::SiteFaultLimits {
            submit_errors: 1,
            completion_errors: 1,
        },
        site_recovery: Some(SiteRecovery {
            probe_after: 60_000,
            healthy_for: 10_000,
            probe_max: 240_000,
        }),
        max_submit_failures: None,
        ..SchedulerConfig::default()
    };
    let mut h = H::new(config, &[16, 16]);
    let on_s0 = || {
        Job::new(
            JobKind::Ordered,
            vec![Component {
                count: 4,
                site: Some("s0".into()),
                ..Component::default()
            }],
        )
    };
    let fail = |h: &mut H, t: Time, launch: LaunchId| {
        h.at(
            t,
            Event::ComponentFailed {
                launch,
                reason: "NODE_FAIL".into(),
                fault: Fault::Site,
            },
        )
    };
    let state = |h: &H| h.s.site_state(0).cloned().expect("site 0");
    let (_, cmds) = h.submit(on_s0());
    let out = fail(&mut h, 1_000, starts(&cmds)[0].0);
    assert!(starts(&out).is_empty(), "s0 is out");
    assert!(!state(&h).usable());
    assert_eq!(state(&h).out_since, Some(1_000));
    assert_eq!(
        state(&h).why_out().as_deref(),
        Some("1 consecutive submission errors")
    );
    // Its resource manager stops answering, then answers again at 55 s.
    h.at(2_000, status(0, 16, false));
    h.at(55_000, status(0, 16, true));
    assert_eq!(h.s.next_wakeup(), Some(61_000));
    assert!(
        starts(&h.at(61_000, Event::Tick)).is_empty(),
        "healthy only 6 s"
    );
    assert_eq!(h.s.next_wakeup(), Some(65_000));
    let back = h.at(65_000, Event::Tick);
    assert!(state(&h).usable() && state(&h).probation);
    assert_eq!(state(&h).out_since, None);
    // The waiting job goes there at once, and fails on probation: out again, and the next
    // probe waits twice as long.
    let out = fail(&mut h, 66_000, starts(&back)[0].0);
    assert!(!state(&h).usable() && !state(&h).probation);
    assert_eq!(state(&h).relapses, 1);
    assert_eq!(state(&h).probe_at, Some(66_000 + 120_000));
    assert!(starts(&out).is_empty());
    let back = h.at(186_000, Event::Tick);
    let l = starts(&back)[0].0;
    h.at(187_000, Event::ComponentStarted { launch: l });
    assert!(!state(&h).probation, "a success ends the probation");
    assert_eq!(state(&h).relapses, 0);

    // An operator's down is not probed; resume brings it back.
    h.s.handle(
        188_000,
        Event::SiteControl {
            site: 0,
            control: SiteControl::Down,
            reason: "disk swap".into(),
        },
    )
    .unwrap();
    assert_eq!(state(&h).why_out().as_deref(), Some("down: disk swap"));
    assert_eq!(state(&h).out_since, Some(188_000));
    h.at(10_000_000, Event::Tick);
    assert!(!state(&h).usable());
    h.s.handle(
        10_000_001,
        Event::SiteControl {
            site: 0,
            control: SiteControl::Resume,
            reason: String::new(),
        },
    )
    .unwrap();
    assert!(state(&h).usable());
}

fn status(site: SiteId, processors: u32, healthy: bool) -> Event {
    Event::SiteStatus {
        site,
        idle: processors,
        total: processors,
        healthy,
        other: 0,
    }
}

/// Issue 20: with the admission backlog, 300 submissions beyond the queue cap are all taken
/// (none refused), wait out of the queue, and enter it in submission order as room frees;
/// every one of them runs, in that order under FCFS.
#[test]
fn submissions_beyond_the_queue_cap_wait_for_admission_and_are_admitted_in_order() {
    let config = SchedulerConfig {
        max_queued: Some(10),
        admission_backlog: true,
        ..SchedulerConfig::default()
    };
    let mut h = H::new(config, &[4]);
    let mut ids = Vec::new();
    let mut started = Vec::new();
    for _ in 0..311 {
        let (id, cmds) = h.submit(unordered(&[4]));
        ids.push(id);
        started.extend(starts(&cmds));
    }
    // One runs, ten are queued, the other 300 wait for admission.
    assert_eq!(started.len(), 1);
    assert_eq!((h.s.queued(), h.s.awaiting_admission()), (10, 300));
    assert!(h.s.job(ids[310]).is_some_and(|j| j.awaiting_admission));
    // Cancelling a waiting job takes it out of the backlog.
    h.at(1, Event::Cancel { job: ids[200] });
    assert_eq!(h.s.awaiting_admission(), 299);
    let mut order = Vec::new();
    let mut t = 1;
    while let Some(&(launch, ..)) = started.first() {
        let job =
            h.s.jobs()
                .find(|j| j.comps.iter().any(|c| c.launch == Some(launch)));
        order.push(job.expect("a running job").id);
        t += 1;
        h.at(t, Event::ComponentReady { launch });
        started = starts(&h.at(t, Event::ComponentFinished { launch }));
        assert!(h.s.queued() <= 10);
    }
    let expected: Vec<JobId> = ids.iter().copied().filter(|&i| i != ids[200]).collect();
    assert_eq!(order, expected, "every job ran, in submission order");
    assert_eq!((h.s.queued(), h.s.awaiting_admission()), (0, 0));

    // Without the backlog, a submission beyond the cap is refused (the simulator's way).
    let config = SchedulerConfig {
        max_queued: Some(1),
        ..SchedulerConfig::default()
    };
    let mut h = H::new(config, &[4]);
    h.submit(unordered(&[4]));
    h.submit(unordered(&[4]));
    let refused = h.s.handle(0, Event::Submit(Box::new(unordered(&[4]))));
    assert_eq!(refused, Err(Rejected::QueueFull(1)));
}

/// Issue 20 item 4: a job held at the barrier (seed 002 §3.2's interactive transaction)
/// waits for its owner's commit, its interactive component's failure is left to the owner,
/// who substitutes it; then the commit releases it.
#[test]
fn a_held_job_waits_for_its_owners_commit_takes_an_edit_and_commits() {
    let mut h = H::new(SchedulerConfig::default(), &[16, 16, 16]);
    let mut job = unordered(&[4, 4]).with(|e| e.hold_at_barrier = true);
    job.components[1].start_type = StartType::Interactive;
    let (id, cmds) = h.submit(job);
    let st = starts(&cmds);
    h.at(1, Event::ComponentReady { launch: st[0].0 });
    let out = h.at(
        2,
        Event::ComponentFailed {
            launch: st[1].0,
            reason: "exit 3".into(),
            fault: Fault::Job,
        },
    );
    assert!(
        starts(&out).is_empty(),
        "not substituted by itself: {out:?}"
    );
    assert!(out
        .iter()
        .any(|c| matches!(c, Command::Notify(Notice::InteractiveFailed { .. }))));
    assert!(
        out.iter()
            .any(|c| matches!(c, Command::Notify(Notice::AwaitingCommit { job }) if *job == id)),
        "the owner hears it may commit without it: {out:?}"
    );
    assert!(!released(&out));
    // The owner substitutes it instead.
    let sub = Component {
        count: 2,
        start_type: StartType::Interactive,
        ..Component::default()
    };
    h.s.handle(
        3,
        Event::Edit {
            job: id,
            edit: Edit::Substitute(1, sub),
        },
    )
    .unwrap();
    let new = starts(&h.drain());
    assert_eq!(new.len(), 1);
    let out = h.at(4, Event::ComponentReady { launch: new[0].0 });
    assert!(!released(&out), "held for the owner: {out:?}");
    assert!(out
        .iter()
        .any(|c| matches!(c, Command::Notify(Notice::AwaitingCommit { .. }))));
    assert_eq!(h.s.job(id).map(|j| j.phase), Some(jobs::Phase::Starting));
    h.s.handle(5, Event::Commit { job: id }).unwrap();
    assert!(released(&h.drain()));
    assert_eq!(
        h.s.handle(6, Event::Commit { job: id }),
        Err(Rejected::Committed(id))
    );
    // A job that is not held refuses a commit.
    let (other, _) = h.submit(unordered(&[2]));
    assert!(matches!(
        h.s.handle(7, Event::Commit { job: other }),
        Err(Rejected::Invalid(_))
    ));
}

/// A launch waiting for its submission's answer: its start command is made again as it was
/// first made (a driver that took over and must send it again, the command covered by a
/// snapshot); not once the launch reported, nor for a launch no longer current.
#[test]
fn a_pending_launchs_start_is_made_again_as_it_was() {
    let mut h = H::new(SchedulerConfig::default(), &[4, 4]);
    let (_, cmds) = h.submit(unordered(&[3, 2]));
    let first: Vec<Start> = cmds
        .iter()
        .filter_map(|c| match c {
            Command::StartComponent(s) => Some((**s).clone()),
            _ => None,
        })
        .collect();
    assert_eq!(first.len(), 2);
    for s in &first {
        assert_eq!(h.s.pending_start(s.launch).as_ref(), Some(s));
    }
    h.at(
        10,
        Event::ComponentReady {
            launch: first[0].launch,
        },
    );
    assert_eq!(h.s.pending_start(first[0].launch), None, "it reported");
    assert_eq!(h.s.pending_start(first[1].launch).as_ref(), Some(&first[1]));
    assert_eq!(h.s.pending_start(LaunchId(99)), None);
}
