//! Reserve claiming (issue 31): the common start chosen from the files, the job's request and
//! every site's earliest (seed 000 §2.7), the roll back of a refused reservation (late
//! answers included), cancels and ends delete what was made, and a restart keeps the live
//! runs' reservations and deletes the others.

mod common;
use common::{drain, submit, unordered};

use coalloc_core::model::*;
use coalloc_core::scheduler::snapshot::Snapshot;
use coalloc_core::scheduler::*;

/// s0 and s1 (8 processors, may reserve), s2 (8, may not; it holds the replica of `data`,
/// 1 MB/s to the others).
fn sites() -> Vec<Site> {
    let mut s: Vec<Site> = (0..3).map(|i| Site::cluster(format!("s{i}"), 8)).collect();
    s[2].manager.insert("reserve".into(), "false".into());
    s[2].files.push("data".into());
    for b in 0..2 {
        s[2].bandwidth.insert(format!("s{b}"), 1_000_000);
    }
    s
}

/// Two components of 8 (so one on s0, one on s1), reading 2 MB of `data`: 2 s to move.
fn job_with_file(start: Option<Time>) -> Job {
    let mut j = job(&[8, 8]);
    j.extra_mut().input_file = Some(Box::new(InputFile {
        name: "data".into(),
        size: 2_000_000,
        distribution: FileDistribution::Whole,
    }));
    j.extra_mut().reserve = Some(ReserveRequest { start });
    j
}

fn job(counts: &[u32]) -> Job {
    let mut j = unordered(counts);
    j.set_max_wall_time(Some(60_000));
    j
}

fn reserving() -> SchedulerConfig {
    SchedulerConfig {
        claiming: Claiming::Reserve(Default::default()),
        ..SchedulerConfig::default()
    }
}

/// [`reserving`], with a fixed back-off of a minute before a rolled-back job's next try.
fn reserving_slowly() -> SchedulerConfig {
    SchedulerConfig {
        retry_backoff: 60_000,
        retry_backoff_max: 60_000,
        ..reserving()
    }
}

/// The queries among `cmds`: reservation, site, not before.
fn queries(cmds: &[Command]) -> Vec<(ReservationId, SiteId, Time)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::ReserveQuery {
                reservation,
                site,
                not_before,
                ..
            } => Some((*reservation, *site, *not_before)),
            _ => None,
        })
        .collect()
}

/// The reservations asked for among `cmds`: reservation, site, start, name.
fn reserves(cmds: &[Command]) -> Vec<(ReservationId, SiteId, Time, String)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Reserve {
                reservation,
                site,
                start,
                name,
                ..
            } => Some((*reservation, *site, *start, name.clone())),
            _ => None,
        })
        .collect()
}

/// The deletions among `cmds`: site and name.
fn unreserves(cmds: &[Command]) -> Vec<(SiteId, String)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Unreserve { site, name } => Some((*site, name.clone())),
            _ => None,
        })
        .collect()
}

fn starts(cmds: &[Command]) -> Vec<Start> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::StartComponent(s) => Some((**s).clone()),
            _ => None,
        })
        .collect()
}

fn offer(s: &mut Scheduler, t: Time, r: ReservationId, at: Result<Time, &str>) -> Vec<Command> {
    let earliest = at.map_err(str::to_owned);
    s.handle(
        t,
        Event::ReserveOffer {
            reservation: r,
            earliest,
        },
    )
    .expect("taken");
    drain(s)
}

fn answer(s: &mut Scheduler, t: Time, r: ReservationId, ok: Result<(), &str>) -> Vec<Command> {
    let result = ok.map_err(str::to_owned);
    s.handle(
        t,
        Event::Reserved {
            reservation: r,
            result,
        },
    )
    .expect("taken");
    drain(s)
}

fn idle(s: &Scheduler) -> Vec<u32> {
    (0..s.sites().len())
        .map(|i| s.site_state(i).unwrap().idle)
        .collect()
}

#[test]
fn the_common_start_is_the_latest_of_files_request_and_every_sites_earliest() {
    let mut s = Scheduler::new(SchedulerConfig::default(), sites());
    // Files arrive at 1000 + 2000; the job asks for no earlier than 4000.
    let (id, cmds) = submit(&mut s, 1_000, job_with_file(Some(4_000)));
    let q = queries(&cmds);
    assert_eq!(
        q.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
        vec![(0, 4_000), (1, 4_000)]
    );
    // The input file moves to both sites from placement on.
    let transfers: Vec<TransferId> = cmds
        .iter()
        .filter_map(|c| match c {
            Command::StartTransfer {
                transfer, from: 2, ..
            } => Some(*transfer),
            _ => None,
        })
        .collect();
    assert_eq!(transfers.len(), 2);
    assert!(starts(&cmds).is_empty());
    // The held processors: no other job can take them.
    assert_eq!(idle(&s), vec![0, 0, 8]);
    // s0 could start at 5000, s1 only at 9000: s0 is asked again from 9000.
    assert!(reserves(&offer(&mut s, 1_100, q[0].0, Ok(5_000))).is_empty());
    let again = offer(&mut s, 1_200, q[1].0, Ok(9_000));
    assert_eq!(queries(&again), vec![(q[0].0, 0, 9_000)]);
    let cmds = offer(&mut s, 1_300, q[0].0, Ok(9_000));
    assert_eq!(
        reserves(&cmds),
        vec![
            (q[0].0, 0, 9_000, "coalloc-J1-c0-0".to_owned()),
            (q[1].0, 1, 9_000, "coalloc-J1-c1-0".to_owned()),
        ]
    );
    assert!(answer(&mut s, 1_400, q[0].0, Ok(())).is_empty());
    let cmds = answer(&mut s, 1_500, q[1].0, Ok(()));
    let st = starts(&cmds);
    assert_eq!(st.len(), 2);
    for (i, st) in st.iter().enumerate() {
        let r = st
            .reservation
            .as_ref()
            .expect("started into its reservation");
        assert_eq!((r.id, r.start, r.duration), (q[i].0, 9_000, 60_000));
        assert_eq!(r.name, format!("coalloc-J1-c{i}-0"));
    }
    // Still held, not counted twice.
    assert_eq!(idle(&s), vec![0, 0, 8]);
    for t in transfers {
        s.handle(
            2_500,
            Event::TransferDone {
                transfer: t,
                ok: true,
            },
        )
        .unwrap();
    }
    for st in &st {
        s.handle(9_000, Event::ComponentReady { launch: st.launch })
            .unwrap();
    }
    let cmds = drain(&mut s);
    assert!(cmds.contains(&Command::ReleaseBarrier { job: id }));
    assert_eq!(s.job(id).unwrap().record.start(), Some(9_000));
    // The job ends: its reservations are deleted.
    for st in &st {
        s.handle(20_000, Event::ComponentFinished { launch: st.launch })
            .unwrap();
    }
    let cmds = drain(&mut s);
    assert_eq!(
        unreserves(&cmds),
        vec![
            (0, "coalloc-J1-c0-0".to_owned()),
            (1, "coalloc-J1-c1-0".to_owned())
        ]
    );
    assert!(s.reservations().table.is_empty());
    assert_eq!(idle(&s), vec![8, 8, 8]);
}

#[test]
fn the_files_set_the_start_when_the_sites_are_free() {
    let mut s = Scheduler::new(SchedulerConfig::default(), sites());
    let (_, cmds) = submit(&mut s, 1_000, job_with_file(None));
    let q = queries(&cmds);
    assert_eq!(
        q.iter().map(|x| x.2).collect::<Vec<_>>(),
        vec![3_000, 3_000]
    );
    // A site answering earlier than asked counts as the time asked.
    offer(&mut s, 1_000, q[0].0, Ok(1_000));
    let cmds = offer(&mut s, 1_000, q[1].0, Ok(3_000));
    let starts: Vec<Time> = reserves(&cmds).iter().map(|r| r.2).collect();
    assert_eq!(starts, vec![3_000, 3_000]);
    assert_eq!(s.job(1).unwrap().record.last_jst(), Some(3_000));
}

#[test]
fn a_refused_reservation_rolls_back_every_other_including_a_late_ok() {
    let config = SchedulerConfig {
        retry_backoff: 10_000,
        retry_backoff_max: 10_000,
        ..reserving()
    };
    let all = vec![
        Site::cluster("a", 8),
        Site::cluster("b", 8),
        Site::cluster("c", 8),
    ];
    let mut s = Scheduler::new(config, all);
    let (id, cmds) = submit(&mut s, 0, job(&[8, 8, 8]));
    let q = queries(&cmds);
    assert_eq!(q.len(), 3);
    for r in &q {
        offer(&mut s, 0, r.0, Ok(100));
    }
    assert_eq!(idle(&s), vec![0, 0, 0]);
    let name = |i: usize| format!("coalloc-J1-c{i}-0");
    assert!(answer(&mut s, 10, q[0].0, Ok(())).is_empty());
    // b refuses; c has not answered yet. b's is deleted too (a refusal may be a lost
    // answer of a site that made it).
    let cmds = answer(&mut s, 20, q[1].0, Err("reserved slots taken"));
    assert_eq!(
        unreserves(&cmds),
        vec![(0, name(0)), (2, name(2)), (1, name(1))]
    );
    assert!(starts(&cmds).is_empty());
    assert!(cmds.iter().any(|c| matches!(c,
        Command::Notify(Notice::Requeued { job, reason })
            if *job == id && reason.contains("site `b` refused the reservation: reserved slots taken"))));
    assert_eq!(idle(&s), vec![8, 8, 8]);
    assert_eq!(s.job(id).unwrap().record.submit_failures(), 1);
    // c's ok comes after the roll back: deleted again, then forgotten.
    let cmds = answer(&mut s, 30, q[2].0, Ok(()));
    assert_eq!(unreserves(&cmds), vec![(2, name(2))]);
    assert!(s.reservations().table.is_empty());
    // After its back-off the job is placed again, under new names.
    s.handle(10_020, Event::Tick).unwrap();
    let cmds = drain(&mut s);
    assert_eq!(queries(&cmds).len(), 3);
    let names: Vec<&str> = s
        .reservations()
        .table
        .values()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(
        names,
        vec!["coalloc-J1-c0-1", "coalloc-J1-c1-1", "coalloc-J1-c2-1"]
    );
}

/// Simulation harness, seed 51: a manager took a reservation and its answer was lost (the
/// server heard a time-out); the run was rolled back without deleting it, and it was left
/// at the site. An error of a run rolled back meanwhile likewise.
#[test]
fn a_reservation_whose_answer_was_an_error_is_deleted_all_the_same() {
    let mut s = Scheduler::new(reserving(), sites());
    let (_, cmds) = submit(&mut s, 0, job(&[8, 8]));
    let q = queries(&cmds);
    for r in &q {
        offer(&mut s, 0, r.0, Ok(100));
    }
    let cmds = answer(
        &mut s,
        10,
        q[0].0,
        Err("resource manager unavailable: timed out"),
    );
    assert_eq!(
        unreserves(&cmds),
        vec![(1, "coalloc-J1-c1-0".into()), (0, "coalloc-J1-c0-0".into())]
    );
    // The other's answer comes after the roll back, an error too: deleted again.
    let cmds = answer(&mut s, 20, q[1].0, Err("timed out"));
    assert_eq!(unreserves(&cmds), vec![(1, "coalloc-J1-c1-0".into())]);
    assert!(s.reservations().table.values().all(|r| r.generation > 0));
}

#[test]
fn a_site_that_cannot_reserve_sends_the_job_back_and_nothing_is_left() {
    let mut s = Scheduler::new(reserving(), sites());
    let (id, cmds) = submit(&mut s, 0, job(&[8, 8]));
    let q = queries(&cmds);
    let cmds = offer(&mut s, 0, q[0].0, Err("this site may not reserve"));
    // Nothing was reserved yet: nothing to delete; the job is placed again at once.
    assert!(unreserves(&cmds).is_empty());
    assert_eq!(s.job(id).unwrap().record.submit_failures(), 1);
    assert_eq!(queries(&cmds).len(), 2);
    // The old run's late offer is ignored.
    assert!(offer(&mut s, 1, q[1].0, Ok(5)).is_empty());
}

#[test]
fn a_cancel_deletes_made_and_asked_reservations() {
    let mut s = Scheduler::new(reserving(), sites());
    let (id, cmds) = submit(&mut s, 0, job(&[8, 8]));
    let q = queries(&cmds);
    for r in &q {
        offer(&mut s, 0, r.0, Ok(50));
    }
    answer(&mut s, 1, q[0].0, Ok(()));
    s.handle(2, Event::Cancel { job: id }).unwrap();
    let cmds = drain(&mut s);
    assert_eq!(
        unreserves(&cmds),
        vec![
            (0, "coalloc-J1-c0-0".to_owned()),
            (1, "coalloc-J1-c1-0".to_owned())
        ]
    );
    assert_eq!(idle(&s), vec![8, 8, 8]);
    let cmds = answer(&mut s, 3, q[1].0, Ok(()));
    assert_eq!(unreserves(&cmds), vec![(1, "coalloc-J1-c1-0".to_owned())]);
    assert!(s.reservations().table.is_empty());
}

#[test]
fn a_reserving_job_goes_only_to_sites_that_may_reserve_or_is_refused() {
    let mut s = Scheduler::new(reserving(), sites());
    // Three components of 8: s2 may not reserve, so it can never run.
    let e = s
        .handle(0, Event::Submit(Box::new(job(&[8, 8, 8]))))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("asks for advance reservation and cannot run on the sites that may reserve"),
        "{e}"
    );
    let mut none = sites();
    for site in &mut none {
        site.manager.insert("type".into(), "slurm".into());
    }
    let mut s = Scheduler::new(SchedulerConfig::default(), none);
    let mut j = job(&[1]);
    j.extra_mut().reserve = Some(ReserveRequest::default());
    let e = s.handle(0, Event::Submit(Box::new(j))).unwrap_err();
    assert!(e.to_string().contains("no site may reserve"), "{e}");
    // Under immediate claiming an ordinary job still runs there.
    let (_, cmds) = submit(&mut s, 0, job(&[1]));
    assert_eq!(starts(&cmds).len(), 1);
}

fn through_bytes(s: &Scheduler) -> Snapshot {
    let mut bytes = Vec::new();
    ciborium::into_writer(&s.snapshot().expect("saved"), &mut bytes).unwrap();
    ciborium::from_reader(&bytes[..]).unwrap()
}

#[test]
fn a_restart_keeps_live_reservations_and_deletes_the_others() {
    let mut s = Scheduler::new(reserving(), sites());
    // Job 1: both reservations made, started into them.
    let (_, cmds) = submit(&mut s, 0, job(&[4, 4]));
    let q1 = queries(&cmds);
    for r in &q1 {
        offer(&mut s, 0, r.0, Ok(100));
    }
    for r in &q1 {
        answer(&mut s, 0, r.0, Ok(()));
    }
    // Job 2: asked to reserve, no answer before the crash.
    let (j2, cmds) = submit(&mut s, 1, job(&[4, 4]));
    let q2 = queries(&cmds);
    for r in &q2 {
        offer(&mut s, 1, r.0, Ok(200));
    }
    let before = s.reservations().clone();
    let (mut s, _) = Scheduler::restore(reserving(), &sites(), through_bytes(&s)).unwrap();
    assert_eq!(s.reservations(), &before);
    // s0 holds job 1's, job 2's and one left from a job long gone; s1 only job 1's.
    s.handle(
        2,
        Event::ReservationsFound {
            site: 0,
            names: vec![
                "coalloc-J1-c0-0".into(),
                "coalloc-J2-c0-0".into(),
                "coalloc-J99-c0-3".into(),
            ],
            pending: None,
        },
    )
    .unwrap();
    let cmds = drain(&mut s);
    assert_eq!(unreserves(&cmds), vec![(0, "coalloc-J99-c0-3".to_owned())]);
    // Job 2's on s1 was never made: refused, so its s0 one is deleted and it goes back.
    s.handle(
        3,
        Event::ReservationsFound {
            site: 1,
            names: vec!["coalloc-J1-c1-0".into()],
            pending: None,
        },
    )
    .unwrap();
    // (Its request, lost with the restart, may yet come: deleted as well.)
    let cmds = drain(&mut s);
    assert_eq!(
        unreserves(&cmds),
        vec![
            (0, "coalloc-J2-c0-0".to_owned()),
            (1, "coalloc-J2-c1-0".to_owned())
        ]
    );
    assert_eq!(s.job(j2).unwrap().record.submit_failures(), 1);
    // Job 1's are kept.
    let kept: Vec<&str> = s
        .reservations()
        .table
        .values()
        .filter(|r| r.job == 1)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(kept, vec!["coalloc-J1-c0-0", "coalloc-J1-c1-0"]);
}

/// Simulation harness, seed 347: after a restart a reservation was asked for (its run's
/// due time came) while the list of its site was under way; the run was rolled back, the
/// list (taken before the request landed) did not hold it and the core forgot it, and the
/// request then made it: left behind. A list judges only what was pending when it was
/// asked for.
#[test]
fn a_list_does_not_judge_a_reservation_asked_for_after_it() {
    let mut s = Scheduler::new(reserving(), sites());
    let (_, cmds) = submit(&mut s, 0, job(&[8, 8]));
    let q = queries(&cmds);
    let mut cmds = Vec::new();
    for r in &q {
        cmds = offer(&mut s, 0, r.0, Ok(100));
    }
    let r = reserves(&cmds);
    assert_eq!(r.len(), 2);
    // The first site refuses: the other's request is abandoned (deleted at once).
    let cmds = answer(&mut s, 5, r[0].0, Err("taken"));
    assert!(unreserves(&cmds).contains(&(r[1].1, r[1].3.clone())));
    // A list asked for before the other's request does not hold it, and judges only what
    // was pending then (nothing): the abandoned one is kept for its answer.
    s.handle(
        6,
        Event::ReservationsFound {
            site: r[1].1,
            names: vec![],
            pending: Some(vec![]),
        },
    )
    .unwrap();
    assert!(unreserves(&drain(&mut s)).is_empty());
    assert!(s.reservations().table.contains_key(&r[1].0));
    // Its late `ok` is deleted when it comes, and then it is forgotten.
    let cmds = answer(&mut s, 7, r[1].0, Ok(()));
    assert_eq!(unreserves(&cmds), vec![(r[1].1, r[1].3.clone())]);
    assert!(!s.reservations().table.contains_key(&r[1].0));
    // (One pending when the list was asked for and not held is judged as before:
    // `a_restart_keeps_live_reservations_and_deletes_the_others`, `pending: None`.)
}

#[test]
fn a_form_5_snapshot_is_read_with_no_reservations() {
    use ciborium::Value;
    let mut s = Scheduler::new(SchedulerConfig::default(), sites());
    submit(&mut s, 0, job(&[1]));
    let mut bytes = Vec::new();
    ciborium::into_writer(&s.snapshot().unwrap().head(), &mut bytes).unwrap();
    let mut v: Value = ciborium::from_reader(&bytes[..]).unwrap();
    // A form-5 head: no `reserve` (nor `draining`, form 7's) in the core, no `other` in the
    // sites' state.
    fn drop_other(v: &mut Value) -> usize {
        match v {
            Value::Map(m) => {
                let n = m.len();
                if m.iter().any(|(k, _)| k.as_text() == Some("ours")) {
                    m.retain(|(k, _)| k.as_text() != Some("other"));
                }
                (n - m.len()) + m.iter_mut().map(|(_, v)| drop_other(v)).sum::<usize>()
            }
            Value::Array(a) => a.iter_mut().map(drop_other).sum(),
            _ => 0,
        }
    }
    assert_eq!(drop_other(&mut v), sites().len());
    let Value::Map(top) = &mut v else { panic!() };
    for (k, val) in top.iter_mut() {
        match (k.as_text(), val) {
            (Some("version"), val) => *val = Value::Integer(5.into()),
            (Some("core"), Value::Map(core)) => {
                core.retain(|(k, _)| !matches!(k.as_text(), Some("reserve" | "draining")))
            }
            _ => {}
        }
    }
    let mut old = Vec::new();
    ciborium::into_writer(&v, &mut old).unwrap();
    let head: Snapshot = coalloc_core::scheduler::snapshot::reading_form(5, || {
        ciborium::from_reader(&old[..]).unwrap()
    });
    let mut run = Vec::new();
    ciborium::into_writer(&s.snapshot().unwrap().job_slots(0, 1), &mut run).unwrap();
    let saved = Snapshot::join(head, vec![ciborium::from_reader(&run[..]).unwrap()]);
    let (s, _) = Scheduler::restore(SchedulerConfig::default(), &sites(), saved).unwrap();
    assert!(s.reservations().table.is_empty());
}

#[test]
fn a_site_busy_with_other_users_jobs_is_asked_but_coallocs_own_holds_are_kept() {
    let mut s = Scheduler::new(reserving(), sites());
    // Other users hold all of s0 and s1 now: the sites say when they will be free.
    for site in 0..2 {
        let busy = Event::SiteStatus {
            site,
            idle: 0,
            total: 8,
            healthy: true,
            other: 8,
        };
        s.handle(0, busy).unwrap();
    }
    let (_, cmds) = submit(&mut s, 0, job(&[8, 8]));
    assert_eq!(
        queries(&cmds).iter().map(|q| q.1).collect::<Vec<_>>(),
        vec![0, 1]
    );
    // A second job of the same size finds every processor held by coalloc: it waits.
    let (_, cmds) = submit(&mut s, 0, job(&[8]));
    assert!(queries(&cmds).is_empty());
    assert_eq!(s.queued(), 1);
}

#[test]
fn a_site_that_does_not_answer_rolls_the_run_back_at_the_answer_timeout() {
    let mut s = Scheduler::new(reserving_slowly(), sites());
    let (id, cmds) = submit(&mut s, 0, job(&[8, 8]));
    let q = queries(&cmds);
    offer(&mut s, 1, q[0].0, Ok(10));
    offer(&mut s, 1, q[1].0, Ok(10));
    answer(&mut s, 2, q[0].0, Ok(()));
    // s1 never answers its reservation: rolled back five minutes after placement.
    s.handle(5 * MINUTE - 1, Event::Tick).unwrap();
    assert!(unreserves(&drain(&mut s)).is_empty());
    s.handle(5 * MINUTE, Event::Tick).unwrap();
    let cmds = drain(&mut s);
    assert_eq!(
        unreserves(&cmds),
        vec![
            (0, "coalloc-J1-c0-0".to_owned()),
            (1, "coalloc-J1-c1-0".to_owned())
        ]
    );
    assert!(cmds.iter().any(|c| matches!(c,
        Command::Notify(Notice::Requeued { reason, .. })
            if reason.starts_with("site `s1` did not answer the reservation in time"))));
    assert_eq!(s.job(id).unwrap().record.submit_failures(), 1);
}

#[test]
fn a_lost_input_file_rolls_the_run_back_before_commit() {
    let config = SchedulerConfig {
        retry_backoff: 60_000,
        retry_backoff_max: 60_000,
        ..SchedulerConfig::default()
    };
    let mut s = Scheduler::new(config, sites());
    let (id, cmds) = submit(&mut s, 0, job_with_file(None));
    let transfer = cmds
        .iter()
        .find_map(|c| match c {
            Command::StartTransfer { transfer, .. } => Some(*transfer),
            _ => None,
        })
        .unwrap();
    let q = queries(&cmds);
    for r in &q {
        offer(&mut s, 1, r.0, Ok(2_000));
    }
    // The only replica fails to deliver: no other can.
    s.handle(
        500,
        Event::TransferDone {
            transfer,
            ok: false,
        },
    )
    .unwrap();
    drain(&mut s);
    answer(&mut s, 600, q[0].0, Ok(()));
    let cmds = answer(&mut s, 600, q[1].0, Ok(()));
    assert!(starts(&cmds).is_empty());
    assert_eq!(unreserves(&cmds).len(), 2);
    assert_eq!(s.job(id).unwrap().record.submit_failures(), 1);
    assert_eq!(idle(&s), vec![8, 8, 8]);
}

#[test]
fn the_specs_say_reserve_per_job_and_per_scheduler() {
    use coalloc_core::spec::{native, scheduler};
    let toml = "reserve = true\nstart = 7200\n[[component]]\ncount = 2\n";
    let j = native::from_toml(toml).unwrap();
    assert_eq!(
        j.extra().reserve,
        Some(ReserveRequest {
            start: Some(7_200_000)
        })
    );
    // The server's journal keeps a submission as its JSON: the request goes with it.
    let back = native::from_json(&native::to_json(&j)).unwrap();
    assert_eq!(back.extra().reserve, j.extra().reserve);
    let e = native::from_toml("start = 10\n[[component]]\ncount = 2\n").unwrap_err();
    assert!(e.to_string().contains("set `reserve = true` too"), "{e}");
    let (_, c) = scheduler::parse_config(
        "[scheduler]\nclaiming = \"reserve\"\n[[site]]\nname = \"a\"\nprocessors = 4\n",
    )
    .unwrap();
    assert_eq!(c.claiming, Claiming::Reserve(Default::default()));
}

#[test]
fn an_edit_while_reserving_reserves_again() {
    let mut s = Scheduler::new(reserving_slowly(), sites());
    let (id, cmds) = submit(&mut s, 0, job(&[4, 4]));
    let q = queries(&cmds);
    for r in &q {
        offer(&mut s, 1, r.0, Ok(100));
    }
    let add = Event::Edit {
        job: id,
        edit: Edit::Add(Component::new(2)),
    };
    s.handle(2, add).unwrap();
    drain(&mut s);
    answer(&mut s, 3, q[0].0, Ok(()));
    let cmds = answer(&mut s, 3, q[1].0, Ok(()));
    assert_eq!(unreserves(&cmds).len(), 2);
    assert!(cmds.iter().any(|c| matches!(c,
        Command::Notify(Notice::Requeued { reason, .. })
            if reason.starts_with("its components were edited while they were reserved"))));
    assert!(starts(&cmds).is_empty());
    assert_eq!(s.job(id).unwrap().job.components.len(), 3);
}

#[test]
fn a_site_with_a_lead_time_is_asked_to_reserve_only_within_it() {
    // s1 takes reservations at most 10 minutes ahead, s0 at most an hour.
    let mut sites = sites();
    sites[0].manager.insert("reserve_ahead".into(), "1h".into());
    sites[1]
        .manager
        .insert("reserve_ahead".into(), "10m".into());
    let mut s = Scheduler::new(reserving(), sites);
    let (id, cmds) = submit(&mut s, 0, job(&[8, 8]));
    let q = queries(&cmds);
    assert_eq!(offer(&mut s, 1, q[0].0, Ok(30 * MINUTE)), vec![]);
    // s1 offers 20 minutes and is asked again from 30.
    let cmds = offer(&mut s, 2, q[1].0, Ok(20 * MINUTE));
    assert_eq!(queries(&cmds), vec![(q[1].0, 1, 30 * MINUTE)]);
    // Agreed on 30 minutes: s0 (within its hour) reserves at once; s1 not until 20 minutes
    // (its lead), past the answer timeout (5 minutes), which does not roll the run back.
    let cmds = offer(&mut s, 3, q[1].0, Ok(30 * MINUTE));
    let early = reserves(&cmds);
    assert_eq!(
        early.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
        vec![(0, 30 * MINUTE)]
    );
    assert!(answer(&mut s, 4, early[0].0, Ok(())).is_empty());
    s.handle(20 * MINUTE - 1, Event::Tick).unwrap();
    let cmds = drain(&mut s);
    assert!(reserves(&cmds).is_empty() && unreserves(&cmds).is_empty());
    assert_eq!(s.job(id).unwrap().record.submit_failures(), 0);
    assert_eq!(idle(&s)[..2], [0, 0], "held meanwhile");
    s.handle(20 * MINUTE, Event::Tick).unwrap();
    let r = reserves(&drain(&mut s));
    assert_eq!(
        r.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
        vec![(1, 30 * MINUTE)]
    );
    // A refusal then (the site's other users took the processors) rolls back as usual.
    let cmds = answer(&mut s, 20 * MINUTE + 1, r[0].0, Err("taken"));
    assert_eq!(
        unreserves(&cmds),
        vec![
            (0, "coalloc-J1-c0-0".to_owned()),
            (1, "coalloc-J1-c1-0".to_owned())
        ]
    );
    assert_eq!(s.job(id).unwrap().record.submit_failures(), 1);
}

#[test]
fn a_lead_time_that_is_not_a_duration_is_refused_with_the_site_named() {
    let text = "[[site]]\nname = \"a\"\nprocessors = 4\nmanager = { reserve_ahead = \"soon\" }\n";
    let err = coalloc_core::spec::sites::parse_sites(text)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("reserve_ahead") && err.contains("soon"),
        "{err}"
    );
}

#[test]
fn components_on_one_site_are_asked_for_together() {
    // Only s0 may reserve: both components of 4 go there, and each query asks for 8.
    let mut sites = sites();
    sites[1].manager.insert("reserve".into(), "false".into());
    let mut s = Scheduler::new(reserving(), sites);
    let (_, cmds) = submit(&mut s, 0, job(&[4, 4]));
    let counts: Vec<(SiteId, u32)> = cmds
        .iter()
        .filter_map(|c| match c {
            Command::ReserveQuery { site, count, .. } => Some((*site, *count)),
            _ => None,
        })
        .collect();
    assert_eq!(counts, vec![(0, 8), (0, 8)]);
}

#[test]
fn a_site_with_a_start_delay_reserves_that_much_before_the_common_start() {
    // s1 is a batch manager that may take 3 s (its default) to start a job in a
    // reservation; s0 starts at once (`start_delay = "0s"`, as local sites by default).
    let mut sites = sites();
    sites[0].manager.insert("type".into(), "local".into());
    sites[1].manager.insert("type".into(), "slurm".into());
    sites[1].manager.insert("reserve".into(), "true".into());
    assert_eq!(reserve::start_delay(&sites[0]), 0);
    assert_eq!(reserve::start_delay(&sites[1]), 3_000);
    let mut s = Scheduler::new(reserving(), sites);
    let (id, cmds) = submit(&mut s, 0, job(&[8, 8]));
    let q = queries(&cmds);
    // s1 is asked for its own start, 3 s ahead of the common one, and not before now.
    assert_eq!(
        q.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
        vec![(0, 0), (1, 0)]
    );
    let durations: Vec<Millis> = cmds
        .iter()
        .filter_map(|c| match c {
            Command::ReserveQuery { duration, .. } => Some(*duration),
            _ => None,
        })
        .collect();
    assert_eq!(durations, vec![60_000, 63_000]);
    // s0 can start at 10 s; s1's window can begin at 8 s, so its component runs by 11 s:
    // the common start is 11 s, and s0 is asked again from there.
    assert!(reserves(&offer(&mut s, 1, q[0].0, Ok(10_000))).is_empty());
    let again = offer(&mut s, 2, q[1].0, Ok(8_000));
    assert_eq!(queries(&again), vec![(q[0].0, 0, 11_000)]);
    let cmds = offer(&mut s, 3, q[0].0, Ok(11_000));
    let r = reserves(&cmds);
    assert_eq!(
        r.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
        vec![(0, 11_000), (1, 8_000)]
    );
    let windows: Vec<Millis> = cmds
        .iter()
        .filter_map(|c| match c {
            Command::Reserve { duration, .. } => Some(*duration),
            _ => None,
        })
        .collect();
    assert_eq!(windows, vec![60_000, 63_000]);
    answer(&mut s, 4, r[0].0, Ok(()));
    let st = starts(&answer(&mut s, 5, r[1].0, Ok(())));
    // Both promise the common start, and the barrier holds s1's early start until then.
    assert!(st
        .iter()
        .all(|st| st.reservation.as_ref().unwrap().start == 11_000));
    s.handle(
        8_500,
        Event::ComponentReady {
            launch: st[1].launch,
        },
    )
    .unwrap();
    s.handle(
        9_000,
        Event::ComponentReady {
            launch: st[0].launch,
        },
    )
    .unwrap();
    assert!(!drain(&mut s).contains(&Command::ReleaseBarrier { job: id }));
    s.handle(11_000, Event::Tick).unwrap();
    assert!(drain(&mut s).contains(&Command::ReleaseBarrier { job: id }));
    assert_eq!(s.job(id).unwrap().record.start(), Some(11_000));
}

#[test]
fn a_start_delay_that_is_not_a_duration_is_refused_with_the_site_named() {
    let text = "[[site]]\nname = \"a\"\nprocessors = 4\nmanager = { start_delay = \"later\" }\n";
    let err = coalloc_core::spec::sites::parse_sites(text)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("start_delay") && err.contains("later"),
        "{err}"
    );
}

/// A launch started into its reservation and still waiting for its submission's answer: its
/// start command is made again as it was first made, the reservation it names included (a
/// driver that restarted and must send it again no longer keeps the commands its replay
/// met: `Scheduler::pending_start`), after a snapshot too. An added component counts in
/// the others' sizes, as in its own start; a component substituted after the commit is
/// launched without a reservation, and its new start is made again so.
#[test]
fn a_pending_launch_started_into_its_reservation_names_it_again() {
    let mut s = Scheduler::new(reserving(), sites());
    let (id, cmds) = submit(&mut s, 0, job(&[4, 4]));
    let q = queries(&cmds);
    for r in &q {
        offer(&mut s, 1, r.0, Ok(5_000));
    }
    answer(&mut s, 2, q[0].0, Ok(()));
    let first = starts(&answer(&mut s, 3, q[1].0, Ok(())));
    assert_eq!(first.len(), 2);
    for (i, st) in first.iter().enumerate() {
        let r = st
            .reservation
            .as_ref()
            .expect("started into its reservation");
        assert_eq!((r.id, r.start, r.duration), (q[i].0, 5_000, 60_000));
        assert_eq!(r.name, format!("coalloc-J{id}-c{i}-0"));
        assert_eq!(s.pending_start(st.launch).as_ref(), Some(st));
    }
    // After a snapshot: the same, value by value.
    let (mut s, _) = Scheduler::restore(reserving(), &sites(), through_bytes(&s)).unwrap();
    for st in &first {
        assert_eq!(s.pending_start(st.launch).as_ref(), Some(st));
    }
    // A component added: its start names no reservation; the others' count it in their
    // sizes and still name their own.
    let add = Event::Edit {
        job: id,
        edit: Edit::Add(Component::new(2)),
    };
    s.handle(4, add).unwrap();
    let added = starts(&drain(&mut s));
    assert_eq!(added.len(), 1);
    let added = &added[0];
    assert_eq!((added.component, added.count), (2, 2));
    assert_eq!(added.reservation, None);
    assert_eq!(&added.config.sizes[..], &[4, 4, 2]);
    assert_eq!(s.pending_start(added.launch).as_ref(), Some(added));
    for st in &first {
        let mut edited = st.clone();
        edited.config.count = 3;
        edited.config.sizes = added.config.sizes.clone();
        edited.config.total = 10;
        assert_eq!(s.pending_start(st.launch), Some(edited));
    }
    // Component 1 substituted: its new launch is not in the reservation, which it leaves.
    let sub = Event::Edit {
        job: id,
        edit: Edit::Substitute(1, Component::new(3)),
    };
    s.handle(5, sub).unwrap();
    let again = starts(&drain(&mut s));
    assert_eq!(again.len(), 1);
    let again = &again[0];
    assert_eq!(
        (again.component, again.count, again.reservation.as_ref()),
        (1, 3, None)
    );
    assert_eq!(s.pending_start(again.launch).as_ref(), Some(again));
    assert_eq!(s.pending_start(first[1].launch), None, "no longer current");
    let state = |rid| s.reservations().table[&rid].state;
    use coalloc_core::scheduler::reserve::ResvState;
    assert_eq!(
        (state(q[0].0), state(q[1].0)),
        (ResvState::Started, ResvState::Made)
    );
    let mut kept = first[0].clone();
    kept.config = again.config.clone();
    kept.config.index = 0;
    kept.config.rank_offset = 0;
    assert_eq!(&kept.config.sizes[..], &[4, 3, 2]);
    assert_eq!(s.pending_start(first[0].launch), Some(kept));
    // Once it reported, none.
    s.handle(
        6,
        Event::ComponentReady {
            launch: first[0].launch,
        },
    )
    .unwrap();
    assert_eq!(s.pending_start(first[0].launch), None, "it reported");
}
