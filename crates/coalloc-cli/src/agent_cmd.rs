//! `coalloc site add` (enrol a site's agent), `coalloc site drain|down|resume` (an
//! operator's word on a site) and `coalloc agent` (run one on a site's login node): sites
//! that are really apart (coalloc_server::link, coalloc_agent).

use crate::client::{Client, StateArgs};
use crate::error::CliError;
use clap::{Args, Subcommand};
use coalloc_agent::{Agent, AgentConfig, AgentError, EnrolToken};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum SiteCommand {
    /// Enrol the agent of an agent site (`manager = { type = "agent" }`): print its
    /// enrolment token, one line that carries the server's agent address, its certificate's
    /// fingerprint and a new credential for this site only. Give it to `coalloc agent
    /// --token-file` on the site's login node; keep it secret. Enrolling a site again
    /// replaces its credential (the old agent is refused from then on).
    Add {
        /// The site's name in the server's configuration.
        name: String,
        /// Print JSON (site, server, fingerprint, token).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Take no new components on a site; running ones finish (Slurm's DRAIN).
    Drain(ControlArgs),
    /// Take a site out of service until it is resumed; it is never probed back by itself.
    /// Running components are left alone (cancel them if they must go).
    Down(ControlArgs),
    /// Put a drained, down or error-marked site back into service (clears its error counts).
    Resume(ControlArgs),
}

/// A site control's arguments.
#[derive(Args)]
pub struct ControlArgs {
    /// The site's name in the server's configuration.
    pub name: String,
    /// Why, shown by `coalloc sites` while the site is out.
    #[arg(long, default_value = "")]
    pub reason: String,
    /// Print the server's answer as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

pub fn site(cmd: SiteCommand) -> Result<(), CliError> {
    match cmd {
        SiteCommand::Add { name, json, state } => {
            let client = Client::connect(&state)?;
            let v = client.send(
                "POST",
                &format!("/v1/sites/{name}/agent-token"),
                "application/json",
                "",
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            } else {
                println!("{}", v["token"].as_str().unwrap_or_default());
                eprintln!(
                    "site {name}: agent token issued; its agent connects to {} (certificate {})",
                    v["server"].as_str().unwrap_or("?"),
                    v["fingerprint"].as_str().unwrap_or("?")
                );
            }
            Ok(())
        }
        SiteCommand::Drain(a) => control(a, "drain"),
        SiteCommand::Down(a) => control(a, "down"),
        SiteCommand::Resume(a) => control(a, "resume"),
    }
}

/// `PUT /v1/sites/NAME/control`.
fn control(a: ControlArgs, action: &str) -> Result<(), CliError> {
    let client = Client::connect(&a.state)?;
    let body = serde_json::json!({ "action": action, "reason": a.reason }).to_string();
    let v = client.send(
        "PUT",
        &format!("/v1/sites/{}/control", a.name),
        "application/json",
        &body,
    )?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        println!("site {}: {action}", a.name);
    }
    Ok(())
}

#[derive(Args)]
pub struct AgentArgs {
    /// The server's agent address, `wss://HOST:PORT` (or `https://`, or `HOST:PORT`)
    /// [default: the one in the token].
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// The enrolment token from `coalloc site add NAME` on the server.
    #[arg(long, value_name = "FILE")]
    pub token_file: PathBuf,
    /// This site's configuration: an `[agent]` table (relay_bind, relay_url, environment)
    /// and the one `[[site]]` it serves, with its `manager` (local or slurm).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Where the agent keeps its launches and the local backend's folders
    /// [default: $COALLOC_AGENT_DIR, else ~/.coalloc-agent/SITE].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

pub fn agent(args: AgentArgs) -> Result<(), CliError> {
    let text = std::fs::read_to_string(&args.token_file)
        .map_err(|e| CliError::bad(format!("{}: cannot read: {e}", args.token_file.display())))?;
    let token = EnrolToken::decode(&text)
        .map_err(|e| CliError::bad(format!("{}: {e}", args.token_file.display())))?;
    let conf = std::fs::read_to_string(&args.config)
        .map_err(|e| CliError::bad(format!("{}: cannot read: {e}", args.config.display())))?;
    let config = AgentConfig::parse(&conf)
        .map_err(|e| CliError::bad(crate::load::locate(&args.config, &e)))?;
    let dir = args
        .state_dir
        .or_else(|| std::env::var_os("COALLOC_AGENT_DIR").map(PathBuf::from))
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
            home.join(".coalloc-agent").join(&config.site.name)
        });
    crate::serve_cmd::init_tracing();
    let agent = Agent::new(
        token,
        args.server.as_deref(),
        config,
        &dir,
        crate::serve_cmd::local_launcher(),
    )
    .map_err(|e| CliError::bad(e.to_string()))?;
    // One thread for the link, the relay and the timers (the backend's calls run on the
    // blocking pool): an agent's work is small messages, and on a login node shared with
    // others a single thread wakes fewer cores than a worker per core.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Internal(e.to_string()))?;
    rt.block_on(agent.run(crate::serve_cmd::shutdown_signal()))
        .map_err(|e: AgentError| CliError::bad(e.to_string()))
}
