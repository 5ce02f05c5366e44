//! `coalloc login URL` (issue 32 item 4): show the certificate an HTTPS server presents,
//! ask whether to trust it (or take `--fingerprint` / `--yes`), and pin it in
//! `DIR/known-servers.json`; every later call to that URL checks it
//! ([`crate::tls_http`]).

use crate::client::StateArgs;
use crate::error::CliError;
use crate::tls_http;
use clap::Args;
use std::io::{BufRead, IsTerminal, Write};

#[derive(Args)]
pub struct LoginArgs {
    /// The server's URL, `https://HOST:PORT`.
    pub url: String,
    /// The fingerprint the operator gave (`sha256:HEX`, as `coalloc serve` prints it):
    /// trust the server only if it presents this certificate.
    #[arg(long, value_name = "HEX")]
    pub fingerprint: Option<String>,
    /// Trust the certificate the server presents without asking.
    #[arg(long)]
    pub yes: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

pub fn run(args: LoginArgs) -> Result<(), CliError> {
    let url = args.url.trim_end_matches('/').to_string();
    if !url.starts_with("https://") {
        return Err(if tls_http::is_loopback(&url) {
            CliError::bad(format!(
                "{url} is this machine's loopback, plain HTTP: there is no certificate to pin"
            ))
        } else {
            CliError::bad(format!(
                "{url} is plain HTTP beyond loopback, where no token may go: use the server's https:// URL"
            ))
        });
    }
    let dir = args.state.dir();
    let presented = tls_http::peek(&url)?;
    eprintln!("the server at {url} presents the certificate {presented}");
    let trusted = match &args.fingerprint {
        Some(given) => {
            let given = tls_http::normalize(given)?;
            if given != presented {
                return Err(CliError::bad(format!(
                    "refusing the server at {url}: it presents {presented}, not the expected {given}"
                )));
            }
            true
        }
        None if args.yes => true,
        None if std::io::stdin().is_terminal() => {
            eprint!("trust it? [y/N] ");
            let _ = std::io::stderr().flush();
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line);
            matches!(line.trim(), "y" | "Y" | "yes")
        }
        None => {
            return Err(CliError::bad(
                "standard input is not a terminal: pass --fingerprint HEX (from the server's operator) or --yes",
            ))
        }
    };
    if !trusted {
        return Err(CliError::bad(format!("{url}: not trusted; nothing stored")));
    }
    if let Some(old) = tls_http::known(&dir).get(&url).filter(|o| **o != presented) {
        eprintln!("replacing the pin {old}");
    }
    tls_http::remember(&dir, &url, &presented)?;
    println!("{presented}");
    eprintln!(
        "pinned in {}; set COALLOC_URL={url} and COALLOC_TOKEN",
        dir.join("known-servers.json").display()
    );
    Ok(())
}
