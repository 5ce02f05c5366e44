//! HTTPS on the API (issue 32 item 4): whether a bound address gets TLS (`server.tls`:
//! beyond loopback by default; loopback is 127.0.0.0/8 and ::1, where the CLI and
//! components of the two-command setup talk plain HTTP as before), the certificate it
//! presents (the operator's PEM files, else a self-signed one made once in the state
//! directory's `api-tls/`, whose fingerprint `coalloc login` pins), and the listener that
//! hands axum finished TLS streams.

use crate::config::{ApiTls, TlsMode};
use crate::link::tls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;

/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// The API's TLS: its rustls configuration and the certificate's fingerprint
/// (`sha256:HEX`), which `server.json` and `coalloc serve`'s first lines show.
pub struct Identity {
    pub config: Arc<rustls::ServerConfig>,
    pub fingerprint: String,
}

/// Whether `addr` is served over TLS under `settings`; `Err` when the settings forbid
/// plain HTTP there and TLS too.
pub fn wanted(settings: &ApiTls, addr: &SocketAddr) -> Result<bool, String> {
    let loopback = addr.ip().is_loopback();
    match settings.mode {
        TlsMode::On => Ok(true),
        TlsMode::Auto => Ok(!loopback || settings.cert.is_some()),
        TlsMode::Off if loopback => Ok(false),
        TlsMode::Off => Err(format!(
            "server.tls = \"off\" with a bind beyond loopback ({addr}): bearer tokens would cross the network in clear; bind 127.0.0.1 or let the server serve HTTPS (tls = \"auto\")"
        )),
    }
}

/// The certificate and key: the operator's PEM files, else the generated pair in
/// `state/api-tls`.
pub fn identity(settings: &ApiTls, state: &Path) -> Result<Identity, String> {
    let (chain, key) = match &settings.cert {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("server.tls_cert {}: {e}", cert.display()))?;
            if chain.is_empty() {
                return Err(format!(
                    "server.tls_cert {}: no certificate",
                    cert.display()
                ));
            }
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("server.tls_key {}: {e}", key.display()))?;
            (chain, key)
        }
        None => {
            let dir = state.join("api-tls");
            let (cert, key) = tls::server_identity(&dir)
                .map_err(|e| format!("the API's certificate in {}: {e}", dir.display()))?;
            (vec![cert], key)
        }
    };
    let fingerprint = tls::fingerprint(&chain[0]);
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
    .map_err(|e| format!("the API's TLS: {e}"))?;
    Ok(Identity {
        config: Arc::new(config),
        fingerprint,
    })
}

/// A TCP listener whose connections come out TLS-wrapped. Handshakes run on tasks of their
/// own, so a slow client holds up nobody.
pub struct TlsListener {
    done: tokio::sync::mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
}

impl TlsListener {
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let (tx, done) = tokio::sync::mpsc::channel(64);
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = tokio::select! {
                    r = listener.accept() => match r {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::warn!("API accept: {e}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    },
                    _ = tx.closed() => return,
                };
                let (tx, acceptor) = (tx.clone(), acceptor.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await {
                        Ok(Ok(s)) => {
                            let _ = tx.send((s, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, "API TLS handshake: {e}"),
                        Err(_) => tracing::debug!(%peer, "API TLS handshake: too slow"),
                    }
                });
            }
        });
        Ok(TlsListener { done, addr })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.done.recv().await {
            Some(c) => c,
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(mode: TlsMode) -> ApiTls {
        ApiTls { mode, cert: None }
    }

    #[test]
    fn loopback_stays_plain_and_beyond_it_gets_tls() {
        let (lo, lo2, v6, any, lan) = (
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.2:1".parse().unwrap(),
            "[::1]:1".parse().unwrap(),
            "0.0.0.0:1".parse().unwrap(),
            "10.1.2.3:1".parse().unwrap(),
        );
        let auto = settings(TlsMode::Auto);
        let got: Vec<bool> = [lo, lo2, v6, any, lan]
            .iter()
            .map(|a| wanted(&auto, a).unwrap())
            .collect();
        assert_eq!(got, vec![false, false, false, true, true]);
        assert_eq!(wanted(&settings(TlsMode::On), &lo), Ok(true));
        assert_eq!(wanted(&settings(TlsMode::Off), &lo), Ok(false));
        let refused = wanted(&settings(TlsMode::Off), &any).unwrap_err();
        assert!(refused.contains("beyond loopback (0.0.0.0:1)"), "{refused}");
    }

    #[test]
    fn the_generated_certificate_is_kept() {
        let dir = crate::scratch::dir("api-tls");
        let first = identity(&settings(TlsMode::Auto), &dir)
            .unwrap()
            .fingerprint;
        let again = identity(&settings(TlsMode::Auto), &dir)
            .unwrap()
            .fingerprint;
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(first, again);
        assert!(
            first.starts_with("sha256:") && first.len() == 7 + 64,
            "{first}"
        );
    }
}
