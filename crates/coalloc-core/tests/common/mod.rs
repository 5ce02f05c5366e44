//! Helpers the scheduler's test files share: drive a [`Scheduler`] and read its commands.
#![allow(dead_code)] // each test file uses its own subset

use coalloc_core::model::{Component, Job, JobKind, Time};
use coalloc_core::scheduler::{Command, Event, JobId, LaunchId, Reply, Scheduler, SiteId};

/// An unordered job of components of these sizes (nothing else set).
pub fn unordered(counts: &[u32]) -> Job {
    Job::new(
        JobKind::Unordered,
        counts
            .iter()
            .map(|&count| Component {
                count,
                ..Component::default()
            })
            .collect(),
    )
}

/// Every command the scheduler has decided so far.
pub fn drain(s: &mut Scheduler) -> Vec<Command> {
    std::iter::from_fn(|| s.poll_command()).collect()
}

/// Answer at `t` every cancel among `cmds` of a draining launch (the core's `draining`)
/// with `Event::CancelTaken`, as a driver whose cancels take effect at once; `cmds` and
/// the commands the answers caused.
pub fn take_cancels(s: &mut Scheduler, t: Time, mut cmds: Vec<Command>) -> Vec<Command> {
    let mut seen = 0;
    while seen < cmds.len() {
        let taken: Vec<LaunchId> = cmds[seen..]
            .iter()
            .filter_map(|c| match c {
                Command::CancelComponent { launch, .. } => Some(*launch),
                _ => None,
            })
            .filter(|l| s.draining().get(*l).is_some())
            .collect();
        seen = cmds.len();
        for launch in taken {
            s.handle(t, Event::CancelTaken { launch })
                .expect("a cancel taken is accepted");
            cmds.extend(drain(s));
        }
    }
    cmds
}

/// Submit a job at `t`; its number and the commands the submission caused.
pub fn submit(s: &mut Scheduler, t: Time, job: Job) -> (JobId, Vec<Command>) {
    match s.handle(t, Event::Submit(Box::new(job))) {
        Ok(Reply::Submitted(id)) => (id, drain(s)),
        other => panic!("submission refused: {other:?}"),
    }
}

/// The starts among `cmds`: launch, component and site.
pub fn starts(cmds: &[Command]) -> Vec<(LaunchId, usize, SiteId)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::StartComponent(s) => Some((s.launch, s.component, s.site)),
            _ => None,
        })
        .collect()
}

/// The starts among `cmds` by job: job and site, in order.
pub fn job_starts(cmds: &[Command]) -> Vec<(JobId, SiteId)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::StartComponent(s) => Some((s.job, s.site)),
            _ => None,
        })
        .collect()
}

/// The launches started among `cmds`.
pub fn launches(cmds: &[Command]) -> Vec<LaunchId> {
    starts(cmds).into_iter().map(|s| s.0).collect()
}

/// The reason job `job` failed with, among `cmds` (`None`: it did not fail there).
pub fn failure(cmds: &[Command], job: JobId) -> Option<String> {
    cmds.iter().find_map(|c| match c {
        Command::JobFailed { job: j, reason, .. } if *j == job => Some(reason.clone()),
        _ => None,
    })
}
