//! TLS by a pinned certificate (issue 32 item 4): the rustls client configuration that trusts
//! exactly one certificate, the one whose SHA-256 fingerprint the client was given (an
//! agent's enrolment token, `coalloc login`, a component's `COALLOC_SERVER_FINGERPRINT`),
//! and the one that accepts any certificate only to show its fingerprint. No CA is involved,
//! so none can be abused. [`blocking`] runs ureq's requests over such a connection.

pub mod blocking;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The name a client asks for in TLS; the certificate is checked by fingerprint, not name.
pub const SERVER_NAME: &str = "coalloc-server";

/// The crypto provider of every coalloc TLS end (ring: no C toolchain beyond ring's own).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Equality of two strings in time that depends on their lengths only (`subtle`): used for
/// every secret the server checks (agent credentials, the server's token, job secrets) and
/// for the pin.
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// `sha256:` and the hex digest of a certificate's DER bytes.
pub fn fingerprint(cert: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(cert)))
}

/// A client's TLS configuration that trusts the certificate with this fingerprint only.
pub fn client_config(pinned: &str) -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    config(Some(pinned.to_string()), Seen::default())
}

/// What a server presents, for a person to decide whether to trust it (`coalloc login`):
/// a configuration that accepts any certificate and keeps its fingerprint in the second
/// value. Nothing may be sent over a connection it makes.
pub fn peek_config() -> Result<(Arc<rustls::ClientConfig>, Seen), rustls::Error> {
    let seen = Seen::default();
    Ok((config(None, seen.clone())?, seen))
}

fn config(
    fingerprint: Option<String>,
    seen: Seen,
) -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let provider = provider();
    let c = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned {
            fingerprint,
            seen,
            provider,
        }))
        .with_no_client_auth();
    Ok(Arc::new(c))
}

/// The fingerprint of the certificate a peeking connection was shown.
pub type Seen = Arc<std::sync::Mutex<Option<String>>>;

/// Whether an error's text is the pin refusing the server's certificate.
pub fn is_pin_mismatch(e: &dyn std::fmt::Display) -> bool {
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
            Some(pin) if constant_time_eq(&got, pin) => Ok(ServerCertVerified::assertion()),
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
    fn constant_time_equality_is_equality() {
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "ab"));
    }

    #[test]
    fn a_fingerprint_is_sha256_hex() {
        // SHA-256 of the empty string.
        assert_eq!(
            fingerprint(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
