//! Shared by the fuzz targets that run a job through a scheduler: drive it to its end with
//! every launch starting, checking in and finishing at once, and call `at_barrier` when a
//! held job waits for its owner's commit (`Notice::AwaitingCommit`).
use coalloc_core::model::{Site, Time};
use coalloc_core::scheduler::{Command, Event, JobId, Notice, Scheduler, SchedulerConfig};

/// A scheduler with the server's configuration and three clusters of 16.
pub fn served() -> Scheduler {
    let sites = vec![
        Site::cluster("alpha", 16),
        Site::cluster("beta", 16),
        Site::cluster("gamma", 16),
    ];
    Scheduler::new(SchedulerConfig::served(), sites)
}

/// Run for at most 64 rounds of commands, from time `now`.
pub fn run(s: &mut Scheduler, mut now: Time, mut at_barrier: impl FnMut(&mut Scheduler, Time, JobId)) {
    // Launches started and not yet finished or cancelled, with their job.
    let mut running = Vec::new();
    for _ in 0..64 {
        let mut events = Vec::new();
        let mut waiting = Vec::new();
        while let Some(c) = s.poll_command() {
            match c {
                Command::StartComponent(st) => {
                    running.push((st.job, st.launch));
                    events.push(Event::ComponentStarted { launch: st.launch });
                    events.push(Event::ComponentReady { launch: st.launch });
                }
                Command::CancelComponent { launch, .. } => {
                    running.retain(|r| r.1 != launch);
                    // The cancel takes effect at once (the core's `draining`).
                    if s.draining().get(launch).is_some() {
                        events.push(Event::CancelTaken { launch });
                    }
                }
                Command::ReleaseBarrier { job } => {
                    for (_, launch) in running.iter().filter(|r| r.0 == job) {
                        events.push(Event::ComponentFinished { launch: *launch });
                    }
                    running.retain(|r| r.0 != job);
                }
                Command::StartTransfer { transfer, .. } => {
                    events.push(Event::TransferDone { transfer, ok: true })
                }
                Command::Notify(Notice::AwaitingCommit { job }) => waiting.push(job),
                _ => {}
            }
        }
        let answered = !waiting.is_empty();
        for job in waiting {
            at_barrier(s, now, job);
        }
        if events.is_empty() && !answered {
            match s.next_wakeup() {
                Some(t) if t > now => {
                    now = t;
                    let _ = s.handle(now, Event::Tick);
                }
                _ => return,
            }
        }
        for e in events {
            let _ = s.handle(now, e);
        }
    }
}
