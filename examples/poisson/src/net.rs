//! The TCP links between neighbouring strips (seed 003 §6.1: "every process communicates with
//! its neighbours to exchange the values of grid points on the borders of their rectangles and
//! to compute a global error"), found through the job's rendezvous store (seed 002 §3.3).
//!
//! The components form a chain 0 – 1 – … – C−1: component i connects to i+1's listener and
//! accepts i−1's connection, so there are no other sockets. Each link writes from its own
//! thread (a queue of messages), so both ends may send before they read, whatever the size of a
//! column, without deadlock. Messages are little-endian: a hello (`PSN1`, sender's index, n,
//! max-iter, check-every, tol), columns of n f64, single f64 values and one-byte flags.

use crate::args::Options;
use crate::PoissonError;
use coalloc_runtime::{kv_get, kv_put, Config};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{channel, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long set-up waits for a neighbour (its address, its connection), and a read for data.
const PATIENCE: Duration = Duration::from_secs(300);

/// One end of a connection to a neighbour.
struct Link {
    peer: usize,
    read: TcpStream,
    queue: Option<Sender<Vec<u8>>>,
    writer: Option<JoinHandle<std::io::Result<()>>>,
}

impl Link {
    fn new(stream: TcpStream, peer: usize) -> Result<Link, PoissonError> {
        let io = |e| PoissonError::Net(format!("link to component {peer}"), e);
        stream.set_nonblocking(false).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(Some(PATIENCE)).map_err(io)?;
        let mut out = stream.try_clone().map_err(io)?;
        let (tx, rx) = channel::<Vec<u8>>();
        let writer = std::thread::spawn(move || {
            for msg in rx {
                out.write_all(&msg)?;
            }
            out.flush()
        });
        Ok(Link {
            peer,
            read: stream,
            queue: Some(tx),
            writer: Some(writer),
        })
    }

    fn send(&self, msg: Vec<u8>) -> Result<(), PoissonError> {
        let lost = || PoissonError::Protocol(format!("the link to component {} broke", self.peer));
        self.queue
            .as_ref()
            .ok_or_else(lost)?
            .send(msg)
            .map_err(|_| lost())
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<(), PoissonError> {
        let peer = self.peer;
        self.read
            .read_exact(buf)
            .map_err(|e| PoissonError::Net(format!("reading from component {peer}"), e))
    }

    fn recv_f64(&mut self) -> Result<f64, PoissonError> {
        let mut b = [0u8; 8];
        self.recv(&mut b)?;
        Ok(f64::from_le_bytes(b))
    }

    /// Wait until everything queued was written, then close.
    fn close(mut self) -> Result<(), PoissonError> {
        self.queue = None;
        let done = self.writer.take().map(JoinHandle::join);
        let _ = self.read.shutdown(Shutdown::Write);
        match done {
            Some(Ok(Err(e))) => Err(PoissonError::Net(format!("writing to {}", self.peer), e)),
            Some(Err(_)) => Err(PoissonError::Protocol("a writer thread failed".into())),
            _ => Ok(()),
        }
    }
}

/// This strip's links: none when it runs alone.
#[derive(Default)]
pub struct Neighbours {
    left: Option<Link>,
    right: Option<Link>,
    column: Vec<u8>,
}

fn key(component: usize) -> String {
    format!("poisson/addr/{component}")
}

fn hello(me: usize, o: &Options) -> Vec<u8> {
    let mut m = b"PSN1".to_vec();
    for v in [
        me as u64,
        o.n as u64,
        o.max_iter,
        o.check_every,
        o.tol.to_bits(),
    ] {
        m.extend_from_slice(&v.to_le_bytes());
    }
    m
}

impl Neighbours {
    /// Listen, publish `host:port` under `poisson/addr/{i}` (host: `COALLOC_POISSON_HOST`, else
    /// 127.0.0.1), connect to the right neighbour, accept the left one, and check that both
    /// run with the same options.
    pub fn connect(cfg: &Config, o: &Options) -> Result<Neighbours, PoissonError> {
        let me = cfg.component;
        let io = |what: &str| {
            let what = what.to_owned();
            move |e| PoissonError::Net(what, e)
        };
        let listener = TcpListener::bind(("0.0.0.0", 0)).map_err(io("listening"))?;
        let port = listener.local_addr().map_err(io("listening"))?.port();
        let host = std::env::var("COALLOC_POISSON_HOST").unwrap_or_else(|_| "127.0.0.1".into());
        kv_put(cfg, &key(me), format!("{host}:{port}").as_bytes())?;
        let mut n = Neighbours::default();
        if me + 1 < cfg.components {
            n.right = Some(Link::new(dial(cfg, me + 1)?, me + 1)?);
        }
        if me > 0 {
            n.left = Some(Link::new(accept(&listener, me - 1)?, me - 1)?);
        }
        let mine = hello(me, o);
        for link in [&n.left, &n.right].into_iter().flatten() {
            link.send(mine.clone())?;
        }
        for link in [&mut n.left, &mut n.right].into_iter().flatten() {
            let mut theirs = vec![0u8; mine.len()];
            link.recv(&mut theirs)?;
            if theirs != hello(link.peer, o) {
                return Err(PoissonError::Protocol(format!(
                    "the peer expected as component {} is another one, or runs with other \
                     --n, --tol, --max-iter or --check-every",
                    link.peer
                )));
            }
        }
        Ok(n)
    }

    /// Send this strip's edge columns and receive the neighbours' into the halos.
    pub fn exchange(&mut self, strip: &mut crate::grid::Strip) -> Result<(), PoissonError> {
        for (left, link) in [(true, &self.left), (false, &self.right)] {
            if let Some(l) = link {
                l.send(
                    strip
                        .edge(left)
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect(),
                )?;
            }
        }
        for (left, link) in [(true, &mut self.left), (false, &mut self.right)] {
            if let Some(l) = link {
                self.column.resize(strip.edge(left).len() * 8, 0);
                l.recv(&mut self.column)?;
                let values: Vec<f64> = self
                    .column
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect();
                strip.set_halo(left, &values);
            }
        }
        Ok(())
    }

    /// The maximum of every strip's `local`, known at component 0 only (`None` elsewhere):
    /// values flow leftwards along the chain, each component folding in its own.
    pub fn reduce_max(&mut self, local: f64) -> Result<Option<f64>, PoissonError> {
        let mut m = local;
        if let Some(r) = &mut self.right {
            let v = r.recv_f64()?;
            m = if v.is_nan() || m.is_nan() {
                f64::NAN
            } else {
                m.max(v)
            };
        }
        match &self.left {
            Some(l) => l.send(m.to_le_bytes().to_vec()).map(|_| None),
            None => Ok(Some(m)),
        }
    }

    /// Component 0's decision (`flag`, ignored elsewhere), passed rightwards to all.
    pub fn broadcast(&mut self, flag: bool) -> Result<bool, PoissonError> {
        let mut f = flag;
        if let Some(l) = &mut self.left {
            let mut b = [0u8];
            l.recv(&mut b)?;
            f = b[0] == 1;
        }
        if let Some(r) = &self.right {
            r.send(vec![u8::from(f)])?;
        }
        Ok(f)
    }

    /// Flush and close the links.
    pub fn close(self) -> Result<(), PoissonError> {
        for link in [self.left, self.right].into_iter().flatten() {
            link.close()?;
        }
        Ok(())
    }
}

/// Find component `peer`'s address in the store and connect to it. A refused connection
/// reads the address again before the next try: a value left by an earlier run of the job is
/// replaced once the peer publishes its current one. Gives up a minute after the first address.
fn dial(cfg: &Config, peer: usize) -> Result<TcpStream, PoissonError> {
    let mut wait = PATIENCE;
    let mut first_found: Option<Instant> = None;
    loop {
        let found = kv_get(cfg, &key(peer), wait)?.ok_or_else(|| {
            PoissonError::Protocol(format!("component {peer} never published its address"))
        })?;
        let addr = String::from_utf8_lossy(&found).into_owned();
        let since = *first_found.get_or_insert_with(Instant::now);
        match connect(&addr) {
            Ok(s) => return Ok(s),
            Err(e) if since.elapsed() > Duration::from_secs(60) => {
                let what = format!("connecting to component {peer} at {addr}");
                return Err(PoissonError::Net(what, e));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
        wait = Duration::ZERO;
    }
}

fn connect(addr: &str) -> std::io::Result<TcpStream> {
    let target = addr.to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the name has no address")
    })?;
    TcpStream::connect_timeout(&target, Duration::from_secs(10))
}

/// Accept one connection, giving up after [`PATIENCE`].
fn accept(listener: &TcpListener, peer: usize) -> Result<TcpStream, PoissonError> {
    let what = || format!("waiting for component {peer} to connect");
    listener
        .set_nonblocking(true)
        .map_err(|e| PoissonError::Net(what(), e))?;
    let start = Instant::now();
    loop {
        match listener.accept() {
            Ok((s, _)) => return Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if start.elapsed() > PATIENCE {
                    return Err(PoissonError::Net(what(), e));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(PoissonError::Net(what(), e)),
        }
    }
}
