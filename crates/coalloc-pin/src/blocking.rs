//! Blocking HTTPS to a pinned server: ureq's requests over a TCP connection whose TLS
//! handshake (rustls, no async runtime) accepted only the pinned certificate. The CLI's
//! remote commands and a component's runtime (`coalloc-barrier`, the rendezvous store) both
//! make their agents here. [`StreamTransport`] carries ureq's requests over any blocking
//! stream (a pinned TLS connection here, the server's Unix socket in the CLI).

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, Transport,
};

/// Longest a TCP connect or a TLS handshake may take.
const CONNECT: Duration = Duration::from_secs(10);

/// A pinned TLS connection.
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// A blocking stream whose reads and writes can time out.
pub trait TimedStream: Read + Write + Send + Sync + std::fmt::Debug + 'static {
    /// Whether the stream is encrypted (ureq sends to `https://` only over such a one).
    const TLS: bool = false;

    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> std::io::Result<()>;
}

impl TimedStream for UnixStream {
    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> std::io::Result<()> {
        self.set_read_timeout(read)?;
        self.set_write_timeout(write)
    }
}

impl TimedStream for TlsStream {
    const TLS: bool = true;

    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> std::io::Result<()> {
        self.sock.set_read_timeout(read)?;
        self.sock.set_write_timeout(write)
    }
}

/// One connection: ureq's requests over a blocking stream.
#[derive(Debug)]
pub struct StreamTransport<S> {
    stream: S,
    buffers: LazyBuffers,
}

impl<S> StreamTransport<S> {
    pub fn new(stream: S, details: &ConnectionDetails) -> Self {
        let c = details.config;
        StreamTransport {
            stream,
            buffers: LazyBuffers::new(c.input_buffer_size(), c.output_buffer_size()),
        }
    }
}

fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}

impl<S: TimedStream> Transport for StreamTransport<S> {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let t = timeout.for_write();
        self.stream.set_timeouts(None, t.not_zero().map(|d| *d))?;
        let output = &self.buffers.output()[..amount];
        match self
            .stream
            .write_all(output)
            .and_then(|_| self.stream.flush())
        {
            Err(e) if timed_out(&e) => Err(ureq::Error::Timeout(t.reason)),
            r => Ok(r?),
        }
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let t = timeout.for_read();
        self.stream.set_timeouts(t.not_zero().map(|d| *d), None)?;
        let input = self.buffers.input_append_buf();
        let n = loop {
            match self.stream.read(input) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if timed_out(&e) => return Err(ureq::Error::Timeout(t.reason)),
                r => break r?,
            }
        };
        self.buffers.input_appended(n);
        Ok(n > 0)
    }

    fn is_tls(&self) -> bool {
        S::TLS
    }

    fn is_open(&mut self) -> bool {
        // A connection is not kept for a next request.
        false
    }
}

/// A TCP connection to the first of `addrs` that answers, with the TLS handshake done under
/// `config` (a certificate other than the pinned one fails here, before a byte of a request
/// is sent).
pub fn handshake(addrs: &[SocketAddr], config: Arc<ClientConfig>) -> std::io::Result<TlsStream> {
    let mut last = std::io::Error::other("no address");
    for addr in addrs {
        match TcpStream::connect_timeout(addr, CONNECT) {
            Ok(tcp) => {
                let _ = tcp.set_nodelay(true);
                tcp.set_read_timeout(Some(CONNECT))?;
                tcp.set_write_timeout(Some(CONNECT))?;
                let name =
                    ServerName::try_from(crate::SERVER_NAME).map_err(std::io::Error::other)?;
                let conn = ClientConnection::new(config, name).map_err(std::io::Error::other)?;
                let mut s = StreamOwned::new(conn, tcp);
                while s.conn.is_handshaking() {
                    s.conn.complete_io(&mut s.sock)?;
                }
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Connects every request over TLS to a server whose certificate has the pinned fingerprint.
#[derive(Debug)]
pub struct PinnedConnector(pub Arc<ClientConfig>);

impl Connector<()> for PinnedConnector {
    type Out = StreamTransport<TlsStream>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let addrs: Vec<_> = details.addrs.iter().copied().collect();
        let s = handshake(&addrs, self.0.clone())?;
        Ok(Some(StreamTransport::new(s, details)))
    }
}

/// An agent whose every request goes over TLS to the certificate `fingerprint`.
pub fn agent(
    fingerprint: &str,
    config: ureq::config::Config,
) -> Result<ureq::Agent, rustls::Error> {
    Ok(ureq::Agent::with_parts(
        config,
        PinnedConnector(crate::client_config(fingerprint)?),
        ureq::unversioned::resolver::DefaultResolver::default(),
    ))
}

/// Whether a URL's host is this machine's loopback (127.0.0.0/8, ::1, `localhost`), where a
/// token may go in clear.
pub fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_127_slash_8_and_v6_one() {
        let got: Vec<bool> = [
            "http://127.0.0.1:80",
            "http://127.3.4.5:1/x",
            "http://[::1]:8",
            "http://localhost:9",
            "http://0.0.0.0:9",
            "http://10.0.0.1:9",
            "http://server.example.org:9",
        ]
        .iter()
        .map(|u| is_loopback(u))
        .collect();
        assert_eq!(got, vec![true, true, true, true, false, false, false]);
    }
}
