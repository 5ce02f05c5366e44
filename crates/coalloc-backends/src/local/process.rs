//! The processes of one local launch: starting them under a `/bin/sh` wrapper in a process
//! group of their own, watching them end (as our children, or adopted from an earlier server
//! by their process group), killing the group, and the launch's files on disk.

use crate::{BackendError, RemoteState, SubmitRequest};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

/// Starts `$COALLOC_LAUNCH_PROCESSES` copies of `"$@"`, each with its ranks, and writes each
/// one's exit code to `exit.R` when it ends; the last rank runs in the wrapper itself, so a
/// one-process component costs one shell and the program. A process killed with its group
/// writes nothing, which is how a kill is told from an exit (the files are read only once
/// every process of the group is gone).
const WRAPPER: &str = r#"n=$COALLOC_LAUNCH_PROCESSES
off=${COALLOC_RANK_OFFSET:-0}
d=$COALLOC_LAUNCH_DIR
i=0
while [ "$i" -lt "$n" ]; do
  COALLOC_LOCAL_RANK=$i
  COALLOC_RANK=$((off + i))
  export COALLOC_LOCAL_RANK COALLOC_RANK
  if [ "$((i + 1))" -lt "$n" ]; then
    ( "$@" </dev/null; echo $? > "$d/exit.$i" ) &
  else
    "$@" </dev/null; echo $? > "$d/exit.$i"
  fi
  i=$((i + 1))
done
wait
"#;

/// What `launch.json` holds: the request, and once started the process group and start time.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Stored {
    #[serde(flatten)]
    pub request: SubmitRequest,
    #[serde(default)]
    pub pgid: Option<i32>,
    #[serde(default)]
    pub started_ms: Option<i64>,
}

impl Stored {
    fn new(r: &SubmitRequest) -> Stored {
        Stored {
            request: r.clone(),
            pgid: None,
            started_ms: None,
        }
    }
}

/// `final.json`: how the launch ended.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(super) enum Final {
    Finished,
    Failed { reason: String },
}

/// A started launch.
#[derive(Debug)]
pub(super) struct Running {
    /// The wrapper, when this server started it (`None` for an adopted launch).
    child: Option<Child>,
    pgid: i32,
    /// Unix milliseconds after which the wall time is exceeded.
    deadline_ms: Option<i64>,
    wall_ms: Option<i64>,
    killed: bool,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let part = path.with_extension("part");
    std::fs::write(&part, bytes)?;
    std::fs::rename(part, path)
}

/// Create the launch directory and its `launch.json`.
pub(super) fn write_request(dir: &Path, request: &SubmitRequest) -> Result<(), BackendError> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_vec_pretty(&Stored::new(request)).map_err(io::Error::other)?;
    write_atomic(&dir.join("launch.json"), &json)?;
    Ok(())
}

pub(super) fn write_final(dir: &Path, state: &RemoteState) {
    let f = match state {
        RemoteState::Finished => Final::Finished,
        RemoteState::Failed(reason) => Final::Failed {
            reason: reason.clone(),
        },
        _ => return,
    };
    if let Ok(json) = serde_json::to_vec(&f) {
        let _ = write_atomic(&dir.join("final.json"), &json);
    }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Refuse a request whose executable cannot be found, before anything starts.
pub(super) fn check_executable(r: &SubmitRequest) -> Result<(), BackendError> {
    let exe = r.executable.as_str();
    if exe.is_empty() {
        return Err(BackendError::Rejected("no executable given".into()));
    }
    let found = if exe.contains('/') {
        let p = Path::new(exe);
        match (&r.directory, p.is_relative()) {
            (Some(d), true) => is_executable(&d.join(p)),
            _ => is_executable(p),
        }
    } else {
        let path = r
            .environment
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone().into())
            .or_else(|| std::env::var_os("PATH"))
            .unwrap_or_default();
        std::env::split_paths(&path).any(|d| is_executable(&d.join(exe)))
    };
    if found {
        Ok(())
    } else {
        Err(BackendError::Rejected(format!(
            "executable `{exe}` not found or not executable"
        )))
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    OpenOptions::new().create(true).append(true).open(path)
}

/// Start the launch's processes; records the process group in `launch.json`.
pub(super) fn start(r: &SubmitRequest, dir: &Path) -> io::Result<Running> {
    let stdout = open_append(&r.stdout)?;
    let stderr = open_append(&r.stderr)?;
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(WRAPPER)
        .arg(format!("coalloc-L{}", r.launch))
        .arg(&r.executable)
        .args(&r.arguments)
        .envs(r.environment.iter().map(|(k, v)| (k, v)))
        .env("COALLOC_LAUNCH_DIR", dir)
        .env("COALLOC_LAUNCH_PROCESSES", r.processes.to_string())
        .current_dir(r.directory.as_deref().unwrap_or(dir))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        // A group of its own: killed as one, and out of reach of the terminal's Ctrl-C.
        .process_group(0);
    let child = cmd.spawn()?;
    let pgid = child.id() as i32;
    let started = now_ms();
    let mut stored = Stored::new(r);
    stored.pgid = Some(pgid);
    stored.started_ms = Some(started);
    let json = serde_json::to_vec_pretty(&stored).map_err(io::Error::other)?;
    write_atomic(&dir.join("launch.json"), &json)?;
    Ok(Running {
        child: Some(child),
        pgid,
        deadline_ms: r.wall_time_ms.map(|w| started + w),
        wall_ms: r.wall_time_ms,
        killed: false,
    })
}

/// A launch found running by a new server.
pub(super) fn adopted(pgid: i32, started_ms: i64, wall_time_ms: Option<i64>) -> Running {
    Running {
        child: None,
        pgid,
        deadline_ms: wall_time_ms.map(|w| started_ms + w),
        wall_ms: wall_time_ms,
        killed: false,
    }
}

/// Whether any process of group `pgid` is alive.
pub(super) fn group_alive(pgid: i32) -> bool {
    // The group's leader may be our own child that ended (the launch was started by an
    // earlier cluster object of this same process): reap it, or it counts as alive.
    // SAFETY: waitpid with WNOHANG on one pid; ECHILD when it is not our child.
    unsafe {
        libc::waitpid(pgid, std::ptr::null_mut(), libc::WNOHANG);
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(-pgid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

fn kill_group(pgid: i32) {
    // SAFETY: sending SIGKILL to a process group we created; no memory is involved.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// How a launch whose processes are all gone ended, from its files.
pub(super) fn outcome(dir: &Path, processes: u32) -> RemoteState {
    if let Ok(reason) = std::fs::read_to_string(dir.join("reason")) {
        return RemoteState::Failed(reason.trim().to_string());
    }
    for rank in 0..processes {
        let code = std::fs::read_to_string(dir.join(format!("exit.{rank}")));
        match code.as_deref().map(str::trim) {
            Ok("0") => {}
            Ok("127") => {
                return RemoteState::Failed(format!("process {rank}: command not found (127)"))
            }
            Ok(code) if !code.is_empty() => {
                return RemoteState::Failed(format!("process {rank} exited with {code}"))
            }
            _ => return RemoteState::Failed(format!("process {rank} was killed")),
        }
    }
    RemoteState::Finished
}

impl Running {
    /// The final state once every process has ended; enforces the wall time.
    pub fn poll(&mut self, dir: &Path, processes: u32) -> Option<RemoteState> {
        if let Some(deadline) = self.deadline_ms {
            if !self.killed && now_ms() >= deadline {
                let secs = self.wall_ms.unwrap_or(0) as f64 / 1000.0;
                self.kill(dir, &format!("wall time of {secs} s exceeded"));
            }
        }
        let ended = match &mut self.child {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => !group_alive(self.pgid),
        };
        if !ended {
            return None;
        }
        // Whatever the processes left behind in their group goes with them.
        kill_group(self.pgid);
        Some(outcome(dir, processes))
    }

    /// Kill every process of the launch, recording why.
    pub fn kill(&mut self, dir: &Path, reason: &str) {
        let _ = write_atomic(&dir.join("reason"), reason.as_bytes());
        kill_group(self.pgid);
        self.killed = true;
        if let Some(child) = &mut self.child {
            let _ = child.wait();
        }
    }
}
