//! HTTPS to the server (issue 32 item 4): a ureq connector that speaks TLS with rustls and
//! trusts exactly one certificate, the one whose SHA-256 fingerprint the user pinned
//! (`coalloc login`, `COALLOC_FINGERPRINT`, or the state directory's `server.json` on the
//! server's own host), as agents pin theirs (`coalloc_server::link::tls`). No CA is
//! involved. The pins `coalloc login` stores live in `DIR/known-servers.json`, one
//! fingerprint per URL.

use crate::error::CliError;
use crate::unix_http::{StreamTransport, TimedStream};
use coalloc_server::link::tls;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use std::collections::BTreeMap;
use std::net::{IpAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use ureq::unversioned::transport::{ConnectionDetails, Connector};

const CONNECT: Duration = Duration::from_secs(10);

impl TimedStream for StreamOwned<ClientConnection, TcpStream> {
    const TLS: bool = true;

    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> std::io::Result<()> {
        self.sock.set_read_timeout(read)?;
        self.sock.set_write_timeout(write)
    }
}

/// Connects every request over TLS to a server whose certificate has the pinned fingerprint.
#[derive(Debug)]
pub struct PinnedConnector(Arc<ClientConfig>);

/// A TCP connection to `addrs` with the TLS handshake done (a certificate other than the
/// pinned one fails here, before a byte of the request is sent).
fn handshake(
    addrs: &[std::net::SocketAddr],
    config: Arc<ClientConfig>,
) -> std::io::Result<StreamOwned<ClientConnection, TcpStream>> {
    let mut last = std::io::Error::other("no address");
    for addr in addrs {
        match TcpStream::connect_timeout(addr, CONNECT) {
            Ok(tcp) => {
                let _ = tcp.set_nodelay(true);
                tcp.set_read_timeout(Some(CONNECT))?;
                tcp.set_write_timeout(Some(CONNECT))?;
                let name = ServerName::try_from(tls::SERVER_NAME).map_err(std::io::Error::other)?;
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

impl Connector<()> for PinnedConnector {
    type Out = StreamTransport<StreamOwned<ClientConnection, TcpStream>>;

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
pub fn agent(fingerprint: &str, config: ureq::config::Config) -> Result<ureq::Agent, CliError> {
    let tls =
        tls::agent_config(fingerprint).map_err(|e| CliError::Internal(format!("TLS: {e}")))?;
    Ok(ureq::Agent::with_parts(
        config,
        PinnedConnector(tls),
        ureq::unversioned::resolver::DefaultResolver::default(),
    ))
}

/// What a failed request says, with what to do when the pin refused the certificate.
pub fn explain(url: &str, e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    if text.contains("certificate fingerprint mismatch") {
        format!(
            "refusing the server at {url}: its TLS certificate is not the pinned one ({text}); if its operator replaced the certificate, check the new fingerprint with them and run `coalloc login {url}` again"
        )
    } else {
        format!("cannot reach the server at {url}: {text}")
    }
}

/// `sha256:` and lower-case hex, from a fingerprint as people write it (with or without
/// the prefix, colons, any case).
pub fn normalize(given: &str) -> Result<String, CliError> {
    let hex: String = given
        .trim()
        .trim_start_matches("sha256:")
        .chars()
        .filter(|c| *c != ':')
        .collect::<String>()
        .to_ascii_lowercase();
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(CliError::bad(format!(
            "`{given}` is not a SHA-256 fingerprint (64 hex digits, optionally after sha256:)"
        )));
    }
    Ok(format!("sha256:{hex}"))
}

/// The fingerprint of the certificate the server at `url` (`https://HOST:PORT`) presents,
/// trusted or not; no request is sent.
pub fn peek(url: &str) -> Result<String, CliError> {
    let authority = url
        .strip_prefix("https://")
        .ok_or_else(|| CliError::bad(format!("`{url}` is not an https:// URL")))?
        .split('/')
        .next()
        .unwrap_or_default();
    let addrs: Vec<_> = authority
        .to_socket_addrs()
        .map_err(|e| CliError::bad(format!("{url}: {e}")))?
        .collect();
    let (config, seen) = tls::peek_config().map_err(|e| CliError::Internal(format!("TLS: {e}")))?;
    let s = handshake(&addrs, config).map_err(|e| CliError::bad(explain(url, &e)))?;
    drop(s);
    let seen = seen.lock().ok().and_then(|s| s.clone());
    seen.ok_or_else(|| CliError::Internal(format!("{url}: the server presented no certificate")))
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

/// The pins `coalloc login` stored: URL to fingerprint.
pub fn known(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(dir.join("known-servers.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Store `fingerprint` as the pin of `url`.
pub fn remember(dir: &Path, url: &str, fingerprint: &str) -> Result<(), CliError> {
    let mut pins = known(dir);
    pins.insert(url.to_string(), fingerprint.to_string());
    let path = dir.join("known-servers.json");
    let text = serde_json::to_string_pretty(&pins).unwrap_or_default();
    std::fs::create_dir_all(dir)
        .and_then(|_| std::fs::write(&path, format!("{text}\n")))
        .map_err(|e| CliError::bad(format!("{}: {e}", path.display())))
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

    #[test]
    fn fingerprints_are_normalized() {
        let hex = "AB".repeat(32);
        let want = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(normalize(&hex).unwrap(), want);
        assert_eq!(normalize(&format!("sha256:{hex}")).unwrap(), want);
        let colons = hex
            .as_bytes()
            .chunks(2)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect::<Vec<_>>()
            .join(":");
        assert_eq!(normalize(&colons).unwrap(), want);
        assert!(normalize("abc").is_err());
    }
}
