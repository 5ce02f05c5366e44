//! TLS of the agent link: the server's self-signed certificate (made once, kept in the state
//! directory, so its fingerprint outlives restarts), the server's rustls configuration, and
//! the agent's, which trusts exactly one certificate: the one whose SHA-256 fingerprint its
//! enrolment token carries. No CA is involved, so none can be abused.

use super::proto::hex;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

/// The name the agent asks for in TLS; the certificate is checked by fingerprint, not name.
pub const SERVER_NAME: &str = "coalloc-server";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// `sha256:` and the hex digest of a certificate's DER bytes.
pub fn fingerprint(cert: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(cert)))
}

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

/// The agent side's TLS configuration: trusts the certificate with this fingerprint only.
pub fn agent_config(pinned: &str) -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let provider = provider();
    let c = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned {
            fingerprint: Some(pinned.to_string()),
            seen: Arc::default(),
            provider,
        }))
        .with_no_client_auth();
    Ok(Arc::new(c))
}

/// What a server presents, for a person to decide whether to trust it (`coalloc login`):
/// a configuration that accepts any certificate and keeps its fingerprint in the second
/// value. Nothing may be sent over a connection it makes.
pub fn peek_config() -> Result<(Arc<rustls::ClientConfig>, Seen), rustls::Error> {
    let provider = provider();
    let seen = Seen::default();
    let c = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned {
            fingerprint: None,
            seen: seen.clone(),
            provider,
        }))
        .with_no_client_auth();
    Ok((Arc::new(c), seen))
}

/// The fingerprint of the certificate a peeking connection was shown.
pub type Seen = Arc<std::sync::Mutex<Option<String>>>;

/// Whether a TLS error is the pin refusing the server's certificate.
pub fn is_pin_mismatch(e: &std::io::Error) -> bool {
    e.to_string().contains(MISMATCH)
}

const MISMATCH: &str = "certificate fingerprint mismatch";

#[derive(Debug)]
struct Pinned {
    /// `None`: accept any certificate (only to show it; see [`peek_config`]).
    fingerprint: Option<String>,
    seen: Seen,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let got = fingerprint(end_entity);
        if let Ok(mut seen) = self.seen.lock() {
            *seen = Some(got.clone());
        }
        match &self.fingerprint {
            None => Ok(ServerCertVerified::assertion()),
            Some(pin) if super::proto::constant_time_eq(&got, pin) => {
                Ok(ServerCertVerified::assertion())
            }
            Some(pin) => Err(rustls::Error::General(format!(
                "{MISMATCH}: the server presented {got}, the pin is {pin}"
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
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
