//! TLS of the agent link: the server's self-signed certificate (made once, kept in the state
//! directory, so its fingerprint outlives restarts) and the server's rustls configuration.
//! The agent's side, which trusts exactly one certificate (the one whose SHA-256 fingerprint
//! its enrolment token carries), is `coalloc_pin`'s, shared with every other client.

pub use coalloc_pin::client_config as agent_config;
pub use coalloc_pin::{fingerprint, is_pin_mismatch, peek_config, provider, Seen, SERVER_NAME};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

/// The server's certificate and key in `dir` (`cert.der`, `key.der`, the key mode 0600),
/// made on first use.
pub fn server_identity(
    dir: &Path,
) -> std::io::Result<(CertificateDer<'static>, PrivateKeyDer<'static>)> {
    let (cert_path, key_path) = (dir.join("cert.der"), dir.join("key.der"));
    if let (Ok(c), Ok(k)) = (std::fs::read(&cert_path), std::fs::read(&key_path)) {
        let key = PrivateKeyDer::try_from(k).map_err(std::io::Error::other)?;
        return Ok((CertificateDer::from(c), key));
    }
    std::fs::create_dir_all(dir)?;
    let made = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()])
        .map_err(std::io::Error::other)?;
    let (cert, key) = (made.cert.der().to_vec(), made.signing_key.serialize_der());
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&key_path)?;
    f.write_all(&key)?;
    std::fs::write(&cert_path, &cert)?;
    let key = PrivateKeyDer::try_from(key).map_err(std::io::Error::other)?;
    Ok((CertificateDer::from(cert), key))
}

/// The server side's TLS configuration.
pub fn server_config(
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    let c = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)?;
    Ok(Arc::new(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_made_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("coalloc-tls-{}", std::process::id()));
        let (c1, _) = server_identity(&dir).unwrap();
        let (c2, _) = server_identity(&dir).unwrap();
        assert_eq!(fingerprint(&c1), fingerprint(&c2));
        assert!(fingerprint(&c1).starts_with("sha256:"));
        assert_eq!(fingerprint(&c1).len(), 7 + 64);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
