//! The cluster's launcher: a small long-lived process that starts a cluster's launches for
//! the server and writes their exit codes, in place of one `/bin/sh` wrapper per launch.
//!
//! It owns the components' processes: they are its children, each launch in a process group
//! of its own, and when one ends it appends the `exits` line (`LAUNCH RANK CODE`, or
//! `LAUNCH RANK sN` for a process killed by signal N) *before* reaping it, so that a launch's
//! group is gone only once all its codes are on disk, as with the wrapper. It runs in a
//! session of its own and does not depend on the server: when the server is killed it goes
//! on reaping and writing codes, and the next server connects to it again (the socket
//! `launcher.sock` in the cluster's work directory) and adopts the launches from the log. It
//! exits once no server is connected and none of its processes runs.
//!
//! One request a line from the server ([`Start`]), one answer a line back ([`Started`]).
//!
//! A start is done once per launch number: a request for a launch this launcher started
//! already is answered with that launch's process group, and nothing more is started. A
//! server that stopped between its request and writing down the answer sends the request
//! again when it comes back (the log holds the request, not its start: `adopt`); without
//! this the component ran twice (`postgres_replicated.rs`, a fail-over in that window: the
//! first copy outlived the second's cancel). A launch is remembered while it runs, and after
//! it ended only when the connection that asked for it had closed by then (so few are kept);
//! one that ended is then answered with its group, gone, and its codes are in `exits`.
//! Single-threaded: a `poll` over the listening socket, the connections and a `signalfd` for
//! `SIGCHLD`.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, ErrorKind, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The socket's name in the work directory.
pub const SOCKET: &str = "launcher.sock";
/// The lock that makes the launcher one per work directory.
const LOCK: &str = "launcher.lock";
/// The launcher's own messages (it has no terminal).
const LOG: &str = "launcher.log";
/// The first line on every connection.
pub const GREETING: &str = "coalloc-launcher 1\n";

/// Start one launch: `processes` copies of the program, ranks `rank_offset..`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Start {
    pub launch: u64,
    pub processes: u32,
    pub rank_offset: u64,
    pub program: String,
    pub args: Vec<String>,
    /// Added to the launcher's own environment (the server's, when it started it).
    pub env: Vec<(String, String)>,
    pub dir: PathBuf,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// The uid and gid to run the processes as (the job's owner), when not the launcher's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as: Option<(u32, u32)>,
}

/// The answer: the launch's process group, or why it could not start (then nothing of it
/// runs and it writes no exit code).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Started {
    pub launch: u64,
    pub pgid: Option<i32>,
    pub error: Option<String>,
}

/// One connected server.
struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// Numbered in the order they came, from 1.
    id: u64,
}

/// A launch this launcher started: its process group, the connection that asked, and its
/// standard output (a launch's own path: a request of the same number for another file is
/// not this launch).
#[derive(Debug, Clone)]
struct Spawned {
    pgid: i32,
    by: u64,
    stdout: PathBuf,
}

struct Launcher {
    exits: File,
    /// Live children: pid -> (launch, rank).
    children: HashMap<i32, (u64, u32)>,
    /// Launches whose start failed half-way: their processes write no code.
    voided: std::collections::HashSet<u64>,
    /// The launches started here, by number (see the module documentation).
    spawned: HashMap<u64, Spawned>,
    /// The connections open now.
    open: std::collections::HashSet<u64>,
    /// The last connection's number.
    last_conn: u64,
}

/// Run the launcher of `work_dir` until no server is connected and nothing runs. Returns at
/// once, writing `busy` on standard output, when another launcher holds the directory;
/// otherwise writes `ready` once it listens (after detaching from its parent: the server
/// waits only for that line).
pub fn run(work_dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(work_dir)?;
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(work_dir.join(LOCK))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        println!("busy");
        return Ok(());
    }
    let socket = work_dir.join(SOCKET);
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket)?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
    listener.set_nonblocking(true)?;
    let exits = OpenOptions::new()
        .create(true)
        .append(true)
        .open(work_dir.join(super::process::EXITS))?;
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(work_dir.join(LOG))?;
    let signals = sigchld_fd()?;
    detach()?;
    // The processes a component leaves behind when its first process ends (an MPI
    // component's ranks under a killed `pmi-proxy`) become ours, not init's: init may reap
    // them seconds later (1.7 s seen here), and until then their group looks alive to a
    // cancel waiting for it. [`Launcher::reap`] reaps them with the rest.
    // SAFETY: prctl with an integer option on this process only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    // The server reads this line from our standard output, then it is of no further use.
    println!("ready");
    let null = File::open("/dev/null")?;
    // SAFETY: dup2 onto our own standard descriptors.
    unsafe {
        libc::dup2(null.as_raw_fd(), 0);
        libc::dup2(null.as_raw_fd(), 1);
        libc::dup2(log.as_raw_fd(), 2);
    }
    let mut l = Launcher {
        exits,
        children: HashMap::new(),
        voided: Default::default(),
        spawned: HashMap::new(),
        open: Default::default(),
        last_conn: 0,
    };
    let mut conns: Vec<Conn> = Vec::new();
    loop {
        let mut fds = vec![pollfd(listener.as_raw_fd()), pollfd(signals.as_raw_fd())];
        fds.extend(conns.iter().map(|c| pollfd(c.writer.as_raw_fd())));
        // SAFETY: fds is a valid array of pollfd of the given length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[1].revents != 0 {
            drain(&signals);
            l.reap();
        }
        // Connections first, then new ones (their indexes in `fds` are those of `conns`).
        let mut gone = Vec::new();
        for (i, c) in conns.iter_mut().enumerate() {
            if fds[i + 2].revents != 0 && !l.serve(c) {
                gone.push(i);
            }
        }
        for i in gone.into_iter().rev() {
            l.open.remove(&conns.swap_remove(i).id);
        }
        l.accept(&listener, &mut conns);
        if conns.is_empty() && l.children.is_empty() {
            // A server that connected just now keeps us; otherwise nobody needs us.
            l.accept(&listener, &mut conns);
            if conns.is_empty() {
                let _ = std::fs::remove_file(&socket);
                return Ok(());
            }
        }
    }
}

fn pollfd(fd: i32) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Block `SIGCHLD` and read it from a descriptor instead (children start with an empty mask:
/// [`unblock_signals`] between fork and exec. Without it, the processes `coalloc
/// local-launcher` started were seen with `SIGCHLD` blocked (rustc 1.95), and a component's
/// `/bin/sh` whose `wait` sleeps in `sigsuspend` then never woke: mpi.rs's
/// `ranks_started_through_srun_speak_pmi_over_tcp`, a shell script as `srun`, hung).
fn sigchld_fd() -> io::Result<OwnedFd> {
    // SAFETY: plain signal-set calls on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// An empty signal mask for a child, undoing [`sigchld_fd`]'s block.
fn unblock_signals() -> io::Result<()> {
    // SAFETY: plain signal-set calls on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        if libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn drain(fd: &OwnedFd) {
    let mut buf = [0u8; 128 * 4];
    // SAFETY: reading into a local buffer of the given size.
    while unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
}

/// Leave the server's process group and session (its Ctrl-C is not ours), and let the
/// server's child return: the launcher goes on in a grandchild, which nobody waits for.
fn detach() -> io::Result<()> {
    // SAFETY: fork in a single-threaded process (the launcher has no other thread).
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        // SAFETY: the parent ends at once without running anything else.
        0 => {
            // SAFETY: setsid in the child, which leads no group.
            unsafe { libc::setsid() };
            Ok(())
        }
        _ => unsafe { libc::_exit(0) },
    }
}

impl Launcher {
    /// Take the waiting connections, greeting each: a server sends nothing before the
    /// greeting, so a connection made while the launcher was leaving fails before any
    /// request.
    fn accept(&mut self, listener: &UnixListener, conns: &mut Vec<Conn>) {
        while let Ok((mut stream, _)) = listener.accept() {
            let _ = stream.set_nonblocking(false);
            let Ok(reader) = stream.try_clone() else {
                continue;
            };
            if stream.write_all(GREETING.as_bytes()).is_ok() {
                self.last_conn += 1;
                self.open.insert(self.last_conn);
                conns.push(Conn {
                    reader: BufReader::new(reader),
                    writer: stream,
                    id: self.last_conn,
                });
            }
        }
    }

    /// Answer every whole request line of a connection; false once it closed.
    fn serve(&mut self, c: &mut Conn) -> bool {
        let mut line = String::new();
        match c.reader.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
        let answer = match serde_json::from_str::<Start>(&line) {
            Ok(s) => self.start(&s, c.id),
            Err(e) => Started {
                launch: 0,
                pgid: None,
                error: Some(format!("bad request: {e}")),
            },
        };
        let mut out = serde_json::to_vec(&answer).unwrap_or_default();
        out.push(b'\n');
        if c.writer.write_all(&out).is_err() {
            return false;
        }
        // A line already read into the buffer makes the socket look idle to poll.
        if c.reader.buffer().contains(&b'\n') {
            return self.serve(c);
        }
        true
    }

    /// Start launch `s` for connection `by`, unless it was started here already.
    fn start(&mut self, s: &Start, by: u64) -> Started {
        if let Some(known) = self.spawned.get(&s.launch) {
            if known.stdout != s.stdout {
                return Started {
                    launch: s.launch,
                    pgid: None,
                    error: Some(format!(
                        "launch {} was started here for another request (its output {})",
                        s.launch,
                        known.stdout.display()
                    )),
                };
            }
            eprintln!(
                "launcher: launch {} asked for again: started already, group {}",
                s.launch, known.pgid
            );
            return Started {
                launch: s.launch,
                pgid: Some(known.pgid),
                error: None,
            };
        }
        match self.spawn_all(s) {
            Ok(pgid) => {
                let stdout = s.stdout.clone();
                self.spawned.insert(s.launch, Spawned { pgid, by, stdout });
                Started {
                    launch: s.launch,
                    pgid: Some(pgid),
                    error: None,
                }
            }
            Err(e) => Started {
                launch: s.launch,
                pgid: None,
                error: Some(e.to_string()),
            },
        }
    }

    fn spawn_all(&mut self, s: &Start) -> io::Result<i32> {
        let stdout = open_append(&s.stdout)?;
        let stderr = open_append(&s.stderr)?;
        // A relative path with a slash is the working directory's, as under the wrapper.
        let program = if s.program.contains('/') && Path::new(&s.program).is_relative() {
            s.dir.join(&s.program).into_os_string()
        } else {
            s.program.clone().into()
        };
        let mut pgid = 0;
        for rank in 0..s.processes {
            if let Some(fast) = spawn_plain(&program, s, rank, (&stdout, &stderr), pgid) {
                match fast {
                    Ok(pid) => {
                        if rank == 0 {
                            pgid = pid;
                        }
                        self.children.insert(pid, (s.launch, rank));
                        continue;
                    }
                    Err(e) => {
                        if pgid != 0 {
                            self.voided.insert(s.launch);
                            // SAFETY: SIGKILL to the group we just made.
                            unsafe { libc::kill(-pgid, libc::SIGKILL) };
                        }
                        return Err(e);
                    }
                }
            }
            let mut command = Command::new(&program);
            if let Some((uid, gid)) = s.run_as {
                command.uid(uid).gid(gid);
            }
            command
                .args(&s.args)
                .envs(s.env.iter().map(|(k, v)| (k, v)))
                .env("COALLOC_LOCAL_RANK", rank.to_string())
                .env(
                    "COALLOC_RANK",
                    (s.rank_offset + u64::from(rank)).to_string(),
                )
                .current_dir(&s.dir)
                .stdin(Stdio::null())
                .stdout(stdout.try_clone()?)
                .stderr(stderr.try_clone()?)
                .process_group(pgid);
            // SAFETY: only sigprocmask(2), which is async-signal-safe, between fork and exec.
            let spawned = unsafe { command.pre_exec(unblock_signals) }.spawn();
            match spawned {
                Ok(child) => {
                    let pid = child.id() as i32;
                    if rank == 0 {
                        pgid = pid;
                    }
                    self.children.insert(pid, (s.launch, rank));
                }
                Err(e) => {
                    if pgid != 0 {
                        self.voided.insert(s.launch);
                        // SAFETY: SIGKILL to the group we just made.
                        unsafe { libc::kill(-pgid, libc::SIGKILL) };
                    }
                    return Err(e);
                }
            }
        }
        Ok(pgid)
    }

    /// Write the code of every ended child, then reap it.
    fn reap(&mut self) {
        loop {
            // SAFETY: waitid into a zeroed siginfo; WNOWAIT leaves the child a zombie, so
            // its group lives on until its line is written.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let r = unsafe {
                libc::waitid(
                    libc::P_ALL,
                    0,
                    &mut info,
                    libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                )
            };
            // SAFETY: si_pid and si_status are set by waitid for an exited child.
            let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
            if r != 0 || pid == 0 {
                return;
            }
            if let Some((launch, rank)) = self.children.remove(&pid) {
                if !self.voided.contains(&launch) {
                    let code = if info.si_code == libc::CLD_EXITED {
                        status.to_string()
                    } else {
                        format!("s{status}")
                    };
                    let line = format!("{launch} {rank} {code}\n");
                    if let Err(e) = self.exits.write_all(line.as_bytes()) {
                        eprintln!("launcher: cannot write the exit code of {launch}/{rank}: {e}");
                    }
                }
                if !self.children.values().any(|(l, _)| *l == launch) {
                    self.voided.remove(&launch);
                    // Its server has it on record unless it went away meanwhile.
                    if (self.spawned.get(&launch)).is_some_and(|s| self.open.contains(&s.by)) {
                        self.spawned.remove(&launch);
                    }
                }
            }
            // SAFETY: reaping the child waitid just reported.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        }
    }
}

/// Start one process of a launch with `posix_spawn(3)` (glibc: `clone(CLONE_VM |
/// CLONE_VFORK)`, no copy of the launcher's page tables, then exec), the child `Command`
/// gives: standard input `/dev/null`, the launch's output files, its working directory, its
/// process group (`pgid`, 0: a new one), an empty signal mask and `SIGPIPE` at its default.
/// `None` when `Command` is needed: another user to run as, a program found through the
/// `PATH`, or a `PATH` the launch sets.
fn spawn_plain(
    program: &std::ffi::OsStr,
    s: &Start,
    rank: u32,
    (stdout, stderr): (&File, &File),
    pgid: i32,
) -> Option<io::Result<i32>> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let bytes = program.as_bytes();
    if s.run_as.is_some() || !bytes.contains(&b'/') || s.env.iter().any(|(k, _)| k == "PATH") {
        return None;
    }
    let c = |b: &[u8]| {
        CString::new(b).map_err(|_| io::Error::new(ErrorKind::InvalidInput, "a NUL byte"))
    };
    // The launcher's environment, then the launch's, then the ranks: later ones win.
    let mut env: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = std::env::vars_os()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    let ranks = [
        ("COALLOC_LOCAL_RANK".to_string(), rank.to_string()),
        (
            "COALLOC_RANK".to_string(),
            (s.rank_offset + u64::from(rank)).to_string(),
        ),
    ];
    for (k, v) in s.env.iter().chain(&ranks) {
        env.insert(k.as_bytes().to_vec(), v.as_bytes().to_vec());
    }
    let made = (|| {
        let path = c(bytes)?;
        let dir = c(s.dir.as_os_str().as_bytes())?;
        let mut argv = vec![path.clone()];
        for a in &s.args {
            argv.push(c(a.as_bytes())?);
        }
        let mut envp = Vec::with_capacity(env.len());
        for (k, v) in &env {
            envp.push(c(&[k.as_slice(), b"=", v.as_slice()].concat())?);
        }
        Ok::<_, io::Error>((path, dir, argv, envp))
    })();
    let (path, dir, argv, envp) = match made {
        Ok(m) => m,
        Err(e) => return Some(Err(e)),
    };
    let mut argv_p: Vec<*mut libc::c_char> = argv.iter().map(|a| a.as_ptr().cast_mut()).collect();
    argv_p.push(std::ptr::null_mut());
    let mut envp_p: Vec<*mut libc::c_char> = envp.iter().map(|e| e.as_ptr().cast_mut()).collect();
    envp_p.push(std::ptr::null_mut());
    let null = c"/dev/null";
    let check = |rc: libc::c_int| match rc {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    };
    // SAFETY: the attributes and file actions are initialised before use and destroyed
    // after; every pointer handed over (paths, argv, envp, both NULL-terminated) outlives
    // the call; the descriptors are open files of ours.
    unsafe {
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        check(libc::posix_spawn_file_actions_init(&mut actions)).ok()?;
        if check(libc::posix_spawnattr_init(&mut attr)).is_err() {
            libc::posix_spawn_file_actions_destroy(&mut actions);
            return None;
        }
        let mut pid: libc::pid_t = 0;
        let spawned = (|| {
            check(libc::posix_spawn_file_actions_addopen(
                &mut actions,
                0,
                null.as_ptr(),
                libc::O_RDONLY,
                0,
            ))?;
            check(libc::posix_spawn_file_actions_adddup2(
                &mut actions,
                stdout.as_raw_fd(),
                1,
            ))?;
            check(libc::posix_spawn_file_actions_adddup2(
                &mut actions,
                stderr.as_raw_fd(),
                2,
            ))?;
            check(libc::posix_spawn_file_actions_addchdir_np(
                &mut actions,
                dir.as_ptr(),
            ))?;
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            let mut pipe: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut pipe);
            libc::sigaddset(&mut pipe, libc::SIGPIPE);
            check(libc::posix_spawnattr_setsigmask(&mut attr, &empty))?;
            check(libc::posix_spawnattr_setsigdefault(&mut attr, &pipe))?;
            check(libc::posix_spawnattr_setpgroup(&mut attr, pgid))?;
            let flags = libc::POSIX_SPAWN_SETPGROUP
                | libc::POSIX_SPAWN_SETSIGMASK
                | libc::POSIX_SPAWN_SETSIGDEF;
            check(libc::posix_spawnattr_setflags(
                &mut attr,
                flags as libc::c_short,
            ))?;
            check(libc::posix_spawn(
                &mut pid,
                path.as_ptr(),
                &actions,
                &attr,
                argv_p.as_ptr(),
                envp_p.as_ptr(),
            ))
        })();
        libc::posix_spawnattr_destroy(&mut attr);
        libc::posix_spawn_file_actions_destroy(&mut actions);
        Some(spawned.map(|()| pid))
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    OpenOptions::new().create(true).append(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(dir: &Path, launch: u64, out: &str) -> Start {
        Start {
            launch,
            processes: 1,
            rank_offset: 0,
            program: "/bin/sleep".into(),
            args: vec!["30".into()],
            env: Vec::new(),
            dir: dir.to_path_buf(),
            stdout: dir.join(out),
            stderr: dir.join(format!("{out}.err")),
            run_as: None,
        }
    }

    #[test]
    fn a_launch_is_started_once_and_its_number_is_not_taken_by_another_request() {
        let dir =
            std::env::temp_dir().join(format!("coalloc-launcher-once-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut l = Launcher {
            exits: open_append(&dir.join("exits")).unwrap(),
            children: HashMap::new(),
            voided: Default::default(),
            spawned: HashMap::new(),
            open: [1].into_iter().collect(),
            last_conn: 1,
        };
        let first = l.start(&request(&dir, 7, "7.out"), 1);
        let pgid = first.pgid.expect("started");
        assert_eq!(l.children.len(), 1);
        // Asked again (a server that came back): the same group, nothing more started.
        let again = l.start(&request(&dir, 7, "7.out"), 2);
        assert_eq!((again.pgid, again.error), (Some(pgid), None));
        assert_eq!(l.children.len(), 1);
        // The same number for another launch's output: refused.
        let other = l.start(&request(&dir, 7, "8.out"), 2);
        assert_eq!(other.pgid, None);
        assert!(other.error.unwrap().contains("another request"));
        assert_eq!(l.children.len(), 1);
        // SAFETY: SIGKILL to the group this test made, and reaping its one process (not
        // `reap`: its wait for any child would take other tests' children).
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
            libc::waitpid(pgid, std::ptr::null_mut(), 0);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
