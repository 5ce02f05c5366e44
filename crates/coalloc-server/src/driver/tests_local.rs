//! The driver stepped by hand over two real local clusters (`coalloc_backends::local`, each
//! launch's processes under its `/bin/sh` wrapper): its calls to a site are made on the
//! site's backend at once, and the site reports the test hands it are read from the
//! backends, so that the orders of reports that a server's timing makes rare can be given
//! every time, and what is left of the processes afterwards is looked up in `/proc`. A rig's
//! server can die (its calls to the sites dropped from then on) and restart on the same
//! journal and the same clusters, whose readings report what its new links watch.

use super::{Driver, Parts};
use crate::config::ServerConfig;
use crate::journal::MemJournal;
use crate::msg::{Msg, Report, Request, SiteCall, SiteLink};
use crate::state::StateDir;
use coalloc_backends::local::{LocalCluster, LocalConfig};
use coalloc_backends::{Backend, RemoteState};
use coalloc_core::scheduler::jobs::Phase;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The calls the driver made, by site.
type Calls = Arc<Mutex<Vec<(usize, SiteCall)>>>;
/// The reports the sites' answers make, for the test's next step.
type Reports = Arc<Mutex<Vec<Msg>>>;
/// The launches the sites' links watch: (site, launch) and its handle.
type Watched = Arc<Mutex<BTreeMap<(usize, u64), String>>>;

/// A site link that makes each call on the site's backend before it returns (a site
/// worker makes it on a thread of its own); a submission's answer waits in `reports`. Once
/// `dead` is set, calls are dropped (the server died before its workers made them).
struct Direct {
    site: usize,
    backend: Arc<LocalCluster>,
    calls: Calls,
    reports: Reports,
    watched: Watched,
    dead: Arc<AtomicBool>,
}

impl SiteLink for Direct {
    fn send(&self, call: SiteCall) {
        if self.dead.load(Ordering::SeqCst) {
            return;
        }
        let mut watched = self.watched.lock().expect("watched");
        match &call {
            SiteCall::Submit(r) => {
                let result = self.backend.submit(r);
                let report = Report::Submitted {
                    site: self.site,
                    launch: r.launch,
                    result,
                };
                self.reports
                    .lock()
                    .expect("reports")
                    .push(Msg::Site(report));
            }
            SiteCall::Cancel(remote) => self.backend.cancel(remote).expect("cancel"),
            SiteCall::CancelUnrecorded {
                job,
                component,
                launch,
            } => (self.backend)
                .cancel_unrecorded(*job, *component, *launch)
                .expect("cancel"),
            SiteCall::Watch { launch, remote } => {
                watched.insert((self.site, *launch), remote.clone());
            }
            SiteCall::Forget(launch) => {
                watched.remove(&(self.site, *launch));
            }
            _ => {}
        }
        self.calls.lock().expect("calls").push((self.site, call));
    }
}

/// What outlives a rig's server: the two clusters, the journal, the configuration and the
/// scratch folder, and what the sites' links share.
struct Sites {
    clusters: Vec<Arc<LocalCluster>>,
    calls: Calls,
    reports: Reports,
    watched: Watched,
    /// The server died: its calls to the sites are dropped.
    dead: Arc<AtomicBool>,
    journal: MemJournal,
    config: String,
    dir: PathBuf,
}

impl Sites {
    /// A driver over these sites on their journal and state directory, resumed at `now`.
    fn open(&self, now: i64) -> Driver {
        let config = ServerConfig::parse(&self.config).expect("configuration");
        let (tx, _rx) = std::sync::mpsc::channel();
        let parts = Parts {
            journal: Box::new(self.journal.clone()),
            sites: (self.clusters.iter().enumerate())
                .map(|(site, c)| {
                    Box::new(Direct {
                        site,
                        backend: c.clone(),
                        calls: self.calls.clone(),
                        reports: self.reports.clone(),
                        watched: self.watched.clone(),
                        dead: self.dead.clone(),
                    }) as Box<dyn SiteLink>
                })
                .collect(),
            backends: (self.clusters.iter())
                .map(|c| c.clone() as Arc<dyn Backend>)
                .collect(),
            work: Box::new(super::work::Threads { tx: tx.clone() }),
            tx,
            inline_snapshots: true,
        };
        let state = StateDir::create(&self.dir.join("state")).expect("state directory");
        let (mut driver, _) = Driver::open(config, parts, state, "http://test.invalid".into())
            .expect("the driver opens");
        driver.resume(now);
        driver
    }
}

/// Two local clusters `a` and `b` of 4 slots, their driver (this `[scheduler]` section) at
/// time 0, and its scratch folder. Whatever still runs is killed when it is dropped.
struct Rig {
    driver: Driver,
    sites: Sites,
}

impl Rig {
    fn new(name: &str, scheduler: &str) -> Rig {
        let dir = crate::scratch::dir(&format!("driver-local-{name}"));
        let config = format!(
            "[scheduler]\n{scheduler}\n\n\
             [[site]]\nname = \"a\"\nprocessors = 4\nmanager = {{ type = \"local\" }}\n\n\
             [[site]]\nname = \"b\"\nprocessors = 4\nmanager = {{ type = \"local\" }}\n",
        );
        let clusters: Vec<Arc<LocalCluster>> = ["a", "b"]
            .iter()
            .enumerate()
            .map(|(i, site)| {
                let cluster = LocalCluster::new(LocalConfig {
                    name: site.to_string(),
                    slots: 4,
                    initial_slots: None,
                    work_dir: work_dir(&dir, i),
                    background: None,
                    launcher: None,
                })
                .expect("local cluster");
                Arc::new(cluster)
            })
            .collect();
        let sites = Sites {
            clusters,
            calls: Calls::default(),
            reports: Reports::default(),
            watched: Watched::default(),
            dead: Arc::default(),
            journal: MemJournal::default(),
            config,
            dir,
        };
        Rig {
            driver: sites.open(0),
            sites,
        }
    }

    /// The server is started again at `now` on its journal and state directory, over the
    /// same clusters; its sites' links watch nothing until it says.
    fn restart(&mut self, now: i64) {
        self.sites.dead.store(false, Ordering::SeqCst);
        self.sites.watched.lock().expect("watched").clear();
        self.sites.reports.lock().expect("reports").clear();
        self.driver = self.sites.open(now);
    }

    /// One turn at `now` of these messages and the sites' answers that wait.
    fn step(&mut self, now: i64, mut msgs: Vec<Msg>) {
        let mut waiting = std::mem::take(&mut *self.sites.reports.lock().expect("reports"));
        waiting.append(&mut msgs);
        self.driver.step(now, waiting).expect("step");
    }

    /// What site `site` says of `launch` now.
    fn state(&self, site: usize, launch: u64) -> RemoteState {
        let id = coalloc_backends::local::remote_id(launch);
        let states = self.sites.clusters[site].query(&[id]).expect("query");
        states.into_iter().next().expect("one state")
    }

    /// Site `site`'s monitor reading of `launch`, as its worker reports it.
    fn polled(&self, site: usize, launch: u64) -> Msg {
        Msg::Site(Report::Polled {
            site,
            load: self.sites.clusters[site].load().map_err(|e| e.to_string()),
            states: vec![(launch, self.state(site, launch))],
        })
    }

    /// Site `site`'s monitor reading as its worker makes it: its load and the states of the
    /// launches its link watches.
    fn poll(&self, site: usize) -> Msg {
        let watched: Vec<u64> = (self.sites.watched.lock().expect("watched").keys())
            .filter(|(s, _)| *s == site)
            .map(|&(_, launch)| launch)
            .collect();
        Msg::Site(Report::Polled {
            site,
            load: self.sites.clusters[site].load().map_err(|e| e.to_string()),
            states: (watched.into_iter())
                .map(|launch| (launch, self.state(site, launch)))
                .collect(),
        })
    }

    /// The calls made since the last look, taken.
    fn calls(&self) -> Vec<(usize, SiteCall)> {
        std::mem::take(&mut *self.sites.calls.lock().expect("calls"))
    }

    /// The live (not zombie) processes of the process group launch `launch` of site
    /// `site` was started in.
    fn group(&self, site: usize, launch: u64) -> Vec<u32> {
        let pgid = coalloc_backends::local::recorded_pgid(&self.work(site), launch);
        processes_in_group(pgid.expect("started"))
    }

    /// Wait up to 10 s for the processes of launch `launch` of site `site` to end: a
    /// process group's SIGKILL is sent when the cancel returns, but only its wrapper is
    /// reaped then (its other processes may still be on their way out).
    fn wait_ended(&self, site: usize, launch: u64, name: &str) {
        let t0 = Instant::now();
        let mut left = self.group(site, launch);
        while !left.is_empty() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
            left = self.group(site, launch);
        }
        assert_eq!(
            left,
            Vec::<u32>::new(),
            "{name}: processes of launch {launch} left"
        );
    }

    /// The work directory of site `site`.
    fn work(&self, site: usize) -> PathBuf {
        work_dir(&self.sites.dir, site)
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for (site, c) in self.sites.clusters.iter().enumerate() {
            for launch in coalloc_backends::local::recorded_launches(&self.work(site)) {
                let _ = c.cancel(&coalloc_backends::local::remote_id(launch));
            }
        }
    }
}

/// The work directory of site `site` (`a`, `b`) of the rig in `dir`.
fn work_dir(dir: &Path, site: usize) -> PathBuf {
    dir.join("sites").join(["a", "b"][site])
}

/// The live processes of process group `pgid` (from `/proc/PID/stat`: state, then ppid,
/// then pgrp, after the command's closing parenthesis).
fn processes_in_group(pgid: i32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() != Some(&"Z") && fields.get(2) == Some(&pgid.to_string().as_str()) {
            out.push(pid);
        }
    }
    out
}

/// Launch `launch` of job `job` checks in at the barrier (its answer is not awaited).
fn check_in(job: u64, launch: u64) -> Msg {
    super::tests::check_in_holding(job, launch, false).0
}

/// Wait up to 10 s for `ok`.
fn wait_for(what: &str, ok: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_component_reported_running_in_the_turn_its_job_fails_is_cancelled_and_its_processes_end() {
    // CI, mpi.rs's `mpi_abort_after_the_commit_ends_the_job_everywhere`: the job's second run
    // failed at its limit (`MPI_Abort` on site beta), and both sites' monitor readings came
    // in one turn, beta's first. Beta's failure ended the job, and the core cancelled the
    // component on alpha; alpha's reading, later in the turn, still had that launch running,
    // and the driver, seeing that the core had moved on from it, stopped watching it and
    // counted it ended, so that the core's cancel, carried out after the turn's reports,
    // skipped it as ended. Its ranks spun for minutes, and nothing was ever to cancel them.
    // In either order the running component is cancelled once, and nothing of it is left.
    for failed_first in [true, false] {
        one_turn(failed_first);
    }
}

/// A job of a component on each site, committed; the component on `b` fails at the job's
/// limit, and the readings of both sites come in one turn (`b`'s first when
/// `failed_first`).
fn one_turn(failed_first: bool) {
    let name = if failed_first {
        "failed-first"
    } else {
        "running-first"
    };
    let mut rig = Rig::new(name, "max_completion_failures = 0");
    let (id, a, b) = committed_then_failed(&mut rig);
    rig.calls();
    let (failed, running) = (rig.polled(1, b), rig.polled(0, a));
    let turn = if failed_first {
        vec![failed, running]
    } else {
        vec![running, failed]
    };
    rig.step(1_040, turn);
    let phase = rig.driver.core().job(id).map(|j| j.phase);
    assert_eq!(phase, Some(Phase::Ended), "{name}");
    rig.wait_ended(0, a, name);
    assert_eq!(
        rig.state(0, a),
        RemoteState::Failed("cancelled".into()),
        "{name}"
    );
    let to_a: Vec<SiteCall> = (rig.calls().into_iter())
        .filter(|(site, call)| *site == 0 && !matches!(call, SiteCall::Forget(_)))
        .map(|(_, call)| call)
        .collect();
    let remote = coalloc_backends::local::remote_id(a);
    assert_eq!(
        to_a,
        [SiteCall::Cancel(remote)],
        "{name}: component 0 cancelled once"
    );
}

/// Submit at 1,000 a job of a component on each site (`a`'s runs a child of its own, `b`'s
/// fails once the file `go` is there), run both and commit the job, then let `b`'s fail:
/// the job, and its launches on `a` and `b`. No reading of the failure has come yet.
fn committed_then_failed(rig: &mut Rig) -> (u64, u64, u64) {
    let go = rig.sites.dir.join("go");
    let spec = format!(
        "name = \"j\"\nkind = \"ordered\"\n\n\
         [[component]]\nexecutable = \"/bin/sh\"\ncount = 1\nsite = \"a\"\n\
         arguments = [\"-c\", \"sleep 3131 & wait\"]\n\n\
         [[component]]\nexecutable = \"/bin/sh\"\ncount = 1\nsite = \"b\"\n\
         arguments = [\"-c\", \"while [ ! -e \\\"$0\\\" ]; do sleep 0.01; done; exit 5\", {:?}]\n",
        go.to_str().expect("a UTF-8 path")
    );
    let job = coalloc_core::spec::native::from_toml(&spec).expect("job");
    let (reply, mut answer) = tokio::sync::oneshot::channel();
    rig.step(
        1_000,
        vec![Msg::Api(Request::Submit {
            jobs: vec![job],
            reply,
        })],
    );
    let (id, _) = answer
        .try_recv()
        .expect("answered")
        .remove(0)
        .expect("accepted");
    let launches: Vec<(usize, u64)> = (rig.calls().into_iter())
        .filter_map(|(site, call)| match call {
            SiteCall::Submit(r) => Some((site, r.launch)),
            _ => None,
        })
        .collect();
    assert_eq!(launches.len(), 2, "{launches:?}");
    let (a, b) = (launches[0].1, launches[1].1);
    assert_eq!((launches[0].0, launches[1].0), (0, 1));
    // The sites' answers, then both components run and check in: the job commits.
    rig.step(1_010, Vec::new());
    assert_eq!(rig.state(0, a), RemoteState::Running);
    assert_eq!(rig.state(1, b), RemoteState::Running);
    let running = vec![rig.polled(0, a), rig.polled(1, b)];
    rig.step(1_020, running);
    rig.step(1_030, vec![check_in(id, a), check_in(id, b)]);
    let phase = rig.driver.core().job(id).map(|j| j.phase);
    assert_eq!(phase, Some(Phase::Running));
    assert_ne!(rig.group(0, a), Vec::<u32>::new(), "component 0 runs");
    // Component 1 fails after the commit.
    std::fs::write(&go, "").expect("go");
    wait_for("component 1 fails", || {
        matches!(rig.state(1, b), RemoteState::Failed(_))
    });
    assert_eq!(
        rig.state(1, b),
        RemoteState::Failed("process 0 exited with 5".into())
    );
    (id, a, b)
}

#[test]
fn a_component_whose_cancel_died_with_the_server_is_cancelled_after_its_restart() {
    // The job's end cancels its other component; the turn commits, and the server dies
    // before that cancel reaches its site. The restarted server replays an ended job, whose
    // launches it neither adopts nor cancels again (`cancel_superseded_again` is for live
    // jobs'), and the component ran on for nobody until its own end. So it does whether the
    // server comes back before the job is old enough to leave memory or after (`aged_out`:
    // down past `min_job_age`, the restart's first turn moved it to the history, and its
    // launches were known to nobody). It is cancelled once, after a reading finds it still
    // running; the job leaves memory only once its sites no longer run its launches.
    for aged_out in [false, true] {
        restart_after_a_lost_cancel(aged_out);
    }
}

/// [`committed_then_failed`]; `b`'s reading ends the job and the server dies with the
/// turn's calls; it restarts (past the job's age, five minutes, when `aged_out`) and its
/// sites' readings come for a few turns, then a turn a second later.
fn restart_after_a_lost_cancel(aged_out: bool) {
    let name = if aged_out {
        "lost-cancel-aged-out"
    } else {
        "lost-cancel"
    };
    let mut rig = Rig::new(name, "max_completion_failures = 0");
    let (id, a, b) = committed_then_failed(&mut rig);
    rig.sites.dead.store(true, Ordering::SeqCst);
    let failed = rig.polled(1, b);
    rig.step(1_040, vec![failed]);
    let phase = rig.driver.core().job(id).map(|j| j.phase);
    assert_eq!(phase, Some(Phase::Ended), "{name}");
    assert_eq!(
        rig.state(0, a),
        RemoteState::Running,
        "{name}: the cancel died"
    );
    let back = if aged_out { 400_000 } else { 2_000 };
    rig.restart(back);
    let remote = coalloc_backends::local::remote_id(a);
    let cancels = |calls: &[(usize, SiteCall)]| {
        let cancel = (0, SiteCall::Cancel(remote.clone()));
        calls.iter().filter(|&c| *c == cancel).count()
    };
    assert_eq!(cancels(&rig.calls()), 0, "{name}: not before a reading");
    assert!(
        rig.driver.core().job(id).is_some(),
        "{name}: kept in memory"
    );
    let mut calls = Vec::new();
    for t in [10, 20, 30] {
        let readings = vec![rig.poll(0), rig.poll(1)];
        rig.step(back + t, readings);
        calls.append(&mut rig.calls());
    }
    rig.step(back + 1_100, Vec::new());
    calls.append(&mut rig.calls());
    assert_eq!(
        rig.driver.core().job(id).is_none(),
        aged_out,
        "{name}: leaves memory once its sites no longer run it"
    );
    rig.wait_ended(0, a, name);
    assert_eq!(
        rig.state(0, a),
        RemoteState::Failed("cancelled".into()),
        "{name}"
    );
    assert_eq!(cancels(&calls), 1, "{name}: cancelled once: {calls:?}");
    // Of a job gone from memory, the site drops the launch.
    let discards = (calls.iter())
        .filter(|&c| *c == (0, SiteCall::Discard(remote.clone())))
        .count();
    assert_eq!(discards, usize::from(aged_out), "{name}: {calls:?}");
    // Its site watches it no more.
    assert!(
        rig.sites.watched.lock().expect("watched").is_empty(),
        "{name}"
    );
}
