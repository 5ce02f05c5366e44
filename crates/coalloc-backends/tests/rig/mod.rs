//! The Slurm rig of scripts/slurm/ as the backend's test files see it, and the helpers they
//! share: the rig's clusters from `$COALLOC_SLURM_RIG/clusters.tsv`, a backend per cluster
//! (batch or allocation launch), requests, and polling until a job runs or ends (for any
//! backend: the Grid Engine tests use them too).
#![allow(dead_code)] // each test file uses its own subset

use coalloc_backends::slurm::{Launch, SlurmCluster, SlurmConfig};
use coalloc_backends::{Backend, BackendError, RemoteState, SiteLoad, SubmitRequest};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{RwLock, RwLockReadGuard};
use std::thread;
use std::time::{Duration, Instant};

pub static QUIET: RwLock<()> = RwLock::new(());

pub struct Rig {
    /// (name, slurm.conf) per cluster, in clusters.tsv order.
    pub clusters: Vec<(String, PathBuf)>,
}

impl Rig {
    /// The rig, or `None` (test skipped) when `COALLOC_SLURM_RIG` is unset.
    pub fn get(test: &str) -> Option<Rig> {
        let Some(base) = std::env::var_os("COALLOC_SLURM_RIG") else {
            eprintln!("{test}: skipped (COALLOC_SLURM_RIG is unset; see scripts/slurm/README.md)");
            return None;
        };
        let tsv = Path::new(&base).join("clusters.tsv");
        let text = std::fs::read_to_string(&tsv).unwrap_or_else(|e| {
            panic!(
                "COALLOC_SLURM_RIG is set but {} is unreadable: {e}",
                tsv.display()
            )
        });
        let clusters: Vec<(String, PathBuf)> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let mut f = l.split('\t');
                let name = f.next().unwrap_or_default().to_string();
                let conf = PathBuf::from(f.next().unwrap_or_default());
                (name, conf)
            })
            .collect();
        assert!(!clusters.is_empty(), "{} lists no cluster", tsv.display());
        Some(Rig { clusters })
    }

    pub fn name(&self, i: usize) -> &str {
        &self.clusters[i % self.clusters.len()].0
    }

    pub fn conf(&self, i: usize) -> &Path {
        &self.clusters[i % self.clusters.len()].1
    }

    pub fn backend(&self, i: usize) -> SlurmCluster {
        self.launching(i, Launch::Batch)
    }

    /// A backend for cluster `i` that launches components this way.
    pub fn launching(&self, i: usize, launch: Launch) -> SlurmCluster {
        SlurmCluster::new(SlurmConfig {
            slurm_conf: Some(self.conf(i).to_path_buf()),
            command_timeout: Duration::from_secs(10),
            launch,
            ..SlurmConfig::new(self.name(i))
        })
    }

    /// A Slurm command run straight against cluster `i` (not through the backend).
    pub fn slurm(&self, i: usize, program: &str, args: &[&str]) -> String {
        let out = Command::new(program)
            .args(args)
            .env("SLURM_CONF", self.conf(i))
            .current_dir("/")
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Another user's job of `cpus` CPUs on cluster `i`, submitted straight through `sbatch`
    /// and running `sleep seconds`; returns once Slurm says it runs (within 10 s), with its id.
    pub fn foreign_job(&self, i: usize, cpus: &str, seconds: u32) -> String {
        let id = self.slurm(
            i,
            "sbatch",
            &[
                "--parsable",
                "-n",
                cpus,
                "-J",
                "not-ours",
                "-o",
                "/dev/null",
                "--wrap",
                &format!("sleep {seconds}"),
            ],
        );
        let t0 = Instant::now();
        while self.slurm(i, "squeue", &["-h", "-j", &id, "-o", "%T"]) != "RUNNING" {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "foreign job {id} did not start"
            );
            thread::sleep(Duration::from_millis(50));
        }
        id
    }

    /// Wait (at most 15 s) until job `id` is gone from cluster `i`'s live queue (squeue
    /// without `-t all` lists live jobs only).
    pub fn until_gone_from_squeue(&self, i: usize, id: &str) {
        let t0 = Instant::now();
        // 30 s: KillWait is 5 s, but on a loaded 2-core machine the step's end and the
        // epilog can take several times that (one CI run saw 15 s pass).
        loop {
            let left = self.slurm(i, "squeue", &["-h", "-j", id, "-o", "%i %T %r"]);
            if left.is_empty() {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "job {id} still in squeue after 30 s: {left}"
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// A backend for a cluster whose controller is not there: the first cluster's
    /// `slurm.conf`, copied into `dir` with a port where nothing listens, and a 2 s timeout.
    pub fn dead_cluster(&self, dir: &Path, launch: Launch) -> SlurmCluster {
        let text = std::fs::read_to_string(self.conf(0)).unwrap();
        let text: String = text
            .lines()
            .map(|l| {
                if l.starts_with("SlurmctldPort=") {
                    "SlurmctldPort=9".to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(dir.join("slurm.conf"), text + "\n").unwrap();
        SlurmCluster::new(SlurmConfig {
            slurm_conf: Some(dir.join("slurm.conf")),
            command_timeout: Duration::from_secs(2),
            launch,
            ..SlurmConfig::new("dead")
        })
    }
}

pub fn shared() -> RwLockReadGuard<'static, ()> {
    QUIET.read().unwrap_or_else(|e| e.into_inner())
}

/// A fresh directory for one test's output files.
pub fn out_dir(test: &str) -> PathBuf {
    out_dir_of("slurm", test)
}

/// The same under `TARGET_TMPDIR/group/`.
pub fn out_dir_of(group: &str, test: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(group)
        .join(format!("{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn request(
    dir: &Path,
    launch: u64,
    count: u32,
    processes: u32,
    exe: &str,
    args: &[&str],
) -> SubmitRequest {
    SubmitRequest {
        launch,
        job: 1,
        component: 0,
        count,
        processes,
        executable: exe.into(),
        arguments: args.iter().map(|a| a.to_string()).collect(),
        environment: vec![("COALLOC_RANK_OFFSET".into(), "10".into())],
        directory: Some(dir.to_path_buf()),
        wall_time_ms: Some(120_000),
        stdout: dir.join(format!("L{launch}.out")),
        stderr: dir.join(format!("L{launch}.err")),
        owner: None,
    }
}

pub fn state(b: &dyn Backend, id: &str) -> RemoteState {
    b.query(&[id.to_string()]).unwrap().remove(0)
}

/// Polls until the job's state is final; returns every distinct state seen, in order.
pub fn until_final(b: &dyn Backend, id: &str, limit: Duration) -> Vec<RemoteState> {
    let t0 = Instant::now();
    let mut seen: Vec<RemoteState> = Vec::new();
    loop {
        let s = state(b, id);
        if seen.last() != Some(&s) {
            seen.push(s.clone());
        }
        if s.is_final() {
            return seen;
        }
        assert!(
            t0.elapsed() < limit,
            "job {id} not final after {limit:?}: {seen:?}"
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// Polls until the job runs; returns how long that took.
pub fn until_running(b: &dyn Backend, id: &str) -> Duration {
    let t0 = Instant::now();
    loop {
        match state(b, id) {
            RemoteState::Running => return t0.elapsed(),
            RemoteState::Queued => {}
            other => panic!("job {id} is {other:?}, expected it to run"),
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "job {id} did not start"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until cluster `i` runs no job and two load readings agree.
pub fn quiet_load(rig: &Rig, i: usize, b: &SlurmCluster) -> SiteLoad {
    let t0 = Instant::now();
    let mut last = b.load().unwrap();
    loop {
        thread::sleep(Duration::from_millis(300));
        let now = b.load().unwrap();
        let busy = rig.slurm(i, "squeue", &["-h", "-t", "PD,R,CG,CF", "-o", "%i"]);
        if now == last && busy.is_empty() && now.idle == now.total {
            return now;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "cluster {} never quiet: {now:?}, jobs {busy}",
            rig.name(i)
        );
        last = now;
    }
}

/// What both launch modes must do with failures: launch `first`, two processes of which
/// rank 1 exits 3, ends `FAILED` with exit code 3; launch `first + 1`, a program that does
/// not exist, with the shell's 127.
pub fn assert_failures_keep_their_exit_codes(b: &SlurmCluster, dir: &Path, first: u64) {
    let id = b
        .submit(&request(
            dir,
            first,
            2,
            2,
            "/bin/sh",
            &["-c", "[ $COALLOC_LOCAL_RANK = 1 ] && exit 3; exit 0"],
        ))
        .unwrap();
    match until_final(b, &id, Duration::from_secs(20)).last() {
        Some(RemoteState::Failed(why)) => assert!(why.starts_with("FAILED, exit code 3"), "{why}"),
        other => panic!("expected Failed, got {other:?}"),
    }
    let id = b
        .submit(&request(dir, first + 1, 1, 1, "/nonexistent/program", &[]))
        .unwrap();
    match until_final(b, &id, Duration::from_secs(20)).last() {
        Some(RemoteState::Failed(why)) => assert!(why.contains("exit code 127"), "{why}"),
        other => panic!("expected Failed, got {other:?}"),
    }
}

/// What both launch modes must refuse: launch `first` asks for more CPUs than the cluster
/// has, launch `first + 1` has an environment variable with a space in its name.
pub fn assert_bad_requests_are_rejected(b: &SlurmCluster, dir: &Path, first: u64) {
    let e = b
        .submit(&request(dir, first, 100_000, 1, "/bin/true", &[]))
        .unwrap_err();
    assert!(matches!(e, BackendError::Rejected(_)), "{e}");
    eprintln!("oversize: {e}");
    let mut r = request(dir, first + 1, 1, 1, "/bin/true", &[]);
    r.environment.push(("BAD NAME".into(), "x".into()));
    assert!(matches!(b.submit(&r), Err(BackendError::Rejected(_))));
}

/// What both launch modes must do for a restarted server: a submission whose id the server
/// never recorded (launch `launch`, left running on cluster `i`) is cancelled by its name
/// alone, and cancelling one that never reached Slurm is no error.
pub fn assert_unrecorded_submission_is_cancelled(
    rig: &Rig,
    i: usize,
    b: &SlurmCluster,
    dir: &Path,
    launch: u64,
) {
    let r = request(
        dir,
        launch,
        1,
        1,
        "/bin/sh",
        &["-c", "echo started; exec sleep 60"],
    );
    let id = b.submit(&r).unwrap();
    until_running(b, &id);
    let name = rig.slurm(i, "squeue", &["-h", "-j", &id, "-o", "%j"]);
    let tag = b.config().name_tag.as_deref();
    assert_eq!(
        name,
        coalloc_backends::slurm::script::name_of(tag, 1, 0, launch)
    );
    // Cancelled once its process runs (an allocation whose step is still being launched
    // when it is cancelled can hang in COMPLETING on the rig's Slurm 22.05).
    let t0 = Instant::now();
    while !std::fs::read_to_string(&r.stdout).is_ok_and(|t| t.contains("started")) {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "launch {launch} did not start"
        );
        thread::sleep(Duration::from_millis(20));
    }
    b.cancel_unrecorded(r.job, r.component, r.launch).unwrap();
    rig.until_gone_from_squeue(i, &id);
    b.cancel_unrecorded(r.job, r.component, launch + 1_000)
        .unwrap();
}
