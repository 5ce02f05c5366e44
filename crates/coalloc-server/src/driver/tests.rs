//! The driver stepped by hand (its journal in memory, its sites' calls recorded): cases the
//! simulation harness found, kept as unit tests.

use super::{Driver, Parts};
use crate::config::ServerConfig;
use crate::history::HistoryRow;
use crate::journal::{JournalError, MemJournal, Record, ReplayError, Store};
use crate::msg::{
    BarrierAnswer, Msg, Report, Request, ReserveCall, ReserveReport, SiteCall, SiteLink,
};
use crate::state::StateDir;
use coalloc_backends::{Backend, BackendError, RemoteId, RemoteState, SiteLoad, SubmitRequest};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// The calls the driver made, by site.
type Calls = Arc<Mutex<Vec<(usize, SiteCall)>>>;

struct Recorded(usize, Calls);

impl SiteLink for Recorded {
    fn send(&self, call: SiteCall) {
        self.1.lock().expect("calls").push((self.0, call));
    }
}

/// A backend for the driver's own uses (none here).
struct NoBackend;

impl Backend for NoBackend {
    fn submit(&self, _: &SubmitRequest) -> Result<RemoteId, BackendError> {
        Err(BackendError::Unavailable("a test".into()))
    }
    fn query(&self, ids: &[RemoteId]) -> Result<Vec<RemoteState>, BackendError> {
        Ok(vec![RemoteState::Unknown; ids.len()])
    }
    fn cancel(&self, _: &RemoteId) -> Result<(), BackendError> {
        Ok(())
    }
    fn load(&self) -> Result<SiteLoad, BackendError> {
        Err(BackendError::Unavailable("a test".into()))
    }
}

/// A driver on two sites of 4 processors, at time 0.
fn driver(name: &str) -> (Driver, Calls) {
    driver_on(name, Box::new(MemJournal::default()))
}

/// [`driver`] on this journal.
fn driver_on(name: &str, journal: Box<dyn Store>) -> (Driver, Calls) {
    driver_with(name, "", journal)
}

/// [`driver_on`] with this `[server]` section.
fn driver_with(name: &str, server: &str, journal: Box<dyn Store>) -> (Driver, Calls) {
    driver_at(name, server, journal, 0)
}

/// [`driver_with`], resumed at `now`.
fn driver_at(name: &str, server: &str, journal: Box<dyn Store>, now: i64) -> (Driver, Calls) {
    let config = format!(
        "{server}\n[[site]]\nname = \"a\"\nprocessors = 4\nmanager = {{ type = \"local\" }}\n\n\
         [[site]]\nname = \"b\"\nprocessors = 4\nmanager = {{ type = \"local\" }}\n",
    );
    driver_of(name, &config, journal, now)
}

/// A driver of this configuration on this journal, resumed at `now`.
fn driver_of(name: &str, config: &str, journal: Box<dyn Store>, now: i64) -> (Driver, Calls) {
    let config = ServerConfig::parse(config).expect("configuration");
    let dir = crate::scratch::dir(&format!("driver-{name}"));
    let calls = Calls::default();
    let (tx, _rx) = std::sync::mpsc::channel();
    let parts = Parts {
        journal,
        sites: (0..2)
            .map(|i| Box::new(Recorded(i, calls.clone())) as Box<dyn SiteLink>)
            .collect(),
        backends: (0..2)
            .map(|_| Arc::new(NoBackend) as Arc<dyn Backend>)
            .collect(),
        work: Box::new(super::work::Threads { tx: tx.clone() }),
        tx,
        inline_snapshots: true,
    };
    let state = StateDir::create(&dir).expect("state directory");
    let (mut d, _) =
        Driver::open(config, parts, state, "http://test.invalid".into()).expect("the driver opens");
    d.resume(now);
    (d, calls)
}

/// The launches submitted since the last look: (site, launch).
fn submitted(calls: &Calls) -> Vec<(usize, u64)> {
    let mut c = calls.lock().expect("calls");
    let out = c
        .iter()
        .filter_map(|(site, call)| match call {
            SiteCall::Submit(r) => Some((*site, r.launch)),
            _ => None,
        })
        .collect();
    c.clear();
    out
}

/// Submit the job `spec` (native TOML) at 1,000: the server's answer.
fn submit(d: &mut Driver, spec: &str) -> Result<(u64, bool), String> {
    let job = coalloc_core::spec::native::from_toml(spec).expect("job");
    let (reply, mut acked) = oneshot::channel();
    d.step(
        1_000,
        vec![Msg::Api(Request::Submit {
            jobs: vec![job],
            reply,
        })],
    )
    .expect("step");
    match acked.try_recv() {
        Ok(mut v) => v.remove(0),
        other => panic!("no answer: {other:?}"),
    }
}

/// Submit a job of two one-process components at 1,000: its number and its launches
/// (site, launch).
fn submit_two(d: &mut Driver, calls: &Calls) -> (u64, Vec<(usize, u64)>) {
    let (id, _) = submit(
        d,
        "name = \"j\"\n\n[[component]]\nexecutable = \"sim\"\ncount = 1\n\n\
         [[component]]\nexecutable = \"sim\"\ncount = 1\n",
    )
    .expect("accepted");
    let launches = submitted(calls);
    assert_eq!(launches.len(), 2, "{launches:?}");
    (id, launches)
}

/// The sites take these launches at 1,010 (handle `R<launch>`).
fn take(d: &mut Driver, launches: &[(usize, u64)]) {
    let taken = launches
        .iter()
        .map(|&(site, l)| {
            Msg::Site(Report::Submitted {
                site,
                launch: l,
                result: Ok(format!("R{l}")),
            })
        })
        .collect();
    d.step(1_010, taken).expect("step");
}

/// Submit an ordered job of one component on `a` and one on `b`: its number and the
/// launches submitted.
fn ordered_on_a_and_b(d: &mut Driver, calls: &Calls) -> (u64, Vec<(usize, u64)>) {
    let (id, _) = submit(
        d,
        "name = \"j\"\nkind = \"ordered\"\n\n\
         [[component]]\nexecutable = \"sim\"\ncount = 1\nsite = \"a\"\n\n\
         [[component]]\nexecutable = \"sim\"\ncount = 1\nsite = \"b\"\n",
    )
    .expect("accepted");
    (id, submitted(calls))
}

/// Launch `launch` of job `job` checks in at the barrier, and waits there for the answer.
fn check_in(
    job: u64,
    launch: u64,
) -> (
    Msg,
    oneshot::Receiver<Result<BarrierAnswer, crate::msg::ApiError>>,
) {
    check_in_holding(job, launch, true)
}

/// [`check_in`], held at the barrier until the job commits when `hold`.
pub(super) fn check_in_holding(
    job: u64,
    launch: u64,
    hold: bool,
) -> (
    Msg,
    oneshot::Receiver<Result<BarrierAnswer, crate::msg::ApiError>>,
) {
    let (reply, rx) = oneshot::channel();
    let m = Msg::Api(Request::Barrier {
        job,
        secret: None,
        launch,
        local_rank: 0,
        ok: true,
        reason: None,
        hold,
        reply,
    });
    (m, rx)
}

#[test]
fn a_check_in_answered_in_a_turn_that_then_aborts_the_run_hears_aborted() {
    // The simulation harness, seeds 183660 and 195223: the last check-in commits the job,
    // and a report later in the same turn fails a component; the process was told
    // `released` while its job was back in the queue.
    let (mut d, calls) = driver("abort-in-turn");
    let (id, launches) = submit_two(&mut d, &calls);
    take(&mut d, &launches);
    let (first, mut first_rx) = check_in(id, launches[0].1);
    d.step(1_020, vec![first]).expect("step");
    assert!(first_rx.try_recv().is_err(), "held until the job commits");
    let (last, mut last_rx) = check_in(id, launches[1].1);
    let (site, failing) = launches[0];
    let failed = Msg::Site(Report::Polled {
        site,
        load: Ok(SiteLoad {
            idle: 3,
            total: 4,
            other: 0,
        }),
        states: vec![(failing, RemoteState::Lost("the node died".into()))],
    });
    d.step(1_030, vec![last, failed]).expect("step");
    let phase = d.core().job(id).map(|j| j.phase);
    assert_eq!(phase, Some(coalloc_core::scheduler::jobs::Phase::Queued));
    for rx in [&mut first_rx, &mut last_rx] {
        match rx.try_recv() {
            Ok(Ok(BarrierAnswer::Aborted { .. })) => {}
            other => panic!("expected aborted, heard {other:?}"),
        }
    }
}

/// The reservation calls made since the last look: (site, call).
fn reserve_calls(calls: &Calls) -> Vec<(usize, ReserveCall)> {
    let mut c = calls.lock().expect("calls");
    let out = c
        .iter()
        .filter_map(|(site, call)| match call {
            SiteCall::Reserve(r) => Some((*site, r.clone())),
            _ => None,
        })
        .collect();
    c.retain(|(_, call)| !matches!(call, SiteCall::Reserve(_)));
    out
}

#[test]
fn a_reserving_job_is_queried_reserved_and_submitted_into_its_reservation() {
    let (mut d, calls) = driver("reserve-served");
    // The restart's look for what each site holds.
    assert_eq!(
        reserve_calls(&calls),
        vec![(0, ReserveCall::List), (1, ReserveCall::List)]
    );
    let (id, _) = submit(
        &mut d,
        "name = \"r\"\nreserve = true\nmax_wall_time = 60\n\n[[component]]\nexecutable = \"sim\"\ncount = 1\n",
    )
    .expect("taken");
    let asked = reserve_calls(&calls);
    let [(
        site,
        ReserveCall::Earliest {
            reservation,
            count: 1,
            not_before_ms,
            ..
        },
    )] = asked.as_slice()
    else {
        panic!("one query: {asked:?}");
    };
    assert!(*not_before_ms >= 1_000);
    let offer = ReserveReport::Offer {
        reservation: *reservation,
        earliest: Ok(5_000),
    };
    d.step(1_010, vec![Msg::Site(Report::Reservation(offer))])
        .expect("step");
    let made = reserve_calls(&calls);
    let name = format!("coalloc-J{id}-c0-");
    let [(
        s2,
        ReserveCall::Make {
            start_ms: 5_000,
            name: n,
            ..
        },
    )] = made.as_slice()
    else {
        panic!("one reservation: {made:?}");
    };
    assert_eq!(s2, site);
    assert!(n.starts_with(&name), "{n}");
    assert!(
        submitted(&calls).is_empty(),
        "nothing submitted before it is made"
    );
    let ok = ReserveReport::Made {
        reservation: *reservation,
        result: Ok(()),
    };
    d.step(1_020, vec![Msg::Site(Report::Reservation(ok))])
        .expect("step");
    let c = calls.lock().expect("calls");
    let into: Vec<Option<String>> = c
        .iter()
        .filter_map(|(_, call)| match call {
            SiteCall::Submit(r) => Some(r.reservation.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(into, vec![Some(n.clone())]);
}

/// A journal in memory that records how each commit was made: `sync` (durable), `lazy`
/// (without an fsync), `flush` (a sync of the lazy ones).
struct Watched(MemJournal, Arc<Mutex<Vec<&'static str>>>);

impl Store for Watched {
    fn last_seq(&self) -> i64 {
        self.0.last_seq()
    }
    fn append(&mut self, records: &[Record], history: &[HistoryRow]) -> Result<(), JournalError> {
        if !records.is_empty() || !history.is_empty() {
            self.1.lock().expect("log").push("sync");
        }
        self.0.append(records, history)
    }
    fn append_unsynced(
        &mut self,
        records: &[Record],
        history: &[HistoryRow],
    ) -> Result<(), JournalError> {
        if !records.is_empty() || !history.is_empty() {
            self.1.lock().expect("log").push("lazy");
        }
        self.0.append(records, history)
    }
    fn sync(&mut self) -> Result<(), JournalError> {
        let mut log = self.1.lock().expect("log");
        if log.last() == Some(&"lazy") {
            log.push("flush");
        }
        Ok(())
    }
    fn replay_after(
        &self,
        after: i64,
        each: &mut dyn FnMut(i64, Record) -> Result<(), String>,
    ) -> Result<usize, ReplayError<String>> {
        self.0.replay_after(after, each)
    }
    fn compact_before(&mut self, seq: i64) -> Result<usize, JournalError> {
        self.0.compact_before(seq)
    }
}

#[test]
fn check_ins_commit_without_an_fsync_and_the_release_waits_for_one() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let journal = Watched(MemJournal::default(), log.clone());
    let (mut d, calls) = driver_on("lazy", Box::new(journal));
    log.lock().expect("log").clear();
    let (id, launches) = submit_two(&mut d, &calls);
    // The acknowledged submission is durable.
    assert_eq!(*log.lock().expect("log"), ["sync"]);
    take(&mut d, &launches);
    let (first, mut first_rx) = check_in(id, launches[0].1);
    d.step(1_020, vec![first]).expect("step");
    assert!(first_rx.try_recv().is_err(), "held until the job commits");
    // The launches' handles and the first check-in: nothing left the server.
    assert_eq!(*log.lock().expect("log"), ["sync", "lazy", "lazy"]);
    let (last, mut last_rx) = check_in(id, launches[1].1);
    d.step(1_030, vec![last]).expect("step");
    // The last check-in's turn is synced before the processes hear `released`.
    let log = log.lock().expect("log").clone();
    assert_eq!(log[..3], ["sync", "lazy", "lazy"]);
    assert!(
        log[3..] == ["lazy", "flush"] || log[3..4] == ["sync"],
        "{log:?}"
    );
    for rx in [&mut first_rx, &mut last_rx] {
        assert!(matches!(rx.try_recv(), Ok(Ok(BarrierAnswer::Released))));
    }
}

#[test]
fn a_restart_cancels_again_the_launches_of_a_run_the_core_moved_on_from() {
    // Harness seeds 627 and 1005200: a committed job lost a component, so the core re-queued
    // it and cancelled the other one; the server died before its site worker made that
    // cancel, and the restart, which had the launch as cancelled, let it run beside its
    // replacement.
    let journal = MemJournal::default();
    let (mut d, calls) = driver_on("cancel-again", Box::new(journal.clone()));
    let (id, launches) = submit_two(&mut d, &calls);
    take(&mut d, &launches);
    let (first, _) = check_in(id, launches[0].1);
    let (second, _) = check_in(id, launches[1].1);
    d.step(1_020, vec![first, second]).expect("step");
    assert_eq!(
        d.core().job(id).map(|j| j.phase),
        Some(coalloc_core::scheduler::jobs::Phase::Running)
    );
    // The second component's site loses it: the job goes back to its queue and the first
    // component is cancelled, but that call is lost with the process.
    let (lost_site, lost) = launches[1];
    d.step(
        1_030,
        vec![Msg::Site(Report::Polled {
            site: lost_site,
            load: Ok(Default::default()),
            states: vec![(lost, RemoteState::Lost("the node died".into()))],
        })],
    )
    .expect("step");
    let cancelled = |calls: &Calls| -> Vec<String> {
        calls
            .lock()
            .expect("calls")
            .iter()
            .filter_map(|(_, c)| match c {
                SiteCall::Cancel(r) => Some(r.clone()),
                _ => None,
            })
            .collect()
    };
    let first_remote = format!("R{}", launches[0].1);
    assert_eq!(cancelled(&calls), vec![first_remote.clone()]);
    drop(d);
    let (d, calls) = driver_on("cancel-again-2", Box::new(journal));
    assert!(
        cancelled(&calls).contains(&first_remote),
        "the restart did not cancel {first_remote} again: {:?}",
        calls.lock().expect("calls")
    );
    drop(d);
}

#[test]
fn an_agent_back_after_a_restart_cancels_a_launch_of_an_ended_job_whose_cancel_died() {
    // The job's end cancels its other component; the turn commits, and the server dies
    // before that cancel reaches the agent. The restarted server (back before the job
    // leaves memory, or after: `aged_out`) does not watch an agent site's launches of an
    // ended job (`recheck_ended`): the agent's hello lists what it holds, and the launch,
    // ended or unknown to the server, is cancelled with the commit of the link's coming up.
    let config = "[server]\nagent_bind = \"test.invalid:7443\"\n\n\
        [scheduler]\nmax_completion_failures = 0\n\n\
        [[site]]\nname = \"a\"\nprocessors = 4\nmanager = { type = \"agent\" }\n\n\
        [[site]]\nname = \"b\"\nprocessors = 4\nmanager = { type = \"agent\" }\n";
    let up = |site: usize, held: Vec<crate::link::proto::HeldLaunch>| {
        Msg::Site(Report::AgentBack { site, held })
    };
    for aged_out in [false, true] {
        let name = format!("agent-ended-{aged_out}");
        let journal = MemJournal::default();
        let (mut d, calls) = driver_of(&name, config, Box::new(journal.lead()), 0);
        d.step(500, vec![up(0, Vec::new()), up(1, Vec::new())])
            .expect("step");
        calls.lock().expect("calls").clear();
        let (id, launches) = ordered_on_a_and_b(&mut d, &calls);
        assert_eq!(launches.len(), 2, "{launches:?}");
        let (a, b) = (launches[0].1, launches[1].1);
        take(&mut d, &launches);
        let (first, _) = check_in(id, a);
        let (second, _) = check_in(id, b);
        d.step(1_020, vec![first, second]).expect("step");
        let failed = Msg::Site(Report::Polled {
            site: 1,
            load: Ok(Default::default()),
            states: vec![(b, RemoteState::Failed("exit 5".into()))],
        });
        d.step(1_030, vec![failed]).expect("step");
        let phase = d.core().job(id).map(|j| j.phase);
        assert_eq!(phase, Some(coalloc_core::scheduler::jobs::Phase::Ended));
        drop(d);
        // The server comes back (past `min_job_age`, 5 minutes, when `aged_out`), and so
        // do the agents, `a`'s still holding the launch.
        let back = if aged_out { 400_000 } else { 2_000 };
        let (mut d, calls) =
            driver_of(&format!("{name}-2"), config, Box::new(journal.lead()), back);
        assert_eq!(d.core().job(id).is_none(), aged_out);
        let held = vec![crate::link::proto::HeldLaunch {
            launch: a,
            job: id,
            component: 0,
            remote: format!("R{a}"),
        }];
        d.step(back + 100, vec![up(0, held), up(1, Vec::new())])
            .expect("step");
        let cancels: Vec<(usize, SiteCall)> = (calls.lock().expect("calls").iter())
            .filter(|(_, c)| matches!(c, SiteCall::Cancel(_) | SiteCall::CancelUnrecorded { .. }))
            .cloned()
            .collect();
        assert_eq!(
            cancels,
            vec![(0, SiteCall::Cancel(format!("R{a}")))],
            "aged out: {aged_out}"
        );
    }
}

#[test]
fn a_deposed_leader_tells_no_site_anything_its_refused_commit_decided() {
    // The simulation harness's fail-overs (issue 32): a leader whose journal's lease another
    // server took ran a turn that aged a job out (its discards) or heard a submission fail
    // (its cancel by name), and sent those calls before its commit was refused.
    let journal = MemJournal::default();
    let (mut d, calls) = driver_with(
        "deposed",
        "[server]\nmin_job_age = \"1s\"",
        Box::new(journal.lead()),
    );
    let (id, launches) = submit_two(&mut d, &calls);
    // A second job, submitted; its launches' answers are still on their way.
    let (_, pending) = submit_two(&mut d, &calls);
    take(&mut d, &launches);
    let (first, _) = check_in(id, launches[0].1);
    let (second, _) = check_in(id, launches[1].1);
    d.step(1_020, vec![first, second]).expect("step");
    let finished = |site: usize, launch: u64| {
        Msg::Site(Report::Polled {
            site,
            load: Ok(Default::default()),
            states: vec![(launch, RemoteState::Finished)],
        })
    };
    let done = launches.iter().map(|&(s, l)| finished(s, l)).collect();
    d.step(1_030, done).expect("step");
    assert_eq!(
        d.core().job(id).map(|j| j.phase),
        Some(coalloc_core::scheduler::jobs::Phase::Ended)
    );
    calls.lock().expect("calls").clear();
    let standby = journal.lead();
    let before = journal.last_seq();
    // The second job's submissions time out (the same turn, for both leaders below).
    let timed_out = || {
        pending
            .iter()
            .map(|&(site, launch)| {
                Msg::Site(Report::Submitted {
                    site,
                    launch,
                    result: Err(BackendError::Unavailable("timed out".into())),
                })
            })
            .collect::<Vec<_>>()
    };
    let failed = timed_out();
    // Past the first job's age: it would leave memory, its launches discarded.
    let e = d
        .step(5_000, failed)
        .expect_err("the deposed leader's commit is refused");
    assert!(e.0.contains("deposed"), "{e}");
    // (What its own site workers watch is no call to a site.)
    let told: Vec<(usize, SiteCall)> = (calls.lock().expect("calls").iter())
        .filter(|(_, c)| !matches!(c, SiteCall::Watch { .. } | SiteCall::Forget(_)))
        .cloned()
        .collect();
    assert!(
        told.is_empty(),
        "the deposed leader told its sites: {told:?}"
    );
    // Nothing of the deposed one's turn is in the journal.
    assert!(journal.history().is_empty());
    assert_eq!(journal.last_seq(), before);
    drop(d);
    // The same turn of a leader that still leads: its calls go, after the commit.
    let (mut d, calls) = driver_with(
        "deposed-2",
        "[server]\nmin_job_age = \"1s\"",
        Box::new(standby),
    );
    let failed = timed_out();
    calls.lock().expect("calls").clear();
    d.step(5_000, failed).expect("step");
    let made = calls.lock().expect("calls").clone();
    let discards = made
        .iter()
        .filter(|(_, c)| matches!(c, SiteCall::Discard(_)));
    let by_name = made
        .iter()
        .filter(|(_, c)| matches!(c, SiteCall::CancelUnrecorded { .. }));
    assert_eq!((discards.count(), by_name.count()), (2, 2), "{made:?}");
    assert_eq!(journal.history().len(), 1);
}

#[test]
fn a_restart_whose_commit_failed_writes_nothing_more() {
    // Harness seed 1011285: a restart's first turn aged a job out and its commit was cut;
    // the restart's next turn committed the same entries again, so the job's `forget` was
    // kept while its discards (held for the commit) were never sent: its launches stayed in
    // their managers' logs for ever.
    let journal = MemJournal::default();
    let aging = "[server]\nmin_job_age = \"1s\"";
    let (mut d, calls) = driver_with("cut-resume", aging, Box::new(journal.lead()));
    let (id, launches) = submit_two(&mut d, &calls);
    take(&mut d, &launches);
    let (first, _) = check_in(id, launches[0].1);
    let (second, _) = check_in(id, launches[1].1);
    d.step(1_020, vec![first, second]).expect("step");
    let done = (launches.iter())
        .map(|&(site, launch)| {
            Msg::Site(Report::Polled {
                site,
                load: Ok(Default::default()),
                states: vec![(launch, RemoteState::Finished)],
            })
        })
        .collect();
    d.step(1_030, done).expect("step");
    drop(d);
    let before = journal.last_seq();
    journal.cut_next_append();
    let (mut d, _) = driver_at("cut-resume-2", aging, Box::new(journal.lead()), 5_000);
    assert!(
        d.step(5_001, Vec::new()).is_err(),
        "the restart's commit was cut"
    );
    assert_eq!(journal.last_seq(), before, "{:?}", journal.records().last());
    assert!(journal.history().is_empty());
}

#[test]
fn a_deposed_leader_cancels_nothing_an_agent_holds() {
    // Issue 32: an agent that connects to a deposed leader (it still answers; its lease is
    // another's) lists a launch its successor started; the deposed leader, which does not
    // know it, cancelled it as an orphan before its commit was refused.
    let config = "[server]\nagent_bind = \"test.invalid:7443\"\n\n\
        [[site]]\nname = \"a\"\nprocessors = 4\nmanager = { type = \"agent\" }\n";
    let journal = MemJournal::default();
    let (mut d, calls) = driver_of("orphan", config, Box::new(journal.lead()), 0);
    let _standby = journal.lead();
    let held = vec![crate::link::proto::HeldLaunch {
        launch: 7,
        job: 3,
        component: 0,
        remote: "R7".into(),
    }];
    calls.lock().expect("calls").clear();
    let back = Msg::Site(Report::AgentBack { site: 0, held });
    assert!(d.step(1_000, vec![back]).is_err(), "its commit is refused");
    let cancels: Vec<(usize, SiteCall)> = (calls.lock().expect("calls").iter())
        .filter(|(_, c)| matches!(c, SiteCall::Cancel(_)))
        .cloned()
        .collect();
    assert!(cancels.is_empty(), "{cancels:?}");
    // A leader cancels it, with the commit of the link's coming up.
    let (mut d, calls) = driver_of("orphan-2", config, Box::new(journal.lead()), 1_000);
    let held = vec![crate::link::proto::HeldLaunch {
        launch: 7,
        job: 3,
        component: 0,
        remote: "R7".into(),
    }];
    calls.lock().expect("calls").clear();
    let back = Msg::Site(Report::AgentBack { site: 0, held });
    d.step(1_100, vec![back]).expect("step");
    let cancels: Vec<SiteCall> = (calls.lock().expect("calls").iter())
        .filter(|(_, c)| matches!(c, SiteCall::Cancel(_)))
        .map(|(_, c)| c.clone())
        .collect();
    assert_eq!(cancels, vec![SiteCall::Cancel("R7".into())]);
}

#[test]
fn a_launch_taken_for_a_forgotten_job_is_cancelled_then_dropped() {
    // Harness seeds 211 and 2311: a submission held while its agent site's link was down
    // went out after its job had left memory; the site ran it for nobody, and the driver,
    // not knowing the launch, neither cancelled it nor had the site drop it.
    let (mut d, calls) = driver("orphan");
    let taken = Msg::Site(Report::Submitted {
        site: 1,
        launch: 77,
        result: Ok("R77".into()),
    });
    d.step(1_000, vec![taken]).expect("step");
    let made = |calls: &Calls| -> String {
        let made: Vec<(usize, SiteCall)> = (calls.lock().expect("calls").iter())
            .filter(|(_, c)| {
                matches!(
                    c,
                    SiteCall::Cancel(_)
                        | SiteCall::Discard(_)
                        | SiteCall::Watch { .. }
                        | SiteCall::Forget(_)
                )
            })
            .cloned()
            .collect();
        calls.lock().expect("calls").clear();
        format!("{made:?}")
    };
    let watch = SiteCall::Watch {
        launch: 77,
        remote: "R77".into(),
    };
    assert_eq!(
        made(&calls),
        format!("{:?}", [(1, SiteCall::Cancel("R77".into())), (1, watch)])
    );
    let polled = |state: RemoteState| {
        Msg::Site(Report::Polled {
            site: 1,
            load: Ok(SiteLoad {
                idle: 4,
                total: 4,
                other: 0,
            }),
            states: vec![(77, state)],
        })
    };
    // Dropped once a poll finds it ended, not while it still runs; and once.
    d.step(1_200, vec![polled(RemoteState::Running)])
        .expect("step");
    assert_eq!(made(&calls), "[]");
    let ended = RemoteState::Failed("cancelled".into());
    d.step(1_400, vec![polled(ended.clone())]).expect("step");
    assert_eq!(
        made(&calls),
        format!(
            "{:?}",
            [
                (1, SiteCall::Forget(77)),
                (1, SiteCall::Discard("R77".into()))
            ]
        )
    );
    d.step(1_600, vec![polled(ended)]).expect("step");
    assert_eq!(made(&calls), "[]");
}

#[test]
fn a_draining_launch_whose_cancel_is_lost_is_cancelled_again_until_its_site_no_longer_runs_it() {
    // The core's repeated cancel (`recancel_interval`, 30 s in a server). A committed job's
    // other component fails, so the core cancels the launch on site `a` and the job's next
    // run waits at its barrier until that launch is gone; the cancel is lost (an agent gave
    // it up after its five tries with its link up, or a direct site's manager was down when
    // it came) and the site runs the launch on. Without the repeated cancel nothing asked
    // again: the next run waited until its barrier timeout or the agent's reconnecting.
    let direct = "[[site]]\nname = \"a\"\nprocessors = 4\nmanager = { type = \"local\" }\n";
    let agent = "[server]\nagent_bind = \"test.invalid:7443\"\n\n\
        [[site]]\nname = \"a\"\nprocessors = 4\nmanager = { type = \"agent\" }\n";
    for (name, site_a) in [("direct", direct), ("agent", agent)] {
        let config = format!(
            "{site_a}\n[[site]]\nname = \"b\"\nprocessors = 4\nmanager = {{ type = \"local\" }}\n"
        );
        let journal = MemJournal::default();
        let (mut d, calls) = driver_of(
            &format!("recancel-{name}"),
            &config,
            Box::new(journal.clone()),
            0,
        );
        if name == "agent" {
            let back = Msg::Site(Report::AgentBack {
                site: 0,
                held: Vec::new(),
            });
            d.step(500, vec![back]).expect("step");
        }
        calls.lock().expect("calls").clear();
        let (id, launches) = ordered_on_a_and_b(&mut d, &calls);
        assert_eq!(launches.len(), 2, "{name}: {launches:?}");
        take(&mut d, &launches);
        let (first, _) = check_in(id, launches[0].1);
        let (second, _) = check_in(id, launches[1].1);
        d.step(1_020, vec![first, second]).expect("step");
        let phase = |d: &Driver| d.core().job(id).map(|j| j.phase);
        assert_eq!(
            phase(&d),
            Some(coalloc_core::scheduler::jobs::Phase::Running)
        );
        let (a, draining) = launches[0];
        assert_eq!(a, 0, "{name}: component 0 is on site a");
        let poll = |site: usize, launch: u64, state: RemoteState| {
            Msg::Site(Report::Polled {
                site,
                load: Ok(SiteLoad {
                    idle: 3,
                    total: 4,
                    other: 0,
                }),
                states: vec![(launch, state)],
            })
        };
        // Site b loses component 1: the job goes back to its queue, its launch on a drains.
        d.step(
            1_030,
            vec![poll(
                1,
                launches[1].1,
                RemoteState::Lost("the node died".into()),
            )],
        )
        .expect("step");
        let launch_id = coalloc_core::scheduler::LaunchId(draining);
        assert!(d.core().draining().get(launch_id).is_some());
        let remote = format!("R{draining}");
        // The calls to site a about the draining launch since the last look.
        let to_a = |calls: &Calls| -> Vec<SiteCall> {
            let mut c = calls.lock().expect("calls");
            let out = (c.iter())
                .filter(|(site, call)| {
                    *site == 0
                        && match call {
                            SiteCall::Cancel(r) => *r == remote,
                            SiteCall::Forget(l) => *l == draining,
                            SiteCall::CancelUnrecorded { launch, .. } => *launch == draining,
                            _ => false,
                        }
                })
                .map(|(_, call)| call.clone())
                .collect();
            c.clear();
            out
        };
        let cancel = SiteCall::Cancel(remote.clone());
        assert_eq!(to_a(&calls), std::slice::from_ref(&cancel), "{name}");
        // The cancel is lost: site a runs the launch on. The next one is due 30 s after it.
        let again = d.core().recancel_at(launch_id);
        assert_eq!(again, Some(31_030), "{name}");
        d.step(20_000, vec![poll(0, draining, RemoteState::Running)])
            .expect("step");
        assert_eq!(to_a(&calls), [], "{name}: not before its time");
        d.step(31_030, vec![poll(0, draining, RemoteState::Running)])
            .expect("step");
        assert_eq!(to_a(&calls), std::slice::from_ref(&cancel), "{name}: again");
        d.step(61_030, Vec::new()).expect("step");
        assert_eq!(
            to_a(&calls),
            std::slice::from_ref(&cancel),
            "{name}: and again"
        );
        // Watched all along: once its site no longer runs it, the core hears it once and
        // the site stops watching it.
        let gone = RemoteState::Failed("cancelled".into());
        d.step(62_000, vec![poll(0, draining, gone.clone())])
            .expect("step");
        assert!(d.core().draining().is_empty(), "{name}");
        assert_eq!(to_a(&calls), [SiteCall::Forget(draining)], "{name}");
        // A later report of it changes nothing, and its cancel goes no more.
        d.step(62_200, vec![poll(0, draining, gone)]).expect("step");
        for t in [91_030, 121_030, 200_000] {
            d.step(t, Vec::new()).expect("step");
        }
        assert_eq!(to_a(&calls), [], "{name}: no cancel once it is gone");
        let taken = (journal.records().iter())
            .filter(|(_, r)| {
                matches!(r.entry, crate::entry::Entry::CancelTaken { launch } if launch == draining)
            })
            .count();
        assert_eq!(taken, 1, "{name}: one `cancel_taken` in the journal");
        drop(d);
        // The journal replays: the restart reaches the same state.
        let (d, _) = driver_of(
            &format!("recancel-{name}-2"),
            &config,
            Box::new(journal),
            200_000,
        );
        assert!(d.core().draining().is_empty(), "{name}");
        assert!(d.core().job(id).is_some(), "{name}");
    }
}

/// A leader starts a job's two components at two agent sites and stops with neither
/// answer journaled (the second component's process checked in first when `checked_in`); a
/// standby takes over and both agents come back, the first holding the first launch, the
/// second holding nothing. The standby's driver, the calls it made on coming up, the job,
/// and the `(site, launch)` kept and lost.
type Takeover = (
    Driver,
    Vec<(usize, SiteCall)>,
    u64,
    (usize, u64),
    (usize, u64),
);

fn takeover_with_one_lost(name: &str, checked_in: bool) -> Takeover {
    let config = "[server]\nagent_bind = \"test.invalid:7443\"\n\n\
        [[site]]\nname = \"a\"\nprocessors = 4\nmanager = { type = \"agent\" }\n\n\
        [[site]]\nname = \"b\"\nprocessors = 4\nmanager = { type = \"agent\" }\n";
    let journal = MemJournal::default();
    let (mut d, calls) = driver_of(name, config, Box::new(journal.lead()), 0);
    let up = |site: usize, held: Vec<crate::link::proto::HeldLaunch>| {
        Msg::Site(Report::AgentBack { site, held })
    };
    d.step(500, vec![up(0, Vec::new()), up(1, Vec::new())])
        .expect("step");
    calls.lock().expect("calls").clear();
    let (id, launches) = submit_two(&mut d, &calls);
    let (kept, lost) = (launches[0], launches[1]);
    if checked_in {
        let (m, _rx) = check_in(id, lost.1);
        d.step(1_020, vec![m]).expect("step");
        let phase = d.core().job(id).map(|j| j.comps[1].phase);
        assert_ne!(
            phase,
            Some(coalloc_core::scheduler::jobs::CompPhase::Submitted),
            "the check-in counted"
        );
    }
    drop(d);
    let (mut d, calls) = driver_of(
        &format!("{name}-2"),
        config,
        Box::new(journal.lead()),
        1_100,
    );
    calls.lock().expect("calls").clear();
    let held = |site: usize| -> Vec<crate::link::proto::HeldLaunch> {
        (site == kept.0)
            .then(|| crate::link::proto::HeldLaunch {
                launch: kept.1,
                job: id,
                component: 0,
                remote: format!("R{}", kept.1),
            })
            .into_iter()
            .collect()
    };
    d.step(1_200, vec![up(0, held(0)), up(1, held(1))])
        .expect("step");
    let made = calls.lock().expect("calls").clone();
    (d, made, id, kept, lost)
}

#[test]
fn a_submission_lost_on_its_way_to_an_agent_is_sent_again_after_a_takeover_not_re_placed() {
    // Issue 32, failover_netns (launches 1099 and 1100 of job 550): a leader journaled the
    // start of a job's two components at agent sites and sent both; it was cut off with
    // one submission delivered (the agent started it: its program ran) and the other lost
    // on the wire. The standby that took over found both submitted but unanswered; the
    // agents' hellos listed the first (adopted) and not the second, which was failed as the
    // site's fault: the job's start was aborted, the first component cancelled, and the job
    // placed again, so its program ran twice. The agent's hello proves the lost launch never
    // started: it is sent again, and the start goes on.
    let (mut d, made, id, kept, lost) = takeover_with_one_lost("resend", false);
    let cancels: Vec<&(usize, SiteCall)> = (made.iter())
        .filter(|(_, c)| matches!(c, SiteCall::Cancel(_) | SiteCall::CancelUnrecorded { .. }))
        .collect();
    assert!(cancels.is_empty(), "{cancels:?}");
    let resent: Vec<(usize, u64)> = (made.iter())
        .filter_map(|(site, c)| match c {
            SiteCall::Submit(r) => Some((*site, r.launch)),
            _ => None,
        })
        .collect();
    assert_eq!(
        resent,
        vec![lost],
        "the lost submission, sent again: {made:?}"
    );
    let current = |d: &Driver| -> Vec<Option<u64>> {
        let j = d.core().job(id).expect("the job");
        j.comps.iter().map(|c| c.launch.map(|l| l.0)).collect()
    };
    assert_eq!(
        current(&d),
        vec![Some(kept.1), Some(lost.1)],
        "not placed again"
    );
    // Its answer comes, and the start goes on with both launches.
    let answer = Msg::Site(Report::SubmittedMany(
        lost.0,
        vec![(lost.1, Ok(format!("R{}", lost.1)))],
    ));
    d.step(1_300, vec![answer]).expect("step");
    assert_eq!(current(&d), vec![Some(kept.1), Some(lost.1)]);
}

#[test]
fn a_lost_submission_whose_component_checked_in_is_failed_after_a_takeover_not_sent_again() {
    // The same takeover, but the launch missing from its agent's hello had run: its process
    // checked in at the barrier (an agent listed no launch it stopped at a heartbeat stop).
    // Sent again, it would start a second time while the core counts the first's check-in:
    // it is failed as its site's fault, as before the resend.
    let (d, made, id, _, lost) = takeover_with_one_lost("checked-lost", true);
    let resent: Vec<u64> = (made.iter())
        .filter_map(|(_, c)| match c {
            SiteCall::Submit(r) if r.launch == lost.1 => Some(r.launch),
            _ => None,
        })
        .collect();
    assert!(resent.is_empty(), "sent again: {made:?}");
    let current = d
        .core()
        .job(id)
        .and_then(|j| j.comps.get(1).and_then(|c| c.launch.map(|l| l.0)));
    assert_ne!(
        current,
        Some(lost.1),
        "the lost launch is no longer the job's"
    );
}
