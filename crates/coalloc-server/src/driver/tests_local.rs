//! The driver stepped by hand over two real local clusters (`coalloc_backends::local`, each
//! launch's processes under its `/bin/sh` wrapper): its calls to a site are made on the
//! site's backend at once, and the site reports the test hands it are read from the
//! backends, so that the orders of reports that a server's timing makes rare can be given
//! every time, and what is left of the processes afterwards is looked up in `/proc`.

use super::{Driver, Parts};
use crate::config::ServerConfig;
use crate::journal::MemJournal;
use crate::msg::{Msg, Report, Request, SiteCall, SiteLink};
use crate::state::StateDir;
use coalloc_backends::local::{LocalCluster, LocalConfig};
use coalloc_backends::{Backend, RemoteState};
use coalloc_core::scheduler::jobs::Phase;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The calls the driver made, by site.
type Calls = Arc<Mutex<Vec<(usize, SiteCall)>>>;
/// The reports the sites' answers make, for the test's next step.
type Reports = Arc<Mutex<Vec<Msg>>>;

/// A site link that makes each call on the site's backend before it returns (a site
/// worker makes it on a thread of its own); a submission's answer waits in `reports`.
struct Direct {
    site: usize,
    backend: Arc<LocalCluster>,
    calls: Calls,
    reports: Reports,
}

impl SiteLink for Direct {
    fn send(&self, call: SiteCall) {
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
            _ => {}
        }
        self.calls.lock().expect("calls").push((self.site, call));
    }
}

/// Two local clusters `a` and `b` of 4 slots, their driver (this `[scheduler]` section) at
/// time 0, and its scratch folder. Whatever still runs is killed when it is dropped.
struct Rig {
    driver: Driver,
    clusters: Vec<Arc<LocalCluster>>,
    calls: Calls,
    reports: Reports,
    dir: PathBuf,
}

impl Rig {
    fn new(name: &str, scheduler: &str) -> Rig {
        let dir = crate::scratch::dir(&format!("driver-local-{name}"));
        let config = format!(
            "[scheduler]\n{scheduler}\n\n\
             [[site]]\nname = \"a\"\nprocessors = 4\nmanager = {{ type = \"local\" }}\n\n\
             [[site]]\nname = \"b\"\nprocessors = 4\nmanager = {{ type = \"local\" }}\n",
        );
        let config = ServerConfig::parse(&config).expect("configuration");
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
        let (calls, reports) = (Calls::default(), Reports::default());
        let (tx, _rx) = std::sync::mpsc::channel();
        let parts = Parts {
            journal: Box::new(MemJournal::default()),
            sites: (clusters.iter().enumerate())
                .map(|(site, c)| {
                    Box::new(Direct {
                        site,
                        backend: c.clone(),
                        calls: calls.clone(),
                        reports: reports.clone(),
                    }) as Box<dyn SiteLink>
                })
                .collect(),
            backends: (clusters.iter())
                .map(|c| c.clone() as Arc<dyn Backend>)
                .collect(),
            work: Box::new(super::work::Threads { tx: tx.clone() }),
            tx,
            inline_snapshots: true,
        };
        let state = StateDir::create(&dir.join("state")).expect("state directory");
        let (mut driver, _) = Driver::open(config, parts, state, "http://test.invalid".into())
            .expect("the driver opens");
        driver.resume(0);
        Rig {
            driver,
            clusters,
            calls,
            reports,
            dir,
        }
    }

    /// One turn at `now` of these messages and the sites' answers that wait.
    fn step(&mut self, now: i64, mut msgs: Vec<Msg>) {
        let mut waiting = std::mem::take(&mut *self.reports.lock().expect("reports"));
        waiting.append(&mut msgs);
        self.driver.step(now, waiting).expect("step");
    }

    /// What site `site` says of `launch` now.
    fn state(&self, site: usize, launch: u64) -> RemoteState {
        let id = coalloc_backends::local::remote_id(launch);
        let states = self.clusters[site].query(&[id]).expect("query");
        states.into_iter().next().expect("one state")
    }

    /// Site `site`'s monitor reading of `launch`, as its worker reports it.
    fn polled(&self, site: usize, launch: u64) -> Msg {
        Msg::Site(Report::Polled {
            site,
            load: self.clusters[site].load().map_err(|e| e.to_string()),
            states: vec![(launch, self.state(site, launch))],
        })
    }

    /// The live (not zombie) processes of the process group launch `launch` of site
    /// `site` was started in.
    fn group(&self, site: usize, launch: u64) -> Vec<u32> {
        let pgid = coalloc_backends::local::recorded_pgid(&self.work(site), launch);
        processes_in_group(pgid.expect("started"))
    }

    /// The work directory of site `site`.
    fn work(&self, site: usize) -> PathBuf {
        work_dir(&self.dir, site)
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for (site, c) in self.clusters.iter().enumerate() {
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
    let (reply, _) = tokio::sync::oneshot::channel();
    Msg::Api(Request::Barrier {
        job,
        secret: None,
        launch,
        local_rank: 0,
        ok: true,
        reason: None,
        hold: false,
        reply,
    })
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
    let go = rig.dir.join("go");
    // Component 0 runs a child of its own; component 1 fails once `go` is there.
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
    let launches: Vec<(usize, u64)> = (rig.calls.lock().expect("calls").iter())
        .filter_map(|(site, call)| match call {
            SiteCall::Submit(r) => Some((*site, r.launch)),
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
    let phase = |rig: &Rig| rig.driver.core().job(id).map(|j| j.phase);
    assert_eq!(phase(&rig), Some(Phase::Running));
    assert_ne!(rig.group(0, a), Vec::<u32>::new(), "component 0 runs");
    // Component 1 fails after the commit; both sites' readings come in one turn.
    std::fs::write(&go, "").expect("go");
    wait_for("component 1 fails", || {
        matches!(rig.state(1, b), RemoteState::Failed(_))
    });
    assert_eq!(
        rig.state(1, b),
        RemoteState::Failed("process 0 exited with 5".into())
    );
    rig.calls.lock().expect("calls").clear();
    let (failed, running) = (rig.polled(1, b), rig.polled(0, a));
    let turn = if failed_first {
        vec![failed, running]
    } else {
        vec![running, failed]
    };
    rig.step(1_040, turn);
    assert_eq!(phase(&rig), Some(Phase::Ended), "{name}");
    assert_eq!(
        rig.group(0, a),
        Vec::<u32>::new(),
        "{name}: processes of component 0 left"
    );
    assert_eq!(
        rig.state(0, a),
        RemoteState::Failed("cancelled".into()),
        "{name}"
    );
    let to_a: Vec<SiteCall> = (rig.calls.lock().expect("calls").iter())
        .filter(|(site, call)| *site == 0 && !matches!(call, SiteCall::Forget(_)))
        .map(|(_, call)| call.clone())
        .collect();
    let remote = coalloc_backends::local::remote_id(a);
    assert_eq!(
        to_a,
        [SiteCall::Cancel(remote)],
        "{name}: component 0 cancelled once"
    );
}
