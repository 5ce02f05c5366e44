//! HTTP over the server's Unix socket (issue 20 item 6): a ureq transport on a
//! `UnixStream`, so that a local user's requests reach the server with their uid for
//! credentials (`SO_PEERCRED`) and no token. Requests go to `http://localhost/...`; the
//! connector ignores the address and connects to the socket. [`StreamTransport`] carries
//! ureq's requests over any such blocking stream (the socket here, a pinned TLS connection
//! in [`crate::tls_http`]).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, Transport,
};

/// Connects every request to one Unix socket.
#[derive(Debug)]
pub struct UnixConnector(pub PathBuf);

impl Connector<()> for UnixConnector {
    type Out = StreamTransport<UnixStream>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        Ok(Some(StreamTransport::new(
            UnixStream::connect(&self.0)?,
            details,
        )))
    }
}

/// A blocking stream whose reads and writes can time out.
pub trait TimedStream: Read + Write + Send + Sync + std::fmt::Debug + 'static {
    /// Whether the stream is encrypted (ureq sends to `https://` only over such a one).
    const TLS: bool = false;

    fn set_timeouts(
        &self,
        read: Option<std::time::Duration>,
        write: Option<std::time::Duration>,
    ) -> std::io::Result<()>;
}

impl TimedStream for UnixStream {
    fn set_timeouts(
        &self,
        read: Option<std::time::Duration>,
        write: Option<std::time::Duration>,
    ) -> std::io::Result<()> {
        self.set_read_timeout(read)?;
        self.set_write_timeout(write)
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

/// An agent whose every request goes to the socket at `path`.
pub fn agent(path: PathBuf, config: ureq::config::Config) -> ureq::Agent {
    ureq::Agent::with_parts(
        config,
        UnixConnector(path),
        ureq::unversioned::resolver::DefaultResolver::default(),
    )
}
