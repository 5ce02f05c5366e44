//! `coalloc serve`: run the server in the foreground until SIGINT or SIGTERM.

use crate::client::resolve_state_dir;
use crate::error::CliError;
use clap::Args;
use coalloc_backends::local::LauncherCommand;
use coalloc_server::config::ServerConfig;
use std::path::PathBuf;

#[derive(Args)]
pub struct ServeArgs {
    /// The configuration (TOML: `[server]`, `[[site]]` with `manager`, `[scheduler]`).
    /// Without it, the embedded default: local clusters alpha, beta and gamma of 16
    /// processor slots each, FCFS with the modified worst fit.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where the journal, logs, token and address live [default: $COALLOC_STATE_DIR, else
    /// ~/.coalloc].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Listen here instead of the configuration's `bind` (default 127.0.0.1, any free port).
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
}

/// Read a configuration file, or the embedded default.
pub fn load_config(path: Option<&PathBuf>) -> Result<ServerConfig, CliError> {
    match path {
        None => Ok(ServerConfig::embedded()),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| CliError::bad(format!("{}: cannot read: {e}", p.display())))?;
            ServerConfig::parse(&text).map_err(|e| CliError::bad(crate::load::locate(p, &e)))
        }
    }
}

/// Keep the configuration the server runs with in its state directory
/// (`served-config.toml`: the file given, else the embedded default's text), for `coalloc
/// whatif` to replay the history under.
fn keep_config(dir: &std::path::Path, config: Option<&PathBuf>) -> Result<(), CliError> {
    let text = match config {
        Some(p) => std::fs::read_to_string(p)
            .map_err(|e| CliError::bad(format!("{}: cannot read: {e}", p.display())))?,
        None => coalloc_server::config::DEFAULT_CONFIG.to_owned(),
    };
    keep_config_text(dir, &text)
}

/// Write `text`, the configuration a server of state directory `dir` runs with, to
/// `dir/served-config.toml` (`coalloc serve` and `coalloc demo` alike).
pub fn keep_config_text(dir: &std::path::Path, text: &str) -> Result<(), CliError> {
    let copy = dir.join("served-config.toml");
    std::fs::create_dir_all(dir)
        .and_then(|_| std::fs::write(&copy, text))
        .map_err(|e| CliError::bad(format!("{}: {e}", copy.display())))
}

/// The local clusters' launcher: this very program, `coalloc local-launcher DIR`.
pub fn local_launcher() -> Option<LauncherCommand> {
    std::env::current_exe().ok().map(|program| LauncherCommand {
        program,
        args: vec!["local-launcher".into()],
    })
}

pub fn run(args: ServeArgs) -> Result<(), CliError> {
    let mut config = load_config(args.config.as_ref())?;
    config.local_launcher = local_launcher();
    config.pmi_proxy = std::env::current_exe().ok();
    let dir = resolve_state_dir(args.state_dir);
    keep_config(&dir, args.config.as_ref())?;
    init_tracing();
    let rt = tokio::runtime::Runtime::new().map_err(|e| CliError::Internal(e.to_string()))?;
    let shown = dir.display().to_string();
    let served = dir.join("server.json");
    rt.block_on(coalloc_server::server::serve(
        config,
        &dir,
        args.bind,
        shutdown_signal(),
        move |url| {
            eprintln!("coalloc serve: listening on {url}; state directory {shown}");
            eprintln!(
                "coalloc serve: dashboard at {url}/ui (the token is in {shown}/token), metrics at {url}/metrics"
            );
            let info = std::fs::read_to_string(&served).unwrap_or_default();
            let info: serde_json::Value = serde_json::from_str(&info).unwrap_or_default();
            if let Some(f) = info["fingerprint"].as_str() {
                eprintln!(
                    "coalloc serve: HTTPS, certificate {f} (users pin it with `coalloc login {url}`)"
                );
            }
        },
    ))
    .map_err(|e| CliError::bad(e.to_string()))
}

/// Log to standard error; `RUST_LOG` sets the level (default `info`).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    eprintln!("coalloc serve: stopping");
}
