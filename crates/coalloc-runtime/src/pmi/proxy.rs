//! The thin pump around a [`Session`]: `coalloc pmi-proxy -- PROGRAM ARGS...`, which the
//! server starts in place of an `mpi` component's executable (seed 002 §4.3: MPICH-G's
//! processes reached the co-allocator through their MPI library). It starts the component's
//! `COALLOC_PROCESSES` MPI processes and feeds the session: a reader thread per process
//! (its PMI lines), a waiter thread for the processes' ends, and a thread per store or
//! barrier call, all sending into one channel that this loop drains. Every call goes
//! through the runtime's own `kv_put`, `kv_get` and `barrier`, so a relay that carries
//! those carries PMI too.
//!
//! Where the processes run: on this host, each with one end of a socket pair as `PMI_FD`
//! and its job-wide `PMI_RANK` of `PMI_SIZE`; or, inside a Slurm allocation of several
//! nodes, over all of them through `srun`, reaching this proxy over TCP (`PMI_PORT`,
//! [`super::spread`]).

use super::session::{Event, Input, Session, Setup};
use super::spread;
use super::wire::MAX_LINE;
use crate::{barrier, kv_get, kv_put, Config};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::mpsc::{channel, Sender};
use std::time::Duration;

/// Names in a program that show it was linked against Open MPI, whose processes start
/// through PMIx, which coalloc does not speak (README, "MPI programs").
const OPEN_MPI_MARKS: [&[u8]; 3] = [b"libmpi.so.40", b"libopen-rte.so", b"libopen-pal.so"];

/// What the loop receives: the session's inputs, and the processes' PMI connections as
/// they arrive (over TCP, [`spread`]; a socket pair is known from the start).
pub(super) enum Msg {
    In(Input),
    Connected {
        local: u32,
        writer: Box<dyn Write + Send>,
    },
}

impl From<Input> for Msg {
    fn from(input: Input) -> Msg {
        Msg::In(input)
    }
}

/// The started processes: where to write to each rank, and whom to signal to end them all.
#[derive(Default)]
pub(super) struct Ranks {
    pub(super) writers: Vec<Option<Box<dyn Write + Send>>>,
    /// `(pid, signal)`: each rank with SIGKILL, or the `srun` that started them with
    /// SIGTERM (which it passes on to every task).
    pub(super) kill: Vec<(u32, i32)>,
}

/// Run the component's MPI processes under the PMI session; the exit code of the component.
pub fn run(cfg: &Config, program: &str, args: &[String]) -> i32 {
    if let Some(why) = open_mpi(program) {
        eprintln!("coalloc pmi-proxy: {why}");
        // A failed start: the job is aborted (or the component replaced).
        let _ = barrier(cfg, false, Some(&why));
        return 1;
    }
    let setup = Setup {
        job: cfg.job_id,
        launch: cfg.launch,
        component: cfg.component,
        sizes: cfg.sizes.clone(),
        rank_offset: cfg.rank_offset,
        total: cfg.total,
        processes: cfg.processes,
    };
    let mut session = Session::new(setup);
    // `COALLOC_PMI_TRACE=1` in the component's environment: every PMI line on stderr.
    let trace = std::env::var_os("COALLOC_PMI_TRACE").is_some_and(|v| v == "1");
    let t0 = std::time::Instant::now();
    let ms = || t0.elapsed().as_secs_f64() * 1e3;
    let (tx, rx) = channel::<Msg>();
    let mut ranks = Ranks {
        writers: (0..cfg.processes).map(|_| None).collect(),
        kill: Vec::new(),
    };
    match spread::nodes(cfg) {
        Some(nodes) => spread::start(cfg, program, args, nodes, &tx, &mut ranks),
        None => {
            for local in 0..cfg.processes {
                if let Some((pid, stream)) = start(cfg, &session, program, args, local, &tx) {
                    ranks.writers[local as usize] = Some(Box::new(stream));
                    ranks.kill.push((pid, libc::SIGKILL));
                }
            }
        }
    }
    loop {
        while let Some(t) = session.poll_transmit() {
            if trace {
                eprint!(
                    "coalloc pmi-proxy: {:.1} ms: local rank {} < {}",
                    ms(),
                    t.local,
                    t.line
                );
            }
            if let Some(Some(stream)) = ranks.writers.get_mut(t.local as usize) {
                // A rank that is gone is reported by its waiter thread.
                let _ = stream.write_all(t.line.as_bytes());
            }
        }
        while let Some(event) = session.poll_event() {
            match event {
                Event::Put { token, key, value } => {
                    call(cfg, &tx, move |c| Input::PutDone {
                        token,
                        result: kv_put(c, &key, value.as_bytes()).map_err(|e| e.to_string()),
                    });
                }
                Event::Get {
                    token,
                    key,
                    wait_ms,
                } => {
                    call(cfg, &tx, move |c| Input::GetDone {
                        token,
                        result: kv_get(c, &key, Duration::from_millis(wait_ms))
                            .map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned()))
                            .map_err(|e| e.to_string()),
                    });
                }
                Event::CheckIn { ok, reason } => {
                    call(cfg, &tx, move |c| {
                        Input::CheckedIn(
                            barrier(c, ok, reason.as_deref()).map_err(|e| e.to_string()),
                        )
                    });
                }
                Event::KillAll => {
                    for (pid, signal) in &ranks.kill {
                        // SAFETY: kill(2) with a pid this process started and a constant signal.
                        unsafe { libc::kill(*pid as libc::pid_t, *signal) };
                    }
                }
                Event::Exit(code) => return code,
                Event::Log(text) => eprintln!("coalloc pmi-proxy: {text}"),
            }
        }
        match rx.recv() {
            Ok(Msg::In(input)) => {
                if trace {
                    eprintln!("coalloc pmi-proxy: {:.1} ms: {input:?}", ms());
                }
                session.handle(input)
            }
            Ok(Msg::Connected { local, writer }) => {
                if trace {
                    eprintln!(
                        "coalloc pmi-proxy: {:.1} ms: local rank {local} connected",
                        ms()
                    );
                }
                if let Some(slot) = ranks.writers.get_mut(local as usize) {
                    *slot = Some(writer);
                }
            }
            // Every sender is gone: nothing can happen any more.
            Err(_) => return 1,
        }
    }
}

/// One blocking runtime call on a thread of its own, its answer sent into the loop.
fn call(cfg: &Config, tx: &Sender<Msg>, f: impl FnOnce(&Config) -> Input + Send + 'static) {
    let (cfg, tx) = (cfg.clone(), tx.clone());
    std::thread::spawn(move || {
        let _ = tx.send(f(&cfg).into());
    });
}

/// `exited with code C` or `was killed by signal S`, and the code, of an ended process.
/// Tell the session that rank `local` ended (`code`: its exit code, if it had one).
pub(super) fn exited(tx: &Sender<Msg>, local: u32, code: Option<i32>, detail: String) {
    let _ = tx.send(
        Input::Exited {
            local,
            code,
            detail,
        }
        .into(),
    );
}

pub(super) fn ended(status: std::io::Result<ExitStatus>) -> (Option<i32>, String) {
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => (Some(c), format!("exited with code {c}")),
            (None, Some(sig)) => (None, format!("was killed by signal {sig}")),
            _ => (None, "ended".into()),
        },
        Err(e) => (None, format!("could not be waited for: {e}")),
    }
}

/// Start local rank `local`: its pid and our end of its PMI socket, or `None` (its failure
/// already sent into the loop).
fn start(
    cfg: &Config,
    session: &Session,
    program: &str,
    args: &[String],
    local: u32,
    tx: &Sender<Msg>,
) -> Option<(u32, UnixStream)> {
    let failed = |detail: String| exited(tx, local, None, detail);
    let (ours, theirs) = match UnixStream::pair() {
        Ok(p) => p,
        Err(e) => {
            failed(format!("could not be started (socket pair: {e})"));
            return None;
        }
    };
    let fd = theirs.as_raw_fd();
    let rank = session.rank_of(local);
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_remove("PMI_PORT")
        .env_remove("PMI_ID")
        .env("PMI_FD", fd.to_string())
        .env("PMI_RANK", rank.to_string())
        .env("PMI_SIZE", cfg.total.to_string())
        .env("COALLOC_LOCAL_RANK", local.to_string())
        .env("COALLOC_RANK", rank.to_string());
    // SAFETY: between fork and exec only fcntl(2), which is async-signal-safe, on a
    // descriptor this process owns: the child keeps its end of the pair across exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn();
    drop(theirs);
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            failed(format!("could not be started ({program}: {e})"));
            return None;
        }
    };
    let pid = child.id();
    let reader = ours.try_clone();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        let (code, detail) = ended(child.wait());
        exited(&tx2, local, code, detail);
    });
    if let Ok(r) = reader {
        let tx3 = tx.clone();
        std::thread::spawn(move || read_lines(r, local, &tx3));
    }
    Some((pid, ours))
}

/// Send every line of one rank into the loop, until its end closes. A line longer than
/// the protocol allows arrives cut into pieces, each refused by the session.
pub(super) fn read_lines(stream: impl Read, local: u32, tx: &Sender<Msg>) {
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        let line = String::from_utf8_lossy(&buf).into_owned();
        if tx.send(Input::Line { local, line }.into()).is_err() {
            return;
        }
    }
}

/// Why `program` must not run under coalloc's PMI: it is linked against Open MPI.
fn open_mpi(program: &str) -> Option<String> {
    let path = resolve(program)?;
    let bytes = std::fs::read(&path).ok()?;
    let mark = OPEN_MPI_MARKS
        .iter()
        .find(|m| bytes.windows(m.len()).any(|w| w == **m))?;
    Some(format!(
        "{} is linked against Open MPI ({}), which starts its processes through PMIx; \
         coalloc speaks MPICH's PMI-1: build it with MPICH's mpicc",
        path.display(),
        String::from_utf8_lossy(mark)
    ))
}

/// The file `program` names, through `PATH` when it has no `/`.
fn resolve(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| Path::is_file(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_mpi_programs_are_named() {
        let dir = std::env::temp_dir().join(format!("coalloc-pmi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ompi = dir.join("ompi");
        std::fs::write(&ompi, b"\x7fELF....libmpi.so.40\0libc.so.6").unwrap();
        let mpich = dir.join("mpich");
        std::fs::write(&mpich, b"\x7fELF....libmpich.so.12\0libc.so.6").unwrap();
        let why = open_mpi(ompi.to_str().unwrap()).unwrap();
        assert!(why.contains("Open MPI (libmpi.so.40)"), "{why}");
        assert_eq!(open_mpi(mpich.to_str().unwrap()), None);
        assert_eq!(open_mpi("/no/such/program"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
