//! HTTPS to the server (issue 32 item 4): ureq agents over `coalloc_pin`'s blocking TLS,
//! which trusts exactly one certificate, the one whose SHA-256 fingerprint the user pinned
//! (`coalloc login`, `COALLOC_FINGERPRINT`, or the state directory's `server.json` on the
//! server's own host), as agents and components pin theirs. No CA is
//! involved. The pins `coalloc login` stores live in `DIR/known-servers.json`, one
//! fingerprint per URL.

use crate::error::CliError;
use coalloc_pin::blocking;
use std::collections::BTreeMap;
use std::net::ToSocketAddrs;
use std::path::Path;

pub use blocking::is_loopback;

/// An agent whose every request goes over TLS to the certificate `fingerprint`.
pub fn agent(fingerprint: &str, config: ureq::config::Config) -> Result<ureq::Agent, CliError> {
    blocking::agent(fingerprint, config).map_err(|e| CliError::Internal(format!("TLS: {e}")))
}

/// What a failed request says, with what to do when the pin refused the certificate.
pub fn explain(url: &str, e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    if coalloc_pin::is_pin_mismatch(&text) {
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
    let (config, seen) =
        coalloc_pin::peek_config().map_err(|e| CliError::Internal(format!("TLS: {e}")))?;
    let s = blocking::handshake(&addrs, config).map_err(|e| CliError::bad(explain(url, &e)))?;
    drop(s);
    let seen = seen.lock().ok().and_then(|s| s.clone());
    seen.ok_or_else(|| CliError::Internal(format!("{url}: the server presented no certificate")))
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
