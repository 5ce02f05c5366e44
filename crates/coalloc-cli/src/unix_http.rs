//! HTTP over the server's Unix socket (issue 20 item 6): a ureq transport on a
//! `UnixStream`, so that a local user's requests reach the server with their uid for
//! credentials (`SO_PEERCRED`) and no token. Requests go to `http://localhost/...`; the
//! connector ignores the address and connects to the socket (`coalloc_pin`'s
//! `StreamTransport` carries the requests, as it does over a pinned TLS connection).

use coalloc_pin::blocking::StreamTransport;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use ureq::unversioned::transport::{ConnectionDetails, Connector};

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

/// An agent whose every request goes to the socket at `path`.
pub fn agent(path: PathBuf, config: ureq::config::Config) -> ureq::Agent {
    ureq::Agent::with_parts(
        config,
        UnixConnector(path),
        ureq::unversioned::resolver::DefaultResolver::default(),
    )
}
