//! The processes of one local launch: starting them in a process group of their own, through
//! the cluster's launcher ([`super::launcher`]) or under a `/bin/sh` wrapper, watching them
//! end (as our children, or by their process group), killing the group, and the cluster's two
//! files on disk.
//!
//! Both files are only ever appended to, so that a launch creates no file of its own (on a
//! file system where creating a file is slow, a few of them per launch were most of the cost
//! of starting one): `launches.jsonl` holds one [`Record`] a line, `exits` one line
//! `LAUNCH RANK CODE` per process that ended, written by the wrapper or the launcher. A line
//! is one `write` to a file opened for appending; a line cut short by a crash does not parse
//! and is skipped.
//!
//! Compaction (issue 23, item 4): once the server has discarded enough ended launches, the
//! log is rewritten from what the cluster still keeps (a temporary file, synced, renamed
//! over the log); and `exits` is emptied in place (its writers append, so they go on at
//! the new end) when no launch runs, so that no process can be writing to it.

use super::launcher::{Start, Started};
use super::link::Link;
use crate::{BackendError, RemoteState, SubmitRequest};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Starts `$COALLOC_LAUNCH_PROCESSES` copies of `"$@"`, each with its ranks, and appends each
/// one's exit code to the cluster's `exits` file when it ends; the last rank runs in the
/// wrapper itself, so a one-process component costs one shell and the program. A process
/// killed with its group writes nothing, which is how a kill is told from an exit (the codes
/// are read only once every process of the group is gone).
const WRAPPER: &str = r#"n=$COALLOC_LAUNCH_PROCESSES
off=${COALLOC_RANK_OFFSET:-0}
x=$COALLOC_LAUNCH_EXITS
l=$COALLOC_LAUNCH_ID
i=0
while [ "$i" -lt "$n" ]; do
  COALLOC_LOCAL_RANK=$i
  COALLOC_RANK=$((off + i))
  export COALLOC_LOCAL_RANK COALLOC_RANK
  if [ "$((i + 1))" -lt "$n" ]; then
    ( "$@" </dev/null; echo "$l $i $?" >> "$x" ) &
  else
    "$@" </dev/null; echo "$l $i $?" >> "$x"
  fi
  i=$((i + 1))
done
wait
"#;

/// The launch log's name in the work directory.
pub(super) const LOG: &str = "launches.jsonl";
/// The exit codes' file name in the work directory.
pub(super) const EXITS: &str = "exits";

/// One line of `launches.jsonl`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Record {
    /// A launch was accepted (it may have to wait in the queue).
    Request(SubmitRequest),
    /// Its processes were started in process group `pgid`.
    Started {
        launch: u64,
        pgid: i32,
        started_ms: i64,
    },
    /// Its processes are being killed, for this reason.
    Killing { launch: u64, reason: String },
    /// The backend saw it end.
    Ended { launch: u64, outcome: Final },
    /// An advance reservation was made ([`super::calendar`]).
    Reserved {
        name: String,
        count: u32,
        start_ms: i64,
        duration_ms: i64,
    },
    /// It was deleted (or its window passed).
    Unreserved { name: String },
}

/// How a launch ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(super) enum Final {
    Finished,
    Failed {
        reason: String,
    },
    /// The site's failure ([`RemoteState::Lost`]).
    Lost {
        reason: String,
    },
}

impl Final {
    /// How a launch in this state ended; `None` if it has not.
    pub fn of(state: &RemoteState) -> Option<Final> {
        Some(match state {
            RemoteState::Finished => Final::Finished,
            RemoteState::Failed(reason) => Final::Failed {
                reason: reason.clone(),
            },
            RemoteState::Lost(reason) => Final::Lost {
                reason: reason.clone(),
            },
            _ => return None,
        })
    }

    pub fn state(self) -> RemoteState {
        match self {
            Final::Finished => RemoteState::Finished,
            Final::Failed { reason } => RemoteState::Failed(reason),
            Final::Lost { reason } => RemoteState::Lost(reason),
        }
    }
}

/// The cluster's launch log, open for appending.
#[derive(Debug)]
pub(super) struct Log {
    /// Swapped for the rewritten log by [`Log::rewrite`].
    file: Mutex<File>,
    path: PathBuf,
    /// The `exits` file the wrappers and the launcher append to.
    pub exits: PathBuf,
}

impl Log {
    /// Open (creating them if missing) the log and the exits file of `work_dir`.
    pub fn open(work_dir: &Path) -> io::Result<Log> {
        let exits = work_dir.join(EXITS);
        open_log(&exits)?;
        let path = work_dir.join(LOG);
        Ok(Log {
            file: Mutex::new(open_log(&path)?),
            path,
            exits,
        })
    }

    /// Append one record, in one write.
    pub fn append(&self, r: &Record) -> io::Result<()> {
        let mut line = serde_json::to_vec(r).map_err(io::Error::other)?;
        line.push(b'\n');
        let file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        (&*file).write_all(&line)
    }

    /// Replace the log by these records: the old log stays whole until the new one, synced,
    /// is renamed over it.
    pub fn rewrite(&self, records: &[Record]) -> io::Result<()> {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let tmp = self.path.with_extension("jsonl.tmp");
        let mut text = Vec::new();
        for r in records {
            serde_json::to_writer(&mut text, r).map_err(io::Error::other)?;
            text.push(b'\n');
        }
        let mut out = File::create(&tmp)?;
        out.write_all(&text)?;
        out.sync_all()?;
        std::fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)?.sync_all()?;
        }
        *file = open_log(&self.path)?;
        Ok(())
    }

    /// Record how a launch ended (best effort: the state is known in memory anyway, and a
    /// restart that finds no end reads the exit codes again).
    pub fn ended(&self, launch: u64, state: &RemoteState) {
        if let Some(outcome) = Final::of(state) {
            let _ = self.append(&Record::Ended { launch, outcome });
        }
    }
}

/// Open a log for appending (and reading), ending a line cut short by a crash so that it does
/// not swallow the next one.
fn open_log(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)?;
    let len = file.metadata()?.len();
    if len > 0 {
        let mut last = [0u8];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut last, len - 1)?;
        if last[0] != b'\n' {
            (&file).write_all(b"\n")?;
        }
    }
    Ok(file)
}

/// Every record of the log in `work_dir`, in order; lines that do not parse are skipped.
pub(super) fn read_log(work_dir: &Path) -> Vec<Record> {
    let text = std::fs::read(work_dir.join(LOG)).unwrap_or_default();
    text.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect()
}

/// The exit codes read so far from `exits`, by launch and rank. The file is read on from
/// where the last look ended.
#[derive(Debug, Default)]
pub(super) struct Exits {
    offset: u64,
    codes: HashMap<(u64, u32), String>,
}

impl Exits {
    /// Read the lines appended since the last look.
    pub fn refresh(&mut self, path: &Path) {
        let Ok(mut f) = File::open(path) else {
            return;
        };
        let mut bytes = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).is_err() || f.read_to_end(&mut bytes).is_err() {
            return;
        }
        // Only whole lines: a wrapper may be writing the next one now.
        let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else {
            return;
        };
        self.offset += end as u64 + 1;
        for line in String::from_utf8_lossy(&bytes[..end]).lines() {
            let mut w = line.split_whitespace();
            if let (Some(l), Some(r), Some(code)) = (w.next(), w.next(), w.next()) {
                if let (Ok(l), Ok(r)) = (l.parse(), r.parse()) {
                    self.codes.insert((l, r), code.to_string());
                }
            }
        }
    }

    /// Empty the `exits` file, whose codes are all read and used: only when no launch
    /// runs, so that no process writes to it meanwhile.
    pub fn clear(&mut self, path: &Path) -> io::Result<()> {
        OpenOptions::new().write(true).open(path)?.set_len(0)?;
        self.offset = 0;
        self.codes.clear();
        Ok(())
    }

    /// Whether every process of a launch wrote its code.
    pub fn has_all(&self, launch: u64, processes: u32) -> bool {
        (0..processes).all(|rank| self.codes.contains_key(&(launch, rank)))
    }

    /// How a launch whose processes are all gone ended; forgets its codes.
    pub fn outcome(&mut self, launch: u64, processes: u32, killed: Option<&str>) -> RemoteState {
        let codes: Vec<Option<String>> = (0..processes)
            .map(|rank| self.codes.remove(&(launch, rank)))
            .collect();
        if let Some(reason) = killed {
            return RemoteState::Failed(reason.to_string());
        }
        for (rank, code) in codes.iter().enumerate() {
            match code.as_deref() {
                Some("0") => {}
                Some("127") => {
                    return RemoteState::Failed(format!("process {rank}: command not found (127)"))
                }
                Some(code) if code.starts_with('s') => {
                    return RemoteState::Failed(format!(
                        "process {rank} was killed by signal {}",
                        &code[1..]
                    ))
                }
                Some(code) => {
                    return RemoteState::Failed(format!("process {rank} exited with {code}"))
                }
                None => return RemoteState::Failed(format!("process {rank} was killed")),
            }
        }
        RemoteState::Finished
    }
}

/// A started launch.
#[derive(Debug)]
pub(super) struct Running {
    /// The wrapper, when this server started one (`None` for a launch of the launcher or an
    /// adopted one).
    child: Option<Child>,
    pgid: i32,
    started_ms: i64,
    /// Unix milliseconds after which the wall time is exceeded.
    deadline_ms: Option<i64>,
    wall_ms: Option<i64>,
    /// Why its processes were killed, once they were.
    pub killed: Option<String>,
}

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
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

/// Start the launch's processes, through the cluster's launcher when it has one, else under
/// a `/bin/sh` wrapper, and record their process group in the log. The working directory,
/// unless the request names one, is the folder of the launch's standard output.
pub(super) fn start(
    r: &SubmitRequest,
    log: &Log,
    link: Option<&Mutex<Link>>,
) -> io::Result<Running> {
    // `None` also when no launcher could be reached (the link says so once): nothing was
    // asked of any, so the wrapper starts the launch.
    let run_as = run_as(r)?;
    if run_as.is_some() {
        crate::run::make_output_dirs(r);
    }
    let started = link.and_then(|link| through_launcher(r, run_as, link).ok());
    let (child, pgid) = match started {
        Some(Started {
            pgid: Some(pgid), ..
        }) => (None, pgid),
        Some(Started { error, .. }) => {
            return Err(io::Error::other(
                error.unwrap_or_else(|| "the launcher gave no reason".into()),
            ))
        }
        None => {
            let child = wrapped(r, run_as, log)?;
            let pgid = child.id() as i32;
            (Some(child), pgid)
        }
    };
    let started = now_ms();
    let mut running = Running {
        child,
        pgid,
        started_ms: started,
        deadline_ms: r.wall_time_ms.map(|w| started + w),
        wall_ms: r.wall_time_ms,
        killed: None,
    };
    let record = Record::Started {
        launch: r.launch,
        pgid,
        started_ms: started,
    };
    if let Err(e) = log.append(&record) {
        // Not on disk, not adoptable after a crash: do not let it run.
        running.kill(log, r.launch, "could not record the start");
        return Err(e);
    }
    Ok(running)
}

fn default_dir(r: &SubmitRequest) -> &Path {
    r.stdout.parent().unwrap_or(Path::new("/"))
}

/// The uid and gid to run the launch as: its owner's, when the request names one.
fn run_as(r: &SubmitRequest) -> io::Result<Option<(u32, u32)>> {
    let Some(owner) = &r.owner else {
        return Ok(None);
    };
    crate::accounts::user_ids(owner).map(Some).ok_or_else(|| {
        io::Error::other(format!(
            "the job's owner `{owner}` has no account on this host"
        ))
    })
}

fn through_launcher(
    r: &SubmitRequest,
    run_as: Option<(u32, u32)>,
    link: &Mutex<Link>,
) -> io::Result<Started> {
    let rank_offset = r
        .environment
        .iter()
        .rev()
        .find(|(k, _)| k == "COALLOC_RANK_OFFSET")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let start = Start {
        launch: r.launch,
        processes: r.processes,
        rank_offset,
        program: r.executable.clone(),
        args: r.arguments.clone(),
        env: r.environment.clone(),
        dir: r.directory.clone().unwrap_or_else(|| default_dir(r).into()),
        stdout: r.stdout.clone(),
        stderr: r.stderr.clone(),
        run_as,
    };
    link.lock().unwrap_or_else(|p| p.into_inner()).start(&start)
}

/// Start the launch under its own `/bin/sh` wrapper.
fn wrapped(r: &SubmitRequest, run_as: Option<(u32, u32)>, log: &Log) -> io::Result<Child> {
    let stdout = open_append(&r.stdout)?;
    let stderr = open_append(&r.stderr)?;
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(WRAPPER)
        .arg(format!("coalloc-L{}", r.launch))
        .arg(&r.executable)
        .args(&r.arguments)
        .envs(r.environment.iter().map(|(k, v)| (k, v)))
        .env("COALLOC_LAUNCH_EXITS", &log.exits)
        .env("COALLOC_LAUNCH_ID", r.launch.to_string())
        .env("COALLOC_LAUNCH_PROCESSES", r.processes.to_string())
        .current_dir(r.directory.as_deref().unwrap_or(default_dir(r)))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        // A group of its own: killed as one, and out of reach of the terminal's Ctrl-C.
        .process_group(0);
    if let Some((uid, gid)) = run_as {
        cmd.uid(uid).gid(gid);
    }
    cmd.spawn()
}

/// A launch found running by a new server.
pub(super) fn adopted(
    pgid: i32,
    started_ms: i64,
    wall_time_ms: Option<i64>,
    killed: Option<String>,
) -> Running {
    Running {
        child: None,
        pgid,
        started_ms,
        deadline_ms: wall_time_ms.map(|w| started_ms + w),
        wall_ms: wall_time_ms,
        killed,
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

impl Running {
    /// When its wall time ends (`None`: it may run for ever).
    pub fn until_ms(&self) -> Option<i64> {
        self.deadline_ms
    }

    /// The log's records of this start (and of its kill, if it was killed).
    pub fn records(&self, launch: u64) -> Vec<Record> {
        let mut out = vec![Record::Started {
            launch,
            pgid: self.pgid,
            started_ms: self.started_ms,
        }];
        if let Some(reason) = &self.killed {
            out.push(Record::Killing {
                launch,
                reason: reason.clone(),
            });
        }
        out
    }

    /// True once every process has ended; enforces the wall time.
    pub fn poll(&mut self, log: &Log, launch: u64) -> bool {
        if let Some(deadline) = self.deadline_ms {
            if self.killed.is_none() && now_ms() >= deadline {
                let secs = self.wall_ms.unwrap_or(0) as f64 / 1000.0;
                self.kill(log, launch, &format!("wall time of {secs} s exceeded"));
            }
        }
        let ended = match &mut self.child {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => !group_alive(self.pgid),
        };
        if ended {
            // Whatever the processes left behind in their group goes with them.
            kill_group(self.pgid);
        }
        ended
    }

    /// Kill every process of the launch, recording why.
    pub fn kill(&mut self, log: &Log, launch: u64, reason: &str) {
        let _ = log.append(&Record::Killing {
            launch,
            reason: reason.to_string(),
        });
        kill_group(self.pgid);
        self.killed = Some(reason.to_string());
        match &mut self.child {
            Some(child) => {
                let _ = child.wait();
            }
            // A launcher's or an earlier server's processes: their parent reaps them.
            None => {
                for _ in 0..2000 {
                    if !group_alive(self.pgid) {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        }
    }
}
