//! Draining launches (the scheduler's `draining` module; the simulation harness, seed 1391
//! of `--policies`): a committed run the core stops keeps its launches until the driver
//! says they are gone from their sites or their site is lost, and the job's next run is
//! placed and started meanwhile but not committed.

mod common;

use coalloc_core::model::*;
use coalloc_core::queue::tags::{ChainDispatch, TagsChainParams};
use coalloc_core::scheduler::draining::Drain;
use coalloc_core::scheduler::jobs::{CompPhase, Phase};
use coalloc_core::scheduler::snapshot;
use coalloc_core::scheduler::*;
use common::{drain, starts, submit, unordered};

/// Two sites of 4 processors; with `tags`, one TAGS chain over them, a 1 s limit on s0.
fn scheduler(tags: bool) -> Scheduler {
    let mut config = SchedulerConfig::default();
    if tags {
        config.queue = QueueConfig::TagsChain(TagsChainParams {
            chains: vec![vec![0, 1]],
            limits: vec![1_000],
            dispatch: ChainDispatch::RoundRobin,
            period: None,
        });
    }
    let sites = vec![Site::cluster("s0", 4), Site::cluster("s1", 4)];
    Scheduler::new(config, sites)
}

/// Launch `launch` runs and reaches the barrier at `t`; the commands that caused.
fn ready(s: &mut Scheduler, t: Time, launch: LaunchId) -> Vec<Command> {
    s.handle(t, Event::ComponentStarted { launch }).unwrap();
    s.handle(t, Event::ComponentReady { launch }).unwrap();
    drain(s)
}

fn released(cmds: &[Command], id: JobId) -> bool {
    cmds.iter()
        .any(|c| matches!(c, Command::ReleaseBarrier { job } if *job == id))
}

fn cancelled(cmds: &[Command]) -> Vec<(LaunchId, SiteId)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::CancelComponent { launch, site, .. } => Some((*launch, *site)),
            _ => None,
        })
        .collect()
}

/// A TAGS job killed at its limit after its commit: started again on the chain's next site
/// at once, its barrier held until the first launch's cancel is taken.
fn killed_and_placed_again(s: &mut Scheduler) -> (JobId, LaunchId, LaunchId) {
    let (id, out) = submit(s, 0, unordered(&[2]));
    let first = starts(&out)[0];
    assert_eq!(first.2, 0, "the chain's first site");
    assert!(released(&ready(s, 100, first.0), id));
    let out = {
        s.handle(1_100, Event::Tick).unwrap();
        drain(s)
    };
    assert_eq!(cancelled(&out), [(first.0, 0)]);
    let again = starts(&out);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].2, 1, "the chain's next site");
    assert_eq!(
        s.draining().get(first.0),
        Some(Drain {
            job: id,
            component: 0,
            site: 0
        })
    );
    // The processors are given back at once (see the module's reasons).
    assert_eq!(s.site_state(0).unwrap().ours, 0);
    assert_eq!(s.site_state(0).unwrap().idle, 4);
    (id, first.0, again[0].0)
}

#[test]
fn a_run_killed_after_commit_is_committed_again_only_once_its_launch_is_gone() {
    let mut s = scheduler(true);
    let (id, first, second) = killed_and_placed_again(&mut s);
    // The new launch is at the barrier; the first may still run past its own.
    let out = ready(&mut s, 1_200, second);
    assert!(!released(&out, id), "{out:?}");
    let j = s.job(id).unwrap();
    assert_eq!(
        (j.phase, j.comps[0].phase),
        (Phase::Starting, CompPhase::Ready)
    );
    // Its cancel took effect: the job commits now.
    s.handle(1_500, Event::CancelTaken { launch: first })
        .unwrap();
    let out = drain(&mut s);
    assert!(released(&out, id), "{out:?}");
    let j = s.job(id).unwrap();
    assert_eq!(j.phase, Phase::Running);
    assert_eq!(j.record.start(), Some(1_500));
    assert!(s.draining().is_empty());
    // A second word of it, or of a launch that never drained, changes nothing.
    for launch in [first, second, LaunchId(99)] {
        s.handle(1_600, Event::CancelTaken { launch }).unwrap();
        assert!(drain(&mut s).is_empty());
    }
    assert_eq!(s.job(id).unwrap().phase, Phase::Running);
}

#[test]
fn a_lost_site_is_not_waited_for() {
    let mut s = scheduler(true);
    let grace = 5_000;
    let (id, first, second) = killed_and_placed_again(&mut s);
    s.handle(1_150, Event::SiteDisconnected { site: 0, grace })
        .unwrap();
    let out = ready(&mut s, 1_200, second);
    assert!(!released(&out, id));
    // Within the grace: still waiting.
    s.handle(1_150 + grace - 1, Event::Tick).unwrap();
    assert!(!released(&drain(&mut s), id));
    assert!(s.draining().get(first).is_some());
    // Lost: given up on, and the job commits.
    s.handle(1_150 + grace, Event::Tick).unwrap();
    let out = drain(&mut s);
    assert!(released(&out, id), "{out:?}");
    assert!(s.draining().is_empty());
    assert_eq!(s.job(id).unwrap().record.start(), Some(1_150 + grace));
}

#[test]
fn a_failure_after_commit_drains_the_other_components_and_a_cancel_forgets_them() {
    let mut s = scheduler(false);
    // Two components of 4: one on each site.
    let (id, out) = submit(&mut s, 0, unordered(&[4, 4]));
    let st = starts(&out);
    assert_eq!(st.len(), 2);
    ready(&mut s, 10, st[0].0);
    assert!(released(&ready(&mut s, 10, st[1].0), id));
    // Component 0 dies after commit: the job goes back to its queue (no back-off here) and
    // is placed again at once; component 1's launch drains, the failed one does not.
    s.handle(
        500,
        Event::ComponentFailed {
            launch: st[0].0,
            reason: "exit 1".into(),
            fault: Fault::Job,
        },
    )
    .unwrap();
    let out = drain(&mut s);
    assert_eq!(cancelled(&out), [(st[1].0, st[1].2)]);
    let drained: Vec<LaunchId> = s.draining().iter().map(|(l, _)| l).collect();
    assert_eq!(drained, [st[1].0]);
    let again = starts(&out);
    assert_eq!(again.len(), 2);
    ready(&mut s, 600, again[0].0);
    assert!(!released(&ready(&mut s, 600, again[1].0), id));
    // The job is cancelled: nothing waits for its draining launch any more.
    s.handle(700, Event::Cancel { job: id }).unwrap();
    assert!(s.draining().is_empty());
    assert_eq!(s.job(id).unwrap().phase, Phase::Ended);
}

/// `s`'s snapshot as one of the older `form` would be, its core's map changed by `edit`
/// (taking out what that form lacked), read as that form and made whole.
fn as_form(
    s: &Scheduler,
    form: u32,
    edit: impl FnOnce(&mut Vec<(ciborium::Value, ciborium::Value)>),
) -> snapshot::Snapshot {
    use ciborium::Value;
    let mut bytes = Vec::new();
    ciborium::into_writer(&s.snapshot().unwrap(), &mut bytes).unwrap();
    let mut v: Value = ciborium::from_reader(&bytes[..]).unwrap();
    let Value::Map(top) = &mut v else { panic!() };
    let mut edit = Some(edit);
    for (k, val) in top.iter_mut() {
        match (k.as_text(), val) {
            (Some("version"), val) => *val = Value::Integer(form.into()),
            (Some("core"), Value::Map(core)) => edit.take().expect("one core")(core),
            _ => {}
        }
    }
    let mut old = Vec::new();
    ciborium::into_writer(&v, &mut old).unwrap();
    let head = snapshot::reading_form(form, || ciborium::from_reader(&old[..]).unwrap());
    snapshot::Snapshot::join(head, vec![])
}

#[test]
fn a_snapshot_keeps_the_draining_launches_and_a_form_6_head_has_none() {
    let mut s = scheduler(true);
    let (_, first, _) = killed_and_placed_again(&mut s);
    let sites = s.sites().to_vec();
    let config = || SchedulerConfig {
        queue: QueueConfig::TagsChain(TagsChainParams {
            chains: vec![vec![0, 1]],
            limits: vec![1_000],
            dispatch: ChainDispatch::RoundRobin,
            period: None,
        }),
        ..SchedulerConfig::default()
    };
    let mut bytes = Vec::new();
    ciborium::into_writer(&s.snapshot().unwrap(), &mut bytes).unwrap();
    let saved: snapshot::Snapshot = ciborium::from_reader(&bytes[..]).unwrap();
    let (back, _) = Scheduler::restore(config(), &sites, saved).unwrap();
    assert_eq!(back.draining(), s.draining());
    assert!(back.draining().get(first).is_some());
    // A form-6 head: no `draining` in the core.
    let head = as_form(&s, 6, |core| {
        core.retain(|(k, _)| k.as_text() != Some("draining"))
    });
    let (back, _) = Scheduler::restore(config(), &sites, head).unwrap();
    assert!(back.draining().is_empty());
}

/// The cancel of a draining launch goes again every `recancel_interval` (`draining.rs`): a
/// cancel asked once may be lost (an agent that gave it up, a manager down when it came)
/// while the launch runs on and the job's next run waits at its barrier.
const AGAIN: Time = 10_000;

/// [`scheduler`] without TAGS, cancelling draining launches again every [`AGAIN`].
fn recancelling() -> Scheduler {
    let config = SchedulerConfig {
        recancel_interval: Some(AGAIN),
        ..SchedulerConfig::default()
    };
    let sites = vec![Site::cluster("s0", 4), Site::cluster("s1", 4)];
    Scheduler::new(config, sites)
}

/// A job of two components of 4 commits at 10; component 0 fails at 500, so component 1's
/// launch drains (its cancel sent at 500), and the next run, placed again at once, is at
/// its barrier at 600. The job, the draining launch and its cancel command.
fn failed_after_commit(s: &mut Scheduler) -> (JobId, LaunchId, Command) {
    let (id, out) = submit(s, 0, unordered(&[4, 4]));
    let st = starts(&out);
    ready(s, 10, st[0].0);
    assert!(released(&ready(s, 10, st[1].0), id));
    let failed = Event::ComponentFailed {
        launch: st[0].0,
        reason: "exit 1".into(),
        fault: Fault::Job,
    };
    s.handle(500, failed).unwrap();
    let out = drain(s);
    let cancel = Command::CancelComponent {
        launch: st[1].0,
        job: id,
        component: 1,
        site: st[1].2,
    };
    assert_eq!(
        out.iter()
            .filter(|c| matches!(c, Command::CancelComponent { .. }))
            .collect::<Vec<_>>(),
        [&cancel]
    );
    let again = starts(&out);
    assert_eq!(again.len(), 2);
    ready(s, 600, again[0].0);
    assert!(!released(&ready(s, 600, again[1].0), id));
    (id, st[1].0, cancel)
}

#[test]
fn a_cancel_never_taken_is_sent_again_every_interval_until_it_is_taken() {
    let mut s = recancelling();
    let (id, launch, cancel) = failed_after_commit(&mut s);
    // The next cancel is due one interval after the first, and the driver is to wake then.
    assert_eq!(s.recancel_at(launch), Some(500 + AGAIN));
    assert_eq!(s.next_wakeup(), Some(500 + AGAIN));
    s.handle(500 + AGAIN - 1, Event::Tick).unwrap();
    assert_eq!(drain(&mut s), []);
    // Due: the same command again, and the next one an interval later.
    s.handle(500 + AGAIN, Event::Tick).unwrap();
    assert_eq!(drain(&mut s), std::slice::from_ref(&cancel));
    assert_eq!(s.next_wakeup(), Some(500 + 2 * AGAIN));
    // A driver that wakes late (or an event that comes after the time) sends it then, and
    // the next one is an interval after that: no burst of the ones missed.
    let late = 500 + 2 * AGAIN + 3_000;
    s.handle(late, Event::ComponentQueued { launch }).unwrap();
    assert_eq!(drain(&mut s), [cancel]);
    assert_eq!(s.next_wakeup(), Some(late + AGAIN));
    // Still waiting at its barrier all along.
    assert_eq!(s.job(id).unwrap().phase, Phase::Starting);
    // Taken: the job commits, and the cancel goes no more.
    s.handle(late + 100, Event::CancelTaken { launch }).unwrap();
    assert!(released(&drain(&mut s), id));
    assert!(s.draining().is_empty());
    assert_eq!(s.recancel_at(launch), None);
    // Its timer, set before, fires at its time (as the core's other timers of what has
    // moved on) and sends nothing, nor sets another.
    assert_eq!(s.next_wakeup(), Some(late + AGAIN));
    for t in [late + AGAIN, late + 5 * AGAIN] {
        s.handle(t, Event::Tick).unwrap();
        assert!(cancelled(&drain(&mut s)).is_empty());
    }
    assert_eq!(s.next_wakeup(), None);
}

#[test]
fn without_an_interval_a_cancel_is_asked_once() {
    // The simulator's configuration (its cancels take effect at once): nothing to wake for.
    let mut s = scheduler(false);
    let (_, launch, _) = failed_after_commit(&mut s);
    assert_eq!(s.recancel_at(launch), None);
    assert_eq!(s.next_wakeup(), None);
    s.handle(500 + 10 * AGAIN, Event::Tick).unwrap();
    assert!(cancelled(&drain(&mut s)).is_empty());
    assert!(s.draining().get(launch).is_some());
}

#[test]
fn no_cancel_goes_again_over_a_silent_link_and_none_once_the_site_is_given_up() {
    let mut s = recancelling();
    let (id, launch, cancel) = failed_after_commit(&mut s);
    let site = s.draining().get(launch).unwrap().site;
    let grace = 3 * AGAIN;
    s.handle(700, Event::SiteDisconnected { site, grace })
        .unwrap();
    drain(&mut s);
    // Silent: the call could not reach the agent; the schedule goes on.
    s.handle(500 + AGAIN, Event::Tick).unwrap();
    assert!(cancelled(&drain(&mut s)).is_empty());
    assert_eq!(s.recancel_at(launch), Some(500 + 2 * AGAIN));
    // Back within the grace: asked again at its time.
    s.handle(600 + AGAIN, Event::SiteReconnected { site })
        .unwrap();
    drain(&mut s);
    s.handle(500 + 2 * AGAIN, Event::Tick).unwrap();
    assert_eq!(drain(&mut s), [cancel]);
    // Silent past its grace: given up on at the tick its cancel was due, and not asked
    // again (the next run's component there fails with the site, and the run is aborted).
    let since = 500 + 2 * AGAIN + 1;
    s.handle(
        since,
        Event::SiteDisconnected {
            site,
            grace: AGAIN - 1,
        },
    )
    .unwrap();
    drain(&mut s);
    s.handle(500 + 3 * AGAIN, Event::Tick).unwrap();
    let out = drain(&mut s);
    assert!(
        !cancelled(&out).iter().any(|(l, _)| *l == launch),
        "{out:?}"
    );
    assert!(s.draining().is_empty());
    assert_eq!(s.recancel_at(launch), None);
    assert_eq!(s.job(id).unwrap().phase, Phase::Queued);
}

#[test]
fn a_restored_core_cancels_again_when_its_snapshot_would_have_and_a_form_7_one_after_its_time() {
    let mut s = recancelling();
    let (_, launch, cancel) = failed_after_commit(&mut s);
    // A first cancel again at 10,500, the next due at 20,500; the snapshot is taken at
    // 12,000.
    s.handle(500 + AGAIN, Event::Tick).unwrap();
    drain(&mut s);
    s.handle(12_000, Event::Tick).unwrap();
    assert_eq!(s.recancel_at(launch), Some(500 + 2 * AGAIN));
    let mut bytes = Vec::new();
    ciborium::into_writer(&s.snapshot().unwrap(), &mut bytes).unwrap();
    let sites = s.sites().to_vec();
    let config = || SchedulerConfig {
        recancel_interval: Some(AGAIN),
        ..SchedulerConfig::default()
    };
    // Restored: when the cancel goes again (and the driver is to wake), then it goes at
    // that time, not before, and the next an interval later.
    let restore = |config: SchedulerConfig, saved: snapshot::Snapshot| {
        let (mut back, _) = Scheduler::restore(config, &sites, saved).unwrap();
        assert!(back.draining().get(launch).is_some());
        let due = back.recancel_at(launch);
        assert_eq!(back.next_wakeup(), due);
        if let Some(t) = due {
            back.handle(t - 1, Event::Tick).unwrap();
            assert_eq!(drain(&mut back), []);
            back.handle(t, Event::Tick).unwrap();
            assert_eq!(drain(&mut back), std::slice::from_ref(&cancel));
            assert_eq!(back.recancel_at(launch), Some(t + AGAIN));
        }
        due
    };
    // Its timer is in the snapshot: asked again at 20,500, as the core it was taken of.
    let saved = || ciborium::from_reader(&bytes[..]).unwrap();
    assert_eq!(restore(config(), saved()), Some(500 + 2 * AGAIN));
    // Form 7 kept no timer of the repeated cancels: asked again an interval after the
    // snapshot's time.
    let recancelless = || {
        as_form(&s, 7, |core| {
            for (k, v) in core.iter_mut() {
                if let (Some("timers"), ciborium::Value::Array(timers)) = (k.as_text(), v) {
                    let n = timers.len();
                    timers.retain(|t| !format!("{t:?}").contains("Recancel"));
                    assert_eq!(n - timers.len(), 1, "{timers:?}");
                }
            }
        })
    };
    assert_eq!(restore(config(), recancelless()), Some(12_000 + AGAIN));
    // Restored without an interval: never again, and nothing to wake for.
    let none = SchedulerConfig::default;
    assert_eq!(restore(none(), saved()), None);
    assert_eq!(restore(none(), recancelless()), None);
}
