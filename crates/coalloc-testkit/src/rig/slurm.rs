//! The Slurm rig of scripts/slurm/ (independent Slurm clusters on loopback), for the Slurm
//! backend's own tests (a backend per cluster, batch or allocation launch) and for end-to-end
//! tests of `coalloc serve` with Slurm sites (a server configuration per rig, node crashes,
//! controllers stopped and started again). Found through `COALLOC_SLURM_RIG` (up.sh's
//! BASE_DIR), whose `clusters.tsv` lists the clusters: unset, a test prints "skipped" and
//! passes; set but unusable, it fails.
//!
//! The clusters are shared. A backend test takes [`crate::backend::shared`] (or the write
//! lock [`crate::backend::QUIET`] when it needs a quiet cluster). An end-to-end scenario
//! holds [`Scenario`], which serializes the scenarios of its test binary, checks that the rig
//! is usable on entry, and on exit (even after a failed assertion) restarts any daemon a
//! scenario killed, cancels every job left and waits until every node is idle again.

use crate::backend::{request, until_final, until_running};
use coalloc_backends::slurm::{Launch, SlurmCluster, SlurmConfig};
use coalloc_backends::{Backend, BackendError, RemoteState, SiteLoad};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

static RIG_LOCK: Mutex<()> = Mutex::new(());

/// Job states in which a Slurm job is queued or holds (or may still hold) its CPUs.
const ACTIVE: &str = "PD,R,CG,S,CF,RQ,RS,RF,SE,SO,ST";

/// One cluster of `clusters.tsv`.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub name: String,
    pub conf: PathBuf,
    pub cpus: u32,
    pub nodes: Vec<String>,
}

/// The rig: its base directory and its clusters, in `clusters.tsv` order.
#[derive(Debug, Clone)]
pub struct Rig {
    pub base: PathBuf,
    pub clusters: Vec<Cluster>,
}

/// One scenario's hold on the rig: the lock, and the clean-up on drop.
pub struct Scenario {
    pub rig: Rig,
    _lock: MutexGuard<'static, ()>,
}

impl Scenario {
    /// The rig, locked for this scenario; `None` (skipped) when `COALLOC_SLURM_RIG` is
    /// unset. Panics when it is set but the rig is not up.
    pub fn begin(test: &str) -> Option<Scenario> {
        let rig = Rig::get(test)?;
        assert!(
            rig.clusters.len() >= 3,
            "{}: {} clusters; these tests need three",
            rig.base.display(),
            rig.clusters.len()
        );
        let lock = RIG_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        rig.check_usable();
        // A scenario starts on empty clusters (a previous run may have left jobs).
        rig.cancel_all();
        rig.wait_quiet(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("{test}: the rig is not quiet: {e}"));
        Some(Scenario { rig, _lock: lock })
    }
}

impl Drop for Scenario {
    fn drop(&mut self) {
        if let Err(e) = self.rig.restore() {
            if std::thread::panicking() {
                eprintln!("restoring the Slurm rig failed too: {e}");
            } else {
                panic!("restoring the Slurm rig failed: {e}");
            }
        }
    }
}

fn pid_of(pid_file: &Path, comm: &str) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(pid_file)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let zombie = stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z'));
    (name.trim() == comm && !zombie).then_some(pid)
}

fn kill(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status();
}

impl Rig {
    /// The rig, or `None` (test skipped) when `COALLOC_SLURM_RIG` is unset; panics when
    /// its `clusters.tsv` is missing or empty.
    pub fn get(test: &str) -> Option<Rig> {
        let Some(base) = std::env::var_os("COALLOC_SLURM_RIG") else {
            eprintln!("{test}: skipped (COALLOC_SLURM_RIG is unset; see scripts/slurm/README.md)");
            return None;
        };
        Some(Rig::read(Path::new(&base)))
    }

    /// Reads `BASE/clusters.tsv`; panics when it is missing or empty.
    pub fn read(base: &Path) -> Rig {
        let tsv = base.join("clusters.tsv");
        let text = std::fs::read_to_string(&tsv).unwrap_or_else(|e| {
            panic!(
                "COALLOC_SLURM_RIG is set but {} is unreadable: {e} (run scripts/slurm/up.sh)",
                tsv.display()
            )
        });
        let clusters: Vec<Cluster> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                assert!(f.len() >= 6, "{}: bad line {l:?}", tsv.display());
                let per_node: u32 = f[3].parse().expect("cpus per node");
                let nodes: Vec<String> = f[5].split_whitespace().map(String::from).collect();
                Cluster {
                    name: f[0].to_string(),
                    conf: PathBuf::from(f[1]),
                    cpus: per_node * nodes.len() as u32,
                    nodes,
                }
            })
            .collect();
        assert!(!clusters.is_empty(), "{} lists no cluster", tsv.display());
        Rig {
            base: base.to_path_buf(),
            clusters,
        }
    }

    /// The name of cluster `i` (counted round the clusters: any `i` names one).
    pub fn name(&self, i: usize) -> &str {
        &self.clusters[i % self.clusters.len()].name
    }

    /// The `slurm.conf` of cluster `i` (likewise).
    pub fn conf(&self, i: usize) -> &Path {
        &self.clusters[i % self.clusters.len()].conf
    }

    /// The index of the cluster named `name`.
    pub fn index(&self, name: &str) -> usize {
        self.clusters
            .iter()
            .position(|c| c.name == name)
            .unwrap_or_else(|| panic!("no cluster {name}"))
    }

    fn dir(&self, i: usize) -> PathBuf {
        self.base.join(&self.clusters[i].name)
    }

    /// A server configuration with one Slurm site per cluster, then `scheduler`.
    pub fn config(&self, scheduler: &str) -> String {
        self.config_launching(scheduler, "batch")
    }

    /// The same with the sites' `launch` setting (`batch` or `allocation`).
    pub fn config_launching(&self, scheduler: &str, launch: &str) -> String {
        let mut s = String::from(super::SERVER);
        for i in 0..self.clusters.len() {
            s += &self.site(i, launch);
        }
        s + "[scheduler]\n" + scheduler + "\n"
    }

    /// The `[[site]]` table of cluster `i` (for configurations that mix resource managers).
    pub fn site(&self, i: usize, launch: &str) -> String {
        let c = &self.clusters[i];
        format!(
            "[[site]]\nname = \"{}\"\nprocessors = {}\nmanager = {{ type = \"slurm\", slurm_conf = \"{}\", launch = \"{launch}\" }}\n",
            c.name,
            c.cpus,
            c.conf.display()
        )
    }

    /// Runs a Slurm client command against cluster `i` (with a 20 s limit).
    pub fn run(&self, i: usize, program: &str, args: &[&str]) -> Output {
        Command::new("timeout")
            .arg("20")
            .arg(program)
            .args(args)
            .env("SLURM_CONF", self.conf(i))
            .current_dir("/")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    /// The same, which must succeed; its standard output.
    pub fn slurm(&self, i: usize, program: &str, args: &[&str]) -> String {
        let out = self.run(i, program, args);
        assert!(
            out.status.success(),
            "{} {program} {args:?}: {}",
            self.name(i),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A backend for cluster `i` (batch launch).
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

    /// Wait (at most 30 s) until job `id` is gone from cluster `i`'s live queue (squeue
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

    /// `id|state|name` of the cluster's queued or running jobs; `Err` if squeue fails.
    pub fn active_jobs(&self, i: usize) -> Result<Vec<String>, String> {
        let out = self.run(i, "squeue", &["-h", "-t", ACTIVE, "-o", "%i|%T|%j"]);
        if !out.status.success() {
            return Err(format!(
                "{}: squeue: {}",
                self.clusters[i].name,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect())
    }

    /// Node states (`sinfo -N %T`) of cluster `i`.
    pub fn node_states(&self, i: usize) -> Result<Vec<String>, String> {
        let out = self.run(i, "sinfo", &["-h", "-N", "-o", "%T"]);
        if !out.status.success() {
            return Err(format!(
                "{}: sinfo: {}",
                self.clusters[i].name,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .collect())
    }

    /// Every daemon of the rig runs and every node is up; panics otherwise.
    pub fn check_usable(&self) {
        assert!(
            pid_of(&self.base.join("munge/munged.pid"), "munged").is_some(),
            "COALLOC_SLURM_RIG={}: munged is not running (run scripts/slurm/up.sh)",
            self.base.display()
        );
        for (i, c) in self.clusters.iter().enumerate() {
            assert!(
                self.slurmctld_pid(i).is_some(),
                "{}: slurmctld is not running (run scripts/slurm/up.sh)",
                c.name
            );
            for n in &c.nodes {
                assert!(
                    self.slurmd_pid(i, n).is_some(),
                    "{}: slurmd {n} is not running (run scripts/slurm/up.sh)",
                    c.name
                );
            }
            let states = self
                .node_states(i)
                .unwrap_or_else(|e| panic!("the rig is not usable: {e}"));
            assert!(
                !states.is_empty()
                    && states
                        .iter()
                        .all(|s| matches!(s.as_str(), "idle" | "mixed" | "allocated")),
                "{}: nodes not up: {states:?}",
                c.name
            );
        }
    }

    pub fn slurmctld_pid(&self, i: usize) -> Option<u32> {
        pid_of(&self.dir(i).join("run/slurmctld.pid"), "slurmctld")
    }

    pub fn slurmd_pid(&self, i: usize, node: &str) -> Option<u32> {
        pid_of(
            &self.dir(i).join(format!("run/slurmd-{node}.pid")),
            "slurmd",
        )
    }

    /// A node crash on cluster `i`: SIGKILL its slurmd(s) and the job steps they ran (the
    /// rig's own `kill_stray_stepds`), then mark the node(s) DOWN at once, as a health check
    /// would, rather than waiting for `SlurmdTimeout`. Slurm ends the jobs there as
    /// `NODE_FAIL` (the backend submits with `--no-requeue`).
    pub fn crash_nodes(&self, i: usize) {
        let c = &self.clusters[i];
        for n in &c.nodes {
            if let Some(pid) = self.slurmd_pid(i, n) {
                kill(pid, "-KILL");
            }
        }
        let common = crate::repo().join("scripts/slurm/common.sh");
        let spool = self.dir(i).join("spool");
        let st = Command::new("bash")
            .arg("-c")
            .arg(r#". "$1"; kill_stray_stepds "$2""#)
            .arg("bash")
            .arg(&common)
            .arg(&spool)
            .status()
            .unwrap();
        assert!(st.success(), "kill_stray_stepds failed");
        let nodes = c.nodes.join(",");
        self.slurm(
            i,
            "scontrol",
            &[
                "update",
                &format!("nodename={nodes}"),
                "state=down",
                "reason=coalloc-test-crash",
            ],
        );
    }

    /// Stop cluster `i`'s controller (SIGTERM: it saves its state first, so no job is
    /// forgotten) and wait until it is gone. Its slurmd(s) and their jobs run on.
    pub fn stop_controller(&self, i: usize) {
        let pid = self
            .slurmctld_pid(i)
            .unwrap_or_else(|| panic!("{}: slurmctld is not running", self.clusters[i].name));
        kill(pid, "-TERM");
        let t = Instant::now();
        while self.slurmctld_pid(i).is_some() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "{}: slurmctld {pid} ignored SIGTERM",
                self.clusters[i].name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Start the daemons of cluster `i` that are not running, the way up.sh starts them
    /// (same slurm.conf; slurmctld keeps its saved state), and wait until its nodes are up.
    pub fn restart_missing(&self, i: usize) -> Result<(), String> {
        let c = &self.clusters[i];
        let dir = self.dir(i);
        let start = |args: &[&str], log: &str| -> Result<(), String> {
            let out = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("log").join(log))
                .map_err(|e| e.to_string())?;
            let st = Command::new("setsid")
                .args(args)
                .stdin(Stdio::null())
                .stdout(out.try_clone().map_err(|e| e.to_string())?)
                .stderr(out)
                .status()
                .map_err(|e| e.to_string())?;
            if st.success() {
                Ok(())
            } else {
                Err(format!("{}: {args:?} failed: {st}", c.name))
            }
        };
        let conf = c.conf.to_string_lossy().to_string();
        if self.slurmctld_pid(i).is_none() {
            start(&["slurmctld", "-f", &conf], "slurmctld.out")?;
            let t = Instant::now();
            loop {
                let out = self.run(i, "scontrol", &["ping"]);
                if out.status.success() && String::from_utf8_lossy(&out.stdout).contains("UP") {
                    break;
                }
                if t.elapsed() > Duration::from_secs(30) {
                    return Err(format!("{}: slurmctld does not answer", c.name));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        for n in &c.nodes {
            if self.slurmd_pid(i, n).is_none() {
                let _ = std::fs::create_dir_all(dir.join("spool").join(n));
                start(
                    &["slurmd", "-f", &conf, "-N", n],
                    &format!("slurmd-{n}.out"),
                )?;
            }
        }
        // ReturnToService=2 makes a DOWN node idle when its slurmd registers; resume it
        // otherwise.
        let t = Instant::now();
        let mut resumed = false;
        loop {
            let states = self.node_states(i).unwrap_or_default();
            if !states.is_empty()
                && states
                    .iter()
                    .all(|s| matches!(s.as_str(), "idle" | "mixed" | "allocated"))
            {
                return Ok(());
            }
            if t.elapsed() > Duration::from_secs(5) && !resumed {
                resumed = true;
                let _ = self.run(
                    i,
                    "scontrol",
                    &[
                        "update",
                        &format!("nodename={}", c.nodes.join(",")),
                        "state=resume",
                    ],
                );
            }
            if t.elapsed() > Duration::from_secs(40) {
                return Err(format!("{}: nodes not up: {states:?}", c.name));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `scancel` every queued or running job and delete every reservation of every
    /// cluster (a reserved node is not idle).
    pub fn cancel_all(&self) {
        for i in 0..self.clusters.len() {
            if let Ok(jobs) = self.active_jobs(i) {
                let ids: Vec<&str> = jobs.iter().filter_map(|j| j.split('|').next()).collect();
                if !ids.is_empty() {
                    let _ = self.run(i, "scancel", &ids);
                }
            }
            let shown = self.run(i, "scontrol", &["show", "reservation", "-o"]);
            for name in String::from_utf8_lossy(&shown.stdout)
                .lines()
                .filter_map(|l| l.strip_prefix("ReservationName="))
                .filter_map(|l| l.split_whitespace().next())
            {
                let _ = self.run(
                    i,
                    "scontrol",
                    &["delete", &format!("reservationname={name}")],
                );
            }
        }
    }

    /// Kill the `salloc` and `srun` of an allocation-mode launch against one of this rig's
    /// clusters whose server is gone (parent 1): nothing else would end them, and one left
    /// behind spun at a whole CPU once the rig's controller stopped (the CI run of `35af02e`,
    /// after `mpi-slurm-nodes-fail`).
    pub fn kill_orphaned_clients(&self) {
        let confs: Vec<Vec<u8>> = (self.clusters.iter())
            .map(|c| format!("SLURM_CONF={}", c.conf.display()).into_bytes())
            .collect();
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return;
        };
        for pid in procs
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if !matches!(comm.trim(), "salloc" | "srun") {
                continue;
            }
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // "pid (comm) state ppid ...": the parent is the second field after the name.
            let ppid = stat.rsplit(") ").next().and_then(|r| r.split(' ').nth(1));
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let ours = environ
                .split(|&b| b == 0)
                .any(|v| confs.iter().any(|c| c == v));
            if ppid == Some("1") && ours {
                eprintln!(
                    "slurm rig: killing {} {pid}, left by a stopped server",
                    comm.trim()
                );
                kill(pid, "-KILL");
            }
        }
    }

    /// Wait until no cluster has a queued or running job and every node is idle.
    pub fn wait_quiet(&self, limit: Duration) -> Result<(), String> {
        let t = Instant::now();
        loop {
            let mut left = Vec::new();
            for (i, c) in self.clusters.iter().enumerate() {
                match (self.active_jobs(i), self.node_states(i)) {
                    (Ok(jobs), Ok(states)) => {
                        if !jobs.is_empty() || states.iter().any(|s| s != "idle") {
                            left.push(format!("{}: jobs {jobs:?}, nodes {states:?}", c.name));
                        }
                    }
                    (Err(e), _) | (_, Err(e)) => left.push(e),
                }
            }
            if left.is_empty() {
                return Ok(());
            }
            if t.elapsed() > limit {
                return Err(left.join("; "));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Back to the state of a fresh rig: daemons running, no job left, nodes idle.
    pub fn restore(&self) -> Result<(), String> {
        let mut errors = Vec::new();
        for i in 0..self.clusters.len() {
            if let Err(e) = self.restart_missing(i) {
                errors.push(e);
            }
        }
        self.cancel_all();
        if let Err(e) = self.wait_quiet(Duration::from_secs(30)) {
            errors.push(e);
        }
        self.kill_orphaned_clients();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
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
