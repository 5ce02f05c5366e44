//! The allocation launch (`launch = "allocation"`, [`super::Launch::Allocation`]): a
//! component's CPUs are asked for as a resource allocation (`salloc`) instead of a batch
//! job (`sbatch`). Slurm 22.05 tries to start an allocation inside the request itself when
//! its CPUs are free, while a batch job only waits for the controller's next scheduling pass,
//! up to about a second later and at a phase of its own on every cluster (scripts/slurm/
//! README.md). A co-allocated job over several clusters waits for the slowest of those
//! passes; granted allocations start within tens of milliseconds on every cluster.
//!
//! One component is one detached client, started in a session of its own so that neither a
//! `kill -9` of the server nor a signal to its process group reaches it:
//!
//! ```text
//! salloc -J NAME -n COUNT [-t MIN] [-p PART] -- \
//!     srun -N1 -n1 --input=none --open-mode=append -o OUT -e ERR [-D DIR] /bin/sh -c RUN
//! ```
//!
//! `RUN` evaluates the batch script of [`super::script`] (the same program as in batch mode),
//! passed in the client's environment rather than on its command line, where every user of
//! the host could read the job's secret. The step is one task on the first node of the
//! allocation and gets all the allocation's CPUs there (a step's default); an `mpi`
//! component's PMI proxy, started by it, runs its ranks over every node of a multi-node
//! allocation with an overlapping step of its own (coalloc-runtime `pmi::spread`). When it ends,
//! `salloc` ends the allocation with the step's exit code, so the job ends `COMPLETED` or
//! `FAILED` with `ExitCode=` exactly like a batch job, and `slurm::query` reads it the same
//! way; `scancel` revokes the allocation, which ends `srun`, the step and `salloc`. `salloc`
//! writes `Granted job allocation ID` (or `Pending job allocation ID` when the CPUs are
//! busy: it then waits in the queue like a batch job) to a log file beside the component's
//! standard error, `ERR.salloc-L<launch>`; `submit` returns once that line is there.
//!
//! What differs from a batch job: two client processes (`salloc`, `srun`) per component
//! live on the coalloc host as long as the component runs. A restarted server needs none of
//! them (it adopts components by their Slurm id), but if they are killed themselves (the
//! host goes down), the step is no longer watched and the allocation is only ended by
//! `scancel` or its time limit. Clients this backend started are waited for when they end
//! (reaped on every `submit`, `query` and `load`, so at least once a monitor interval), so none
//! is left a zombie for long.

use super::classify::unreachable;
use super::{parse, script, SlurmCluster};
use crate::{BackendError, RemoteId, SubmitRequest};
use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The environment variable that carries the batch script to the step.
const SCRIPT_VAR: &str = "COALLOC_LAUNCH_SCRIPT";

/// The step's program: the script from the environment, which it leaves out of the
/// component's own environment.
const RUN: &str = "s=$COALLOC_LAUNCH_SCRIPT; unset COALLOC_LAUNCH_SCRIPT; eval \"$s\"";

/// Clients started by this backend that have not been waited for yet.
#[derive(Debug, Default, Clone)]
pub(super) struct Clients(Arc<Mutex<Vec<Child>>>);

impl Clients {
    fn keep(&self, child: Child) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(child);
    }

    /// Waits for (reaps) every client that has ended.
    pub(super) fn reap(&self) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain_mut(|c| matches!(c.try_wait(), Ok(None)));
    }
}

/// `ERR.salloc-L<launch>`: salloc's and srun's own messages for one launch.
pub fn client_log(r: &SubmitRequest) -> PathBuf {
    let mut name = OsString::from(r.stderr.as_os_str());
    name.push(format!(".salloc-L{}", r.launch));
    PathBuf::from(name)
}

fn path_text(path: &Path, what: &'static str) -> Result<String, script::ScriptError> {
    path.to_str()
        .map(String::from)
        .ok_or_else(|| script::ScriptError::NotUtf8(what, path.display().to_string()))
}

/// salloc's arguments, then srun's and the step's.
fn arguments(c: &SlurmCluster, r: &SubmitRequest) -> Result<Vec<String>, script::ScriptError> {
    let mut a = script::allocation_options(r, c.job_name(r), c.config.partition.as_deref());
    a.extend(c.reservation_option(r));
    let srun = match &c.config.bin_dir {
        Some(dir) => path_text(&dir.join("srun"), "the Slurm bin directory")?,
        None => "srun".into(),
    };
    a.extend(["--".into(), srun]);
    a.extend(["-N1", "-n1", "--input=none", "--open-mode=append"].map(String::from));
    a.extend(["-o".into(), script::output_path(&r.stdout, "stdout")?]);
    a.extend(["-e".into(), script::output_path(&r.stderr, "stderr")?]);
    if let Some(dir) = &r.directory {
        a.extend(["-D".into(), path_text(dir, "the directory")?]);
    }
    a.extend(["/bin/sh".into(), "-c".into(), RUN.into()]);
    Ok(a)
}

/// Whether a variable of the server's environment would change how salloc or srun behave
/// (`SALLOC_*`, `SRUN_*`, `SBATCH_*`, and `SLURM_*` but the cluster's `SLURM_CONF`): such
/// variables are not passed on. A server started inside a Slurm job would otherwise make
/// every component a step of that job.
fn steers_slurm(name: &str) -> bool {
    ["SALLOC_", "SRUN_", "SBATCH_", "SLURM_"]
        .iter()
        .any(|p| name.starts_with(p))
        && name != "SLURM_CONF"
}

pub(super) fn submit(c: &SlurmCluster, r: &SubmitRequest) -> Result<RemoteId, BackendError> {
    c.clients.reap();
    let reject = |e: script::ScriptError| BackendError::Rejected(e.to_string());
    let body = script::batch_script(r).map_err(reject)?;
    let args = arguments(c, r).map_err(reject)?;
    crate::run::make_output_dirs(r);
    let log_path = client_log(r);
    // The launch number is unique, so is the file: nothing of another launch is read.
    let log = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&log_path)?;
    let mut command = c.command("salloc");
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(steers_slurm) {
            command.env_remove(name);
        }
    }
    command
        .args(&args)
        .env(SCRIPT_VAR, &body)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: only setsid(2), which is async-signal-safe, runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| {
        if e.raw_os_error() == Some(libc::E2BIG) {
            BackendError::Rejected(c.said("salloc", "the component's environment is too large"))
        } else {
            c.unavailable("salloc", e)
        }
    })?;
    let read = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let deadline = Instant::now() + c.config.command_timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(id) = parse::salloc_job_id(&read()) {
            c.clients.keep(child);
            return Ok(id);
        }
        match child.try_wait() {
            Ok(None) => {}
            Ok(Some(status)) => {
                // Written just before it ended?
                let text = read();
                if let Some(id) = parse::salloc_job_id(&text) {
                    return Ok(id);
                }
                let message = match text.trim() {
                    "" => format!("ended ({status}) without a job allocation"),
                    t => t.to_string(),
                };
                return Err(if unreachable(&message) {
                    c.unavailable("salloc", message)
                } else {
                    BackendError::Rejected(c.said("salloc", message))
                });
            }
            Err(e) => {
                give_up(c, r, child);
                return Err(c.unavailable("salloc", e));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            give_up(c, r, child);
            let said = read();
            return Err(c.unavailable(
                "salloc",
                format!(
                    "no job allocation within {:?} (killed){}{}",
                    c.config.command_timeout,
                    if said.trim().is_empty() { "" } else { ": " },
                    said.trim()
                ),
            ));
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}

/// Kills a client that gave no job id in time (its whole session's group), and cancels
/// whatever it may have been granted meanwhile (the name is unique to the launch). The
/// cancel runs in the background: the controller may be the one not answering, and the
/// caller must not wait for it a second time.
fn give_up(c: &SlurmCluster, r: &SubmitRequest, child: Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: a signal to the process group our own child leads (setsid made it so).
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    c.clients.keep(child);
    let (c, name) = (c.clone(), c.job_name(r));
    thread::spawn(move || {
        let _ = c.cancel_named(&name);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::SlurmConfig;

    fn request() -> SubmitRequest {
        SubmitRequest {
            launch: 7,
            job: 3,
            component: 1,
            count: 4,
            processes: 2,
            executable: "/bin/true".into(),
            wall_time_ms: Some(90_000),
            stdout: "/logs/c1%.out".into(),
            stderr: "/logs/c1.err".into(),
            directory: Some("/work".into()),
            ..SubmitRequest::default()
        }
    }

    #[test]
    fn salloc_then_srun_then_the_script_from_the_environment() {
        let c = SlurmCluster::new(SlurmConfig {
            partition: Some("main".into()),
            ..SlurmConfig::new("alpha")
        });
        let a = arguments(&c, &request()).unwrap();
        let want = [
            "-J",
            "coalloc-J3-c1-L7",
            "-n",
            "4",
            "-t",
            "2",
            "-p",
            "main",
            "--",
            "srun",
            "-N1",
            "-n1",
            "--input=none",
            "--open-mode=append",
            "-o",
            "/logs/c1%%.out",
            "-e",
            "/logs/c1.err",
            "-D",
            "/work",
            "/bin/sh",
            "-c",
            RUN,
        ];
        assert_eq!(a, want);
        // Nothing of the job's environment is on the command line.
        assert!(!a.iter().any(|w| w.contains("COALLOC_JOB")));
        assert_eq!(client_log(&request()), Path::new("/logs/c1.err.salloc-L7"));
    }

    #[test]
    fn the_servers_slurm_variables_are_not_passed_on() {
        for name in [
            "SLURM_JOB_ID",
            "SALLOC_PARTITION",
            "SRUN_CPUS_PER_TASK",
            "SBATCH_TIMELIMIT",
        ] {
            assert!(steers_slurm(name), "{name}");
        }
        for name in ["SLURM_CONF", "PATH", "HOME", "COALLOC_JOB_ID", "MYSLURM_X"] {
            assert!(!steers_slurm(name), "{name}");
        }
    }

    #[test]
    fn the_step_program_runs_the_script_without_leaving_it_in_the_environment() {
        let script = "echo \"x=$x\"; env | grep -c COALLOC_LAUNCH_SCRIPT; exit 3";
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", RUN])
            .env(SCRIPT_VAR, script)
            .env("x", "it's \"quoted\"")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "x=it's \"quoted\"\n0\n"
        );
        assert_eq!(out.status.code(), Some(3));
    }
}
