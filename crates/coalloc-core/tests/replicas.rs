//! The replica catalog as the core sees it (seed 000 §2.3): replicas that appear at run time
//! make a waiting job placeable, a failed transfer counts against the file's site and is
//! re-sourced from another replica before its component is placed again (seed 000 §2.5).

mod common;
use common::{drain, starts, submit};

use coalloc_core::model::*;
use coalloc_core::placement::Fit;
use coalloc_core::scheduler::*;

fn sites() -> Vec<Site> {
    let mut s: Vec<Site> = (0..3).map(|i| Site::cluster(format!("s{i}"), 8)).collect();
    for (a, site) in s.iter_mut().enumerate() {
        for b in (0..3).filter(|&b| b != a) {
            site.bandwidth.insert(format!("s{b}"), 1_000_000);
        }
    }
    s
}

fn job(count: u32) -> Job {
    let mut j = Job::new(
        JobKind::Unordered,
        vec![Component {
            count,
            ..Component::default()
        }],
    );
    j.extra_mut().input_file = Some(Box::new(InputFile {
        name: "data".into(),
        size: 2_000_000,
        distribution: FileDistribution::Whole,
    }));
    j
}

fn config() -> SchedulerConfig {
    SchedulerConfig {
        fit: Fit::CloseToFiles,
        claiming: Claiming::Icp(IcpParams::default()),
        ..SchedulerConfig::default()
    }
}

fn transfers(cmds: &[Command]) -> Vec<(TransferId, SiteId, SiteId)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::StartTransfer {
                transfer, from, to, ..
            } => Some((*transfer, *from, *to)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_registered_replica_is_used_by_close_to_files_and_a_removed_one_is_forgotten() {
    let mut s = Scheduler::new(config(), sites());
    let replica = |site, present| Event::Replica {
        site,
        file: "data".into(),
        present,
    };
    s.handle(0, replica(1, true)).unwrap();
    assert_eq!(s.sites()[1].files, ["data"]);
    // Close-to-Files: the replica's own site needs no transfer.
    let (id, cmds) = submit(&mut s, 10, job(8));
    assert!(transfers(&cmds).is_empty(), "{cmds:?}");
    assert_eq!(s.job(id).unwrap().record.run().placed, Some(10));
    s.handle(20, replica(1, false)).unwrap();
    assert!(s.sites()[1].files.is_empty());
    // With no replica left, a job needing the file is refused with a clear reason.
    let refused = s.handle(25, Event::Submit(Box::new(job(8))));
    assert!(
        matches!(&refused, Err(Rejected::Invalid(m)) if m.contains("no usable site holds a replica")),
        "{refused:?}"
    );
    assert_eq!(
        s.handle(30, replica(7, true)),
        Err(Rejected::UnknownSite(7))
    );
}

#[test]
fn a_failed_transfer_counts_against_the_file_site_not_the_execution_site() {
    let mut sites = sites();
    sites[0].files = vec!["data".into()];
    sites[0].processors = 4;
    let mut s = Scheduler::new(config(), sites);
    // 8 processors: not on s0 (4), so the file moves from s0.
    let (_, cmds) = submit(&mut s, 0, job(8));
    let t = transfers(&cmds);
    assert_eq!(t.len(), 1, "{cmds:?}");
    let (transfer, from, to) = t[0];
    assert_eq!(from, 0);
    s.handle(
        100,
        Event::TransferDone {
            transfer,
            ok: false,
        },
    )
    .unwrap();
    drain(&mut s);
    assert_eq!(s.site_state(from).unwrap().submit_errors, 1);
    assert_eq!(s.site_state(to).unwrap().submit_errors, 0);
}

#[test]
fn a_failed_transfer_of_a_claimed_component_is_also_the_file_sites_error() {
    let mut sites = sites();
    sites[0].files = vec!["data".into()];
    sites[0].processors = 4;
    let mut s = Scheduler::new(config(), sites);
    // A tiny file: JCT0 is now, so the component is claimed (started) before the transfer
    // ends.
    let mut j = job(8);
    j.extra_mut().input_file.as_mut().unwrap().size = 10;
    let (_, cmds) = submit(&mut s, 0, j);
    let (transfer, from, to) = transfers(&cmds)[0];
    let started = cmds
        .iter()
        .any(|c| matches!(c, Command::StartComponent(st) if st.site == to));
    assert!(started, "{cmds:?}");
    s.handle(
        5,
        Event::TransferDone {
            transfer,
            ok: false,
        },
    )
    .unwrap();
    let cmds = drain(&mut s);
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::CancelComponent { site, .. } if *site == to)),
        "{cmds:?}"
    );
    assert_eq!(s.site_state(from).unwrap().submit_errors, 1);
    assert_eq!(s.site_state(to).unwrap().submit_errors, 0);
}

#[test]
fn measured_transfers_replace_the_configured_bandwidth_in_the_estimates() {
    let mut sites = sites();
    sites[0].files = vec!["data".into()];
    sites[0].processors = 4;
    // Configured: s0 -> s1 and s0 -> s2 alike (1 MB/s); measured, s0 -> s2 is 4 MB/s.
    let mut s = Scheduler::new(config(), sites);
    let measured = |from, to, bytes, millis| Event::TransferMeasured {
        from,
        to,
        bytes,
        millis,
    };
    s.handle(0, measured(0, 2, 4_000_000, 1_000)).unwrap();
    assert_eq!(s.measured_bandwidth()[&(0, 2)], 4_000_000);
    s.handle(1, measured(0, 2, 2_000_000, 1_000)).unwrap();
    assert_eq!(s.measured_bandwidth()[&(0, 2)], 3_500_000);
    assert_eq!(s.sites()[0].bandwidth["s2"], 3_500_000);
    assert_eq!(
        s.sites()[0].bandwidth["s1"],
        1_000_000,
        "configured, unmeasured"
    );
    // Close-to-Files now prefers s2, and the FTT is 2 MB at 3.5 MB/s.
    let (id, cmds) = submit(&mut s, 10, job(8));
    assert_eq!(transfers(&cmds)[0].2, 2, "{cmds:?}");
    let claim = s.job(id).unwrap().claim().copied().unwrap();
    assert_eq!(claim.ftt, 572);
    assert_eq!(
        s.handle(20, measured(0, 9, 1, 1)),
        Err(Rejected::UnknownSite(9))
    );
}

#[test]
fn a_failed_transfer_is_re_sourced_from_the_other_replica_and_the_component_keeps_its_site() {
    let mut sites = sites();
    // Replicas on s0 (fast to s2) and s1 (slow to s2); only s2 has room for 8.
    sites[0].files = vec!["data".into()];
    sites[1].files = vec!["data".into()];
    sites[0].processors = 4;
    sites[1].processors = 4;
    sites[0].bandwidth.insert("s2".into(), 4_000_000);
    let mut s = Scheduler::new(config(), sites);
    let mut j = job(8);
    // A tiny file: JCT0 is now, so the component is claimed (started) before the transfer
    // ends.
    j.extra_mut().input_file.as_mut().unwrap().size = 10;
    let (id, cmds) = submit(&mut s, 0, j);
    let t = transfers(&cmds);
    assert_eq!(t.iter().map(|t| (t.1, t.2)).collect::<Vec<_>>(), [(0, 2)]);
    assert!(cmds
        .iter()
        .any(|c| matches!(c, Command::StartComponent(st) if st.site == 2)));
    let done = |transfer| Event::TransferDone {
        transfer,
        ok: false,
    };
    // The fast replica fails: the file now comes from s1, to the same site, and the running
    // component is left alone; the error is s0's.
    s.handle(5, done(t[0].0)).unwrap();
    let cmds = drain(&mut s);
    let again = transfers(&cmds);
    assert_eq!(
        again.iter().map(|t| (t.1, t.2)).collect::<Vec<_>>(),
        [(1, 2)],
        "{cmds:?}"
    );
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, Command::CancelComponent { .. })),
        "{cmds:?}"
    );
    assert_eq!(s.site_state(0).unwrap().submit_errors, 1);
    assert_eq!(s.site_state(2).unwrap().submit_errors, 0);
    assert_eq!(s.job(id).unwrap().comps[0].transfer, Some(again[0].0));
    // The old transfer's late report changes nothing.
    s.handle(6, done(t[0].0)).unwrap();
    assert!(drain(&mut s).is_empty());
    // s1 fails too: no replica is left untried, the component is stopped (as before).
    s.handle(7, done(again[0].0)).unwrap();
    let cmds = drain(&mut s);
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::CancelComponent { site, .. } if *site == 2)),
        "{cmds:?}"
    );
    assert_eq!(s.site_state(1).unwrap().submit_errors, 1);
    assert_eq!(s.site_state(2).unwrap().submit_errors, 0);
}

#[test]
fn a_failed_transfer_before_the_claim_is_re_sourced_without_a_new_placement() {
    let mut sites = sites();
    sites[0].files = vec!["data".into()];
    sites[1].files = vec!["data".into()];
    sites[0].processors = 4;
    sites[1].processors = 4;
    sites[0].bandwidth.insert("s2".into(), 4_000_000);
    let mut s = Scheduler::new(config(), sites);
    // 2 MB at 4 MB/s: FTT 500 ms, the JCT is later than the failure.
    let (id, cmds) = submit(&mut s, 0, job(8));
    let t = transfers(&cmds);
    assert_eq!((t[0].1, t[0].2), (0, 2));
    s.handle(
        100,
        Event::TransferDone {
            transfer: t[0].0,
            ok: false,
        },
    )
    .unwrap();
    let cmds = drain(&mut s);
    let again = transfers(&cmds);
    assert_eq!(
        again.iter().map(|t| (t.1, t.2)).collect::<Vec<_>>(),
        [(1, 2)],
        "{cmds:?}"
    );
    let j = s.job(id).unwrap();
    assert_eq!(j.comps[0].site, Some(2));
    assert_eq!(j.record.placement_tries, 1, "not placed again");
    assert_eq!(s.site_state(0).unwrap().submit_errors, 1);
}

/// Found by the server's simulation harness (`coalloc-simtest --files --seed 26`): a restart
/// from a snapshot took each site's definition from the configuration, replicas included,
/// so the replicas registered at run time were forgotten and the journal's tail, replayed,
/// refused the submissions that needed them (and the jobs after took their numbers). The
/// bandwidths measured since were forgotten the same way (seed 16 of the same).
#[test]
fn a_restored_snapshot_keeps_the_replicas_and_the_measured_bandwidths() {
    let mut s = Scheduler::new(config(), sites());
    s.handle(
        0,
        Event::Replica {
            site: 2,
            file: "data".into(),
            present: true,
        },
    )
    .unwrap();
    s.handle(
        1,
        Event::TransferMeasured {
            from: 2,
            to: 0,
            bytes: 8_000_000,
            millis: 1_000,
        },
    )
    .unwrap();
    assert_eq!(s.sites()[2].bandwidth["s0"], 8_000_000);
    let mut bytes = Vec::new();
    ciborium::into_writer(&s.snapshot().expect("saved"), &mut bytes).expect("written");
    let saved = ciborium::from_reader(&bytes[..]).expect("read back");
    let (mut back, changes) = Scheduler::restore(config(), &sites(), saved).expect("restored");
    assert!(changes.is_empty(), "{changes:?}");
    assert_eq!(back.sites()[2].files, ["data"]);
    assert_eq!(back.sites()[2].bandwidth["s0"], 8_000_000);
    assert_eq!(
        back.sites()[2].bandwidth["s1"],
        1_000_000,
        "the configured one stays"
    );
    let (id, cmds) = submit(&mut back, 10, job(8));
    assert!(transfers(&cmds).is_empty(), "{cmds:?}");
    assert_eq!(back.job(id).unwrap().record.run().placed, Some(10));
}

/// Whether `cmds` release job `id`'s barrier.
fn releases(cmds: &[Command], id: JobId) -> bool {
    cmds.iter()
        .any(|c| matches!(c, Command::ReleaseBarrier { job } if *job == id))
}

/// The simulation harness's `--files` seed 126: a substitute of a started job's component
/// was placed without the job's input file and started on a site without it, with no
/// transfer, and the job committed. Now it goes where the file can reach (seed 000 §2.5),
/// the file is sent there, and the barrier waits for it.
#[test]
fn a_substituted_component_gets_the_input_file_before_the_barrier_opens() {
    let mut sites = sites();
    sites[0].files = vec!["data".into()];
    let mut s = Scheduler::new(config(), sites);
    // A tiny file on s0, and 4 processors: started on s0 at once, nothing to send.
    let mut j = job(4);
    j.extra_mut().input_file.as_mut().unwrap().size = 10;
    let (id, cmds) = submit(&mut s, 0, j);
    assert!(transfers(&cmds).is_empty(), "{cmds:?}");
    assert_eq!(starts(&cmds).iter().map(|s| s.2).collect::<Vec<_>>(), [0]);
    // The substitute needs 6: s0 has 4 left, so it goes to another site, and the file
    // follows it from s0.
    let six = Component {
        count: 6,
        ..Component::default()
    };
    s.handle(
        5,
        Event::Edit {
            job: id,
            edit: Edit::Substitute(0, six),
        },
    )
    .unwrap();
    let cmds = drain(&mut s);
    let t = transfers(&cmds);
    let new = starts(&cmds);
    assert_eq!(new.len(), 1, "{cmds:?}");
    let (launch, _, site) = new[0];
    assert_ne!(site, 0);
    assert_eq!(
        t.iter().map(|t| (t.1, t.2)).collect::<Vec<_>>(),
        [(0, site)]
    );
    assert_eq!(s.job(id).unwrap().comps[0].transfer, Some(t[0].0));
    // At the barrier before its file: no commit.
    s.handle(6, Event::ComponentStarted { launch }).unwrap();
    s.handle(7, Event::ComponentReady { launch }).unwrap();
    assert!(!releases(&drain(&mut s), id));
    assert_eq!(s.job(id).unwrap().phase, jobs::Phase::Starting);
    // The file is there: the job commits.
    s.handle(
        8,
        Event::TransferDone {
            transfer: t[0].0,
            ok: true,
        },
    )
    .unwrap();
    assert!(releases(&drain(&mut s), id));
    assert_eq!(s.job(id).unwrap().phase, jobs::Phase::Running);
}

/// The simulation harness's `--files` seeds 110 and 168: an ordered job was placed on its
/// named sites while no usable site held its input file, so no transfer started and its
/// barrier opened without the file. Now it waits for a usable replica.
#[test]
fn an_ordered_job_waits_while_no_usable_site_holds_its_input_file() {
    let mut sites = sites();
    sites[0].files = vec!["data".into()];
    let mut s = Scheduler::new(config(), sites);
    s.handle(
        0,
        Event::SetUsable {
            site: 0,
            usable: false,
        },
    )
    .unwrap();
    let mut j = job(4);
    j.kind = JobKind::Ordered;
    j.components[0].site = Some("s1".into());
    let (id, cmds) = submit(&mut s, 1, j);
    assert!(starts(&cmds).is_empty(), "{cmds:?}");
    assert_eq!(s.job(id).unwrap().phase, jobs::Phase::Queued);
    // The replica's site is back: the job is placed on s1 and the file sent from s0.
    s.handle(
        2,
        Event::SetUsable {
            site: 0,
            usable: true,
        },
    )
    .unwrap();
    let cmds = drain(&mut s);
    assert_eq!(
        transfers(&cmds)
            .iter()
            .map(|t| (t.1, t.2))
            .collect::<Vec<_>>(),
        [(0, 1)],
        "{cmds:?}"
    );
    assert_ne!(s.job(id).unwrap().phase, jobs::Phase::Queued);
}

/// The simulation harness's `--files` seed 774: a component whose file could not come (so
/// it had no site) was deleted, the job committed without it, and the run's sites held
/// `usize::MAX` for it, which the server's result log indexed the site list with.
#[test]
fn a_component_deleted_without_a_site_is_not_among_the_runs_sites() {
    let mut sites = sites();
    sites[0].files = vec!["data".into()];
    sites[0].processors = 4;
    let mut s = Scheduler::new(config(), sites);
    let mut j = job(8);
    j.components.push(j.components[0].clone());
    // 2 MB at 1 MB/s to s1 and s2: the claim waits for the transfers.
    let (id, cmds) = submit(&mut s, 0, j);
    let t = transfers(&cmds);
    assert_eq!(
        t.iter().map(|t| (t.1, t.2)).collect::<Vec<_>>(),
        [(0, 1), (0, 2)]
    );
    // Component 1's transfer fails and no other replica is left: it has no site now.
    let done = |transfer, ok| Event::TransferDone { transfer, ok };
    s.handle(100, done(t[1].0, false)).unwrap();
    assert_eq!(s.job(id).unwrap().comps[1].site, None);
    s.handle(
        200,
        Event::Edit {
            job: id,
            edit: Edit::Delete(1),
        },
    )
    .unwrap();
    s.handle(2_000, done(t[0].0, true)).unwrap();
    s.handle(2_100, Event::Tick).unwrap();
    let cmds = drain(&mut s);
    let started = starts(&cmds);
    assert_eq!(
        started.iter().map(|s| (s.1, s.2)).collect::<Vec<_>>(),
        [(0, 1)]
    );
    let launch = started[0].0;
    s.handle(2_200, Event::ComponentStarted { launch }).unwrap();
    s.handle(2_300, Event::ComponentReady { launch }).unwrap();
    assert!(releases(&drain(&mut s), id));
    assert_eq!(s.job(id).unwrap().record.sites(), [1]);
}
