//! Running one resource-manager client command (`sbatch`, `squeue`, `qsub`, `qstat`, ...)
//! with a deadline.
//!
//! A dead Slurm controller makes a client fail only after about `MessageTimeout` (4 to 9 s
//! on the rig, scripts/slurm/README.md), a hung one after `MessageTimeout`, and a missing
//! `slurm.conf` makes a client retry for up to 60 s; a Grid Engine client waits for a
//! stopped qmaster as long as its TCP connection does (scripts/gridengine/README.md). So every command is spawned, waited for
//! with a deadline, and killed when the deadline passes: no call into a site blocks longer
//! than its `command_timeout`. Standard output and error are drained by helper threads so a
//! chatty command never stalls on a full pipe; a timed-out command's helpers are abandoned,
//! not joined, so a grandchild holding the pipe open cannot block us either.
//!
//! Also the two steps around those commands that the Slurm and Grid Engine backends share:
//! making a request's output folders before submitting it, and answering a query in the
//! order of its ids.

use crate::{RemoteId, RemoteState, SubmitRequest};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// What a finished command left behind.
#[derive(Debug)]
pub(crate) struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Standard error, or standard output when error is empty, trimmed: for messages.
    pub fn message(&self) -> String {
        let text = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        let text = text.trim();
        if text.is_empty() {
            format!("no output, {}", self.status)
        } else {
            text.to_string()
        }
    }
}

/// Why a command gave no [`Output`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{program} did not answer within {timeout:?} (killed)")]
    TimedOut { program: String, timeout: Duration },
    #[error("waiting for {program}: {source}")]
    Wait {
        program: String,
        source: std::io::Error,
    },
}

/// Runs `command` to its end or until `timeout`, feeding it `stdin` (or /dev/null).
pub(crate) fn run(
    mut command: Command,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
) -> Result<Output, RunError> {
    let program = command.get_program().to_string_lossy().into_owned();
    let deadline = Instant::now() + timeout;
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|source| RunError::Spawn {
        program: program.clone(),
        source,
    })?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A writer thread: a child that does not read must not block us past the deadline.
        // Write errors (the child exited early) show up in its status and messages.
        thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        });
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());

    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(source) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::Wait { program, source });
            }
        }
        let now = Instant::now();
        if now >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(RunError::TimedOut { program, timeout });
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    };
    // The child has exited; its pipes close unless it left a grandchild holding them, so
    // give the readers a short grace period only.
    let grace = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(200));
    Ok(Output {
        status,
        stdout: stdout.recv_timeout(grace).unwrap_or_default(),
        stderr: stderr.recv_timeout(grace).unwrap_or_default(),
    })
}

/// Reads a pipe to its end on a helper thread; the text arrives on the returned channel.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    match pipe {
        Some(mut pipe) => {
            thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
            });
        }
        None => {
            let _ = tx.send(String::new());
        }
    }
    rx
}

/// Make the folders of a request's output files before it goes to the resource manager, as
/// the local backend does. Best effort: the paths are the cluster's (this machine's on the
/// rigs, else a shared filesystem), and the resource manager reports a job it cannot start.
pub(crate) fn make_output_dirs(r: &SubmitRequest) {
    // A component run as its job's owner writes there itself: the job's folder is theirs,
    // and theirs alone (mode 0700: other users do not read it with `coalloc logs`).
    let owner = r.owner.as_deref().and_then(crate::accounts::user_ids);
    for file in [&r.stdout, &r.stderr] {
        if let Some(parent) = file.parent() {
            let _ = std::fs::create_dir_all(parent);
            if let Some((uid, gid)) = owner {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::os::unix::fs::chown(parent, Some(uid), Some(gid));
                let _ = std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700));
            }
        }
    }
}

/// The states of `ids`, in their order, from those found (`Unknown` for the others).
pub(crate) fn in_order(ids: &[RemoteId], known: &HashMap<&str, RemoteState>) -> Vec<RemoteState> {
    ids.iter()
        .map(|id| {
            known
                .get(id.as_str())
                .cloned()
                .unwrap_or(RemoteState::Unknown)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(script);
        c
    }

    #[test]
    fn collects_output_status_and_stdin() {
        let out = run(
            sh("cat; echo err >&2; exit 3"),
            Some(b"hello".to_vec()),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(out.stdout, "hello");
        assert_eq!(out.stderr, "err\n");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.message(), "err");
    }

    #[test]
    fn kills_a_command_that_outlives_its_deadline() {
        let t0 = Instant::now();
        let err = run(sh("exec sleep 30"), None, Duration::from_millis(200)).unwrap_err();
        assert!(matches!(err, RunError::TimedOut { .. }), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let err = run(
            Command::new("/nonexistent/sbatch"),
            None,
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(err, RunError::Spawn { .. }), "{err}");
    }
}
