//! KOALA's placement queues (seed 000 §3.1): an immediate first try, then scans every
//! interval, the high-priority queue S times per scan of the low-priority one, a try limit.

mod common;
use common::{drain, failure, submit};

use coalloc_core::model::*;
use coalloc_core::queue::koala::KoalaParams;
use coalloc_core::scheduler::*;

fn one(count: u32, p: Priority) -> Job {
    let mut j = Job::new(
        JobKind::Total,
        vec![Component {
            count,
            ..Component::default()
        }],
    );
    j.priority = p;
    j
}

fn started_jobs(cmds: &[Command]) -> Vec<JobId> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::StartComponent(s) => Some(s.job),
            _ => None,
        })
        .collect()
}

fn koala(params: KoalaParams) -> Scheduler {
    let config = SchedulerConfig {
        queue: QueueConfig::Koala(params),
        ..SchedulerConfig::default()
    };
    Scheduler::new(config, vec![Site::cluster("fs0", 32)])
}

#[test]
fn the_high_queue_is_scanned_s_times_per_scan_of_the_low_queue() {
    let mut s = koala(KoalaParams::default());
    let (x, cmds) = submit(&mut s, 0, one(32, Priority::Low));
    assert_eq!(started_jobs(&cmds), [x], "the first try is at submission");
    assert_eq!(s.next_wakeup(), None, "no scans while the queues are empty");
    let (low, cmds) = submit(&mut s, 10_000, one(16, Priority::Low));
    assert!(started_jobs(&cmds).is_empty());
    let (high, _) = submit(&mut s, 10_000, one(16, Priority::High));
    assert_eq!(s.next_wakeup(), Some(250_000));
    // X ends at one minute; nothing is tried until the next scan.
    let launch = LaunchId(1);
    s.handle(60_000, Event::ComponentFinished { launch })
        .unwrap();
    assert!(started_jobs(&drain(&mut s)).is_empty());
    // Scan 1 (high) at 4m10s starts the high-priority job only.
    s.handle(250_000, Event::Tick).unwrap();
    assert_eq!(started_jobs(&drain(&mut s)), [high]);
    // Scan 2 (high, empty) at 8m10s; scan 3 (low) at 12m10s.
    s.handle(490_000, Event::Tick).unwrap();
    assert!(started_jobs(&drain(&mut s)).is_empty());
    assert_eq!(s.next_wakeup(), Some(730_000));
    s.handle(730_000, Event::Tick).unwrap();
    assert_eq!(started_jobs(&drain(&mut s)), [low]);
}

#[test]
fn a_job_past_the_try_limit_fails() {
    let mut s = koala(KoalaParams {
        max_tries: Some(1),
        scan_interval: 60_000,
        s: 1,
    });
    submit(&mut s, 0, one(32, Priority::Low));
    let (j, _) = submit(&mut s, 0, one(8, Priority::High));
    s.handle(60_000, Event::Tick).unwrap();
    let reason = failure(&drain(&mut s), j).expect("failed");
    assert_eq!(reason, "no placement after 2 tries (limit of 1 reached)");
    assert_eq!(s.queued(), 0);
}
