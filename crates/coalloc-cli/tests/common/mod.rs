//! What only this package's tests can have: the `coalloc` binary's path, which they pass to
//! the shared wrappers of coalloc-testkit ([`coalloc_testkit::server`] and the rest), and
//! running it from the repository root.
#![allow(dead_code)] // each test file uses its own subset

pub use coalloc_testkit::repo;
use std::process::{Command, Output};

/// The `coalloc` binary of this build.
pub const COALLOC: &str = env!("CARGO_BIN_EXE_coalloc");

/// Run `coalloc ARGS...` in the repository root.
pub fn coalloc(args: &[&str]) -> Output {
    Command::new(COALLOC)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap()
}

/// Standard output of a run that must have succeeded.
pub fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The head of an HTTP/1.1 response read off `conn` one byte at a time (nothing after it is
/// taken, so an event stream's first event or the body is still there to read): `Err` with
/// how the read ended and what had come when the stream ended or failed first.
pub fn read_head(conn: &mut std::net::TcpStream) -> Result<String, String> {
    use std::io::Read;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            other => {
                let so_far = String::from_utf8_lossy(&head);
                return Err(format!("{other:?} after {so_far:?}"));
            }
        }
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}
