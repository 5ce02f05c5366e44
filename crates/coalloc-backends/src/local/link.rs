//! The server's end of a cluster's launcher (see [`super::launcher`]): connecting to the
//! launcher that runs on the work directory, starting one when none does, and asking it to
//! start a launch.
//!
//! A request is sent only on a connection the launcher has greeted, and is never sent twice:
//! when the connection breaks after a request went out, the launch fails rather than risk
//! starting it a second time.

use super::launcher::{Start, Started, GREETING, SOCKET};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Longest wait for the launcher's answer to one request.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// How a cluster's launcher is started: `program args... WORK_DIR`, which must call
/// [`super::launcher::run`] on `WORK_DIR` (`coalloc local-launcher`, `coalloc-launcher`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LauncherCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// A connection to the launcher, made when first needed and again after it broke.
#[derive(Debug)]
pub(super) struct Link {
    command: LauncherCommand,
    work_dir: PathBuf,
    conn: Option<(BufReader<UnixStream>, UnixStream)>,
    /// Why no launcher could be started: it is not tried again (each try would cost every
    /// launch a process and up to a second), and launches use the wrapper.
    broken: Option<String>,
}

impl Link {
    pub fn new(command: LauncherCommand, work_dir: &Path) -> Link {
        Link {
            command,
            work_dir: work_dir.to_path_buf(),
            conn: None,
            broken: None,
        }
    }

    /// Connect, starting the launcher when none answers. An error here means nothing was
    /// asked of any launcher.
    pub fn connect(&mut self) -> io::Result<()> {
        if self.conn.is_some() {
            return Ok(());
        }
        if let Some(why) = &self.broken {
            return Err(io::Error::other(why.clone()));
        }
        let socket = self.work_dir.join(SOCKET);
        if let Ok(c) = greeted(&socket) {
            self.conn = Some(c);
            return Ok(());
        }
        let e = match self.start_launcher(&socket) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        eprintln!(
            "coalloc: no launcher for {} ({e}); its launches start under /bin/sh",
            self.work_dir.display()
        );
        self.broken = Some(e.to_string());
        Err(e)
    }

    fn start_launcher(&mut self, socket: &Path) -> io::Result<()> {
        let mut last = io::Error::other("the launcher did not start");
        for _ in 0..50 {
            match self.spawn()? {
                true => match greeted(socket) {
                    Ok(c) => {
                        self.conn = Some(c);
                        return Ok(());
                    }
                    Err(e) => last = e,
                },
                // Another launcher holds the directory: it is starting or leaving.
                false => {
                    if let Ok(c) = greeted(socket) {
                        self.conn = Some(c);
                        return Ok(());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        Err(last)
    }

    /// Run the launcher command; true once it listens, false when another one holds the
    /// directory.
    fn spawn(&self) -> io::Result<bool> {
        let mut child = Command::new(&self.command.program)
            .args(&self.command.args)
            .arg(&self.work_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            BufReader::new(out).read_line(&mut line)?;
        }
        // The launcher's first process ends as soon as it has detached.
        let _ = child.wait();
        match line.trim() {
            "ready" => Ok(true),
            "busy" => Ok(false),
            other => Err(io::Error::other(format!(
                "the launcher `{}` did not start (it said `{other}`)",
                self.command.program.display()
            ))),
        }
    }

    /// Ask the launcher to start a launch. `Err` only when the request was not delivered
    /// (connecting or writing failed); a broken exchange after it was becomes a failed
    /// answer.
    pub fn start(&mut self, s: &Start) -> io::Result<Started> {
        let failed = |e: String| Started {
            launch: s.launch,
            pgid: None,
            error: Some(e),
        };
        let mut line = serde_json::to_vec(s).map_err(io::Error::other)?;
        line.push(b'\n');
        // A launcher that went away since the last launch is found here: a write to a closed
        // socket fails whole and delivers nothing, so it is sent again on a new connection.
        for tries in 1.. {
            self.connect()?;
            let Some((_, writer)) = &mut self.conn else {
                return Err(io::Error::other("no launcher"));
            };
            match writer.write_all(&line) {
                Ok(()) => break,
                Err(e) => {
                    self.conn = None;
                    if tries >= 2 {
                        return Err(e);
                    }
                }
            }
        }
        let Some((reader, _)) = &mut self.conn else {
            return Err(io::Error::other("no launcher"));
        };
        let mut answer = String::new();
        let read = reader.read_line(&mut answer);
        let parsed = match read {
            Ok(0) => Err("launcher: connection closed".to_string()),
            Ok(_) => serde_json::from_str::<Started>(&answer)
                .map_err(|e| format!("launcher: bad answer: {e}")),
            Err(e) => Err(format!("launcher: {e}")),
        };
        match parsed {
            Ok(a) if a.launch == s.launch => Ok(a),
            Ok(a) => {
                self.conn = None;
                Ok(failed(format!("launcher: answer for launch {}", a.launch)))
            }
            Err(e) => {
                self.conn = None;
                Ok(failed(e))
            }
        }
    }
}

/// A connection the launcher greeted.
fn greeted(socket: &Path) -> io::Result<(BufReader<UnixStream>, UnixStream)> {
    let stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut hello = String::new();
    reader.read_line(&mut hello)?;
    if hello != GREETING {
        return Err(io::Error::other(format!(
            "not a launcher's greeting: {hello:?}"
        )));
    }
    Ok((reader, stream))
}
