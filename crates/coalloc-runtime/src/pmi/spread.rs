//! An `mpi` component's ranks over every node of its Slurm allocation (seed 002 §3.3: the
//! subjob's processes are the allocation's). A component whose allocation spans several
//! nodes (`SLURM_JOB_NUM_NODES` > 1 in the proxy's environment, which runs on the first of
//! them) starts its ranks with one job step,
//!
//! ```text
//! srun --overlap --input=none --kill-on-bad-exit=1 -m block -N NODES -n COUNT \
//!     /bin/sh -c WRAP PROGRAM ARGS
//! ```
//!
//! where `WRAP` gives task `SLURM_PROCID` = `i` its `PMI_ID` `i` and its job-wide rank
//! (`COALLOC_RANK_OFFSET` + `i`) and execs the program. Slurm places the tasks over the
//! allocation's nodes, consecutive ranks together (`-m block`: an `srun` inside a one-task
//! step would otherwise inherit its cyclic distribution). `--overlap` lets the step share
//! the CPUs the proxy's own step holds in allocation mode.
//!
//! A rank on another node cannot inherit a socket pair, so PMI goes over TCP, as MPICH's
//! simple PMI does when `PMI_PORT=HOST:PORT` is set (MPICH src/pmi/simple/simple_pmi.c,
//! `getPMIFD` and `PMII_Set_from_port`; `PMI_ID` set, it handshakes):
//! the rank connects, sends `cmd=initack pmiid=ID`, and reads `cmd=initack`, then `cmd=set
//! size=N`, `cmd=set rank=R`, `cmd=set debug=0`; the rest of the conversation is the same
//! PMI-1 as over `PMI_FD`. The handshake is the connection's identity, so it is handled
//! here, beside the socket, not in the session.
//!
//! The step's end is every rank's end (its exit code: the first failing task's, and
//! `--kill-on-bad-exit` ends the others when one fails). The listening port takes the
//! first connection of each `PMI_ID` and closes once every rank has connected.
//! `COALLOC_PMI_SPREAD=0` in the component's environment keeps every rank on the first node
//! (the proxy's own), `COALLOC_PMI_HOST` names the address the other nodes reach this one
//! at (default: the host name), `COALLOC_SRUN` the `srun` to use (default: `srun` on `PATH`).

use super::proxy::{ended, exited, read_lines, Msg, Ranks};
use super::wire::{Answer, MAX_LINE};
use crate::Config;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc::Sender;
use std::time::Duration;

/// The task's wrapper: its `PMI_ID` and ranks from Slurm's task number, then the program.
const WRAP: &str = concat!(
    "i=${SLURM_PROCID:?}; r=$((COALLOC_RANK_OFFSET + i)); ",
    "export PMI_ID=$i PMI_RANK=$r COALLOC_LOCAL_RANK=$i COALLOC_RANK=$r; ",
    r#"exec "$0" "$@""#
);

/// The nodes to spread the ranks over, when the proxy runs inside a Slurm allocation of
/// several nodes and has more than one rank to start (at most one node per rank).
pub(super) fn nodes(cfg: &Config) -> Option<u32> {
    nodes_from(cfg.processes, |v| std::env::var(v).ok())
}

fn nodes_from(processes: u32, var: impl Fn(&str) -> Option<String>) -> Option<u32> {
    if var("COALLOC_PMI_SPREAD").is_some_and(|v| v.trim() == "0") {
        return None;
    }
    var("SLURM_JOB_ID")?;
    let nodes: u32 = var("SLURM_JOB_NUM_NODES")?.trim().parse().ok()?;
    (nodes > 1 && processes > 1).then(|| nodes.min(processes))
}

/// Start the component's ranks over `nodes` nodes: a listening port, then the step. A
/// failure to do either is every rank's failure to start.
pub(super) fn start(
    cfg: &Config,
    program: &str,
    args: &[String],
    nodes: u32,
    tx: &Sender<Msg>,
    ranks: &mut Ranks,
) {
    let n = cfg.processes;
    let fail_all = |detail: String| {
        for local in 0..n {
            exited(tx, local, None, detail.clone());
        }
    };
    let listener = match TcpListener::bind(("0.0.0.0", 0)) {
        Ok(l) => l,
        Err(e) => return fail_all(format!("could not be started (PMI port: {e})")),
    };
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => return fail_all(format!("could not be started (PMI port: {e})")),
    };
    let host = std::env::var("COALLOC_PMI_HOST")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(host_name);
    let (offset, total) = (cfg.rank_offset, cfg.total);
    let tx_accept = tx.clone();
    std::thread::spawn(move || accept(listener, n, offset, total, &tx_accept));
    let srun = std::env::var("COALLOC_SRUN").unwrap_or_else(|_| "srun".into());
    let mut cmd = Command::new(&srun);
    cmd.args([
        "--overlap",
        "--input=none",
        "--kill-on-bad-exit=1",
        "-m",
        "block",
    ])
    .args(["-N", &nodes.to_string(), "-n", &n.to_string()])
    .args(["/bin/sh", "-c", WRAP, program])
    .args(args)
    .stdin(Stdio::null())
    .env_remove("PMI_FD")
    .env("PMI_PORT", format!("{host}:{port}"))
    .env("PMI_SIZE", total.to_string())
    .env("COALLOC_RANK_OFFSET", offset.to_string());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return fail_all(format!("could not be started ({srun}: {e})")),
    };
    ranks.kill.push((child.id(), libc::SIGTERM));
    let tx = tx.clone();
    std::thread::spawn(move || {
        let (code, how) = ended(child.wait());
        for local in 0..n {
            let detail = format!("ended with its srun step, which {how}");
            exited(&tx, local, code, detail);
        }
    });
}

/// This host's name, which the other nodes of the allocation resolve.
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname(2) writes at most `len` bytes into the buffer we own.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    match (rc, std::str::from_utf8(&buf[..end])) {
        (0, Ok(h)) if !h.is_empty() => h.to_owned(),
        _ => "127.0.0.1".into(),
    }
}

/// Take the ranks' connections until each of the `n` ids has one, then close the port.
/// The handshake is read here, one connection at a time (a rank sends it as soon as it
/// connects; a connection silent for [`HANDSHAKE_WAIT`] is dropped).
fn accept(listener: TcpListener, n: u32, offset: u64, total: u64, tx: &Sender<Msg>) {
    let mut claimed = BTreeSet::new();
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        match handshake(stream, n, offset, total, &claimed) {
            Ok((local, reader, writer)) => {
                claimed.insert(local);
                if tx.send(Msg::Connected { local, writer }).is_err() {
                    return;
                }
                let tx = tx.clone();
                std::thread::spawn(move || read_lines(reader, local, &tx));
            }
            Err(why) => eprintln!("coalloc pmi-proxy: a PMI connection was refused: {why}"),
        }
        if claimed.len() as u32 >= n {
            return;
        }
    }
}

/// How long a new connection may take to send its `cmd=initack`.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(10);

type Connection = (u32, BufReader<TcpStream>, Box<dyn Write + Send>);

/// One rank's handshake: its local rank, and its connection to read and to write.
fn handshake(
    stream: TcpStream,
    n: u32,
    offset: u64,
    total: u64,
    claimed: &BTreeSet<u32>,
) -> Result<Connection, String> {
    let _ = stream.set_nodelay(true);
    stream
        .set_read_timeout(Some(HANDSHAKE_WAIT))
        .map_err(|e| e.to_string())?;
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let mut first = Vec::new();
    (&mut reader)
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut first)
        .map_err(|e| e.to_string())?;
    let line = String::from_utf8_lossy(&first);
    let local = initack(line.trim_end(), n)?;
    if claimed.contains(&local) {
        return Err(format!("PMI_ID {local} is connected already"));
    }
    let rank = offset + u64::from(local);
    let hello = [
        Answer::new("initack"),
        Answer::new("set").with("size", total),
        Answer::new("set").with("rank", rank),
        Answer::new("set").with("debug", 0),
    ];
    let text: String = hello.iter().map(Answer::to_string).collect();
    writer
        .write_all(text.as_bytes())
        .map_err(|e| e.to_string())?;
    reader
        .get_ref()
        .set_read_timeout(None)
        .map_err(|e| e.to_string())?;
    Ok((local, reader, Box::new(writer)))
}

/// The local rank a connection's first line, `cmd=initack pmiid=ID`, names.
fn initack(line: &str, n: u32) -> Result<u32, String> {
    let shown: String = line.chars().take(120).collect();
    let mut words = line.split(' ').filter(|w| !w.is_empty());
    if words.next() != Some("cmd=initack") {
        return Err(format!("`{shown}` is not cmd=initack"));
    }
    let id = words
        .find_map(|w| w.strip_prefix("pmiid="))
        .ok_or_else(|| format!("`{shown}` has no pmiid"))?;
    match id.parse::<u32>() {
        Ok(id) if id < n => Ok(id),
        _ => Err(format!("pmiid `{id}` is not one of 0..{n}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmi::session::Input;
    use std::collections::HashMap;

    #[test]
    fn spreads_only_over_a_multi_node_allocation() {
        let env = |pairs: &[(&str, &str)]| {
            let m: HashMap<String, String> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            move |k: &str| m.get(k).cloned()
        };
        let two = [("SLURM_JOB_ID", "7"), ("SLURM_JOB_NUM_NODES", "2")];
        assert_eq!(nodes_from(4, env(&two)), Some(2));
        // One rank needs one node; three nodes for two ranks: two.
        assert_eq!(nodes_from(1, env(&two)), None);
        let three = [("SLURM_JOB_ID", "7"), ("SLURM_JOB_NUM_NODES", "3")];
        assert_eq!(nodes_from(2, env(&three)), Some(2));
        assert_eq!(nodes_from(4, env(&[("SLURM_JOB_NUM_NODES", "2")])), None);
        let one = [("SLURM_JOB_ID", "7"), ("SLURM_JOB_NUM_NODES", "1")];
        assert_eq!(nodes_from(4, env(&one)), None);
        let off = [
            ("SLURM_JOB_ID", "7"),
            ("SLURM_JOB_NUM_NODES", "2"),
            ("COALLOC_PMI_SPREAD", "0"),
        ];
        assert_eq!(nodes_from(4, env(&off)), None);
    }

    #[test]
    fn the_first_line_names_the_rank() {
        assert_eq!(initack("cmd=initack pmiid=3", 4), Ok(3));
        assert!(initack("cmd=initack pmiid=4", 4).is_err());
        assert!(initack("cmd=initack pmiid=x", 4).is_err());
        assert!(initack("cmd=initack", 4).is_err());
        assert!(initack("cmd=init pmi_version=1 pmi_subversion=1", 4).is_err());
    }

    /// The wrapper gives each task its ids and runs the program with its arguments.
    #[test]
    fn the_wrapper_sets_the_ids_from_the_task_number() {
        let out = Command::new("/bin/sh")
            .args(["-c", WRAP, "/bin/sh", "-c"])
            .arg(r#"echo "$PMI_ID $PMI_RANK $COALLOC_LOCAL_RANK $COALLOC_RANK $1""#)
            .args(["inner", "x y"])
            .env("SLURM_PROCID", "2")
            .env("COALLOC_RANK_OFFSET", "5")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "2 7 2 7 x y\n");
    }

    /// MPICH's side of the handshake (simple_pmi.c), then a request of the ordinary protocol.
    #[test]
    fn a_rank_connects_with_mpichs_handshake() {
        let (tx, rx) = std::sync::mpsc::channel();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || accept(listener, 2, 10, 12, &tx));
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"cmd=initack pmiid=1\ncmd=get_maxes\n")
            .unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut got = Vec::new();
        for _ in 0..4 {
            let mut l = String::new();
            r.read_line(&mut l).unwrap();
            got.push(l);
        }
        assert_eq!(
            got,
            [
                "cmd=initack\n",
                "cmd=set size=12\n",
                "cmd=set rank=11\n",
                "cmd=set debug=0\n"
            ]
        );
        let Ok(Msg::Connected { local: 1, .. }) = rx.recv() else {
            panic!("not connected as local rank 1")
        };
        let Ok(Msg::In(Input::Line { local: 1, line })) = rx.recv() else {
            panic!("no line")
        };
        assert_eq!(line, "cmd=get_maxes");
        // A second connection with the same id is refused (closed).
        let mut again = TcpStream::connect(addr).unwrap();
        again.write_all(b"cmd=initack pmiid=1\n").unwrap();
        let mut buf = String::new();
        assert_eq!(BufReader::new(again).read_line(&mut buf).unwrap(), 0);
    }
}
