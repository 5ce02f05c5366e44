//! The component runtime for shell scripts and any language (seed 002 §3.3, §4.1):
//! `coalloc barrier [--fail]` and `coalloc kv put|get`, thin wrappers over `coalloc-runtime`
//! that read the component's `COALLOC_*` environment; and `coalloc pmi-proxy`, the PMI
//! server of an `mpi` component (coalloc-runtime's `pmi`).

use crate::error::CliError;
use clap::{Args, Subcommand};
use coalloc_runtime::{barrier, kv_get, kv_put, BarrierOutcome, Config, RuntimeError};
use std::io::{Read, Write};
use std::time::Duration;

#[derive(Args)]
pub struct BarrierArgs {
    /// Report a failed start-up instead: the component fails and the job is aborted (or the
    /// component replaced, for interactive ones).
    #[arg(long)]
    fail: bool,
    /// Why it failed (with --fail).
    #[arg(long, requires = "fail")]
    reason: Option<String>,
}

#[derive(Subcommand)]
pub enum KvCommand {
    /// Publish a value under KEY for the other components of this job.
    Put {
        key: String,
        /// The value; read from standard input when absent.
        value: Option<String>,
    },
    /// Print the value of KEY, waiting up to --wait for another component to put it.
    /// Exits 4 when it is still missing.
    Get {
        key: String,
        /// How long to wait for the key, e.g. 30s, 500ms, 2m.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        wait: Duration,
    },
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map(|i| s.split_at(i))
        .unwrap_or((s, "s"));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!("`{s}`: the unit must be ms, s or m")),
    }
}

fn config() -> Result<Config, CliError> {
    Config::from_env().map_err(|e| {
        CliError::bad(format!(
            "{e} (this command runs inside a component started by coalloc)"
        ))
    })
}

fn failed(e: RuntimeError) -> CliError {
    CliError::Internal(e.to_string())
}

/// Exit 0 when the job commits; 1 with the reason when it is aborted or `--fail` was given.
pub fn run_barrier(args: BarrierArgs) -> Result<(), CliError> {
    let cfg = config()?;
    let reason = args.reason.or_else(|| {
        args.fail
            .then(|| "the component reported a failed start-up".into())
    });
    match barrier(&cfg, !args.fail, reason.as_deref()).map_err(failed)? {
        BarrierOutcome::Released if !args.fail => Ok(()),
        BarrierOutcome::Released => Err(CliError::Internal("start-up reported failed".into())),
        BarrierOutcome::Aborted(why) => Err(CliError::Internal(format!("job aborted: {why}"))),
    }
}

pub fn run_kv(cmd: KvCommand) -> Result<(), CliError> {
    let cfg = config()?;
    match cmd {
        KvCommand::Put { key, value } => {
            let bytes = match value {
                Some(v) => v.into_bytes(),
                None => {
                    let mut b = Vec::new();
                    std::io::stdin()
                        .read_to_end(&mut b)
                        .map_err(|e| CliError::Internal(format!("standard input: {e}")))?;
                    b
                }
            };
            kv_put(&cfg, &key, &bytes).map_err(failed)
        }
        KvCommand::Get { key, wait } => match kv_get(&cfg, &key, wait).map_err(failed)? {
            Some(v) => {
                let mut out = std::io::stdout();
                let _ = out.write_all(&v);
                if !v.ends_with(b"\n") {
                    let _ = out.write_all(b"\n");
                }
                Ok(())
            }
            None => {
                eprintln!("error: key `{key}` is still missing after {wait:?}");
                std::process::exit(4)
            }
        },
    }
}

/// Run an `mpi` component's processes under coalloc's PMI; exits with the component's code.
pub fn run_pmi_proxy(command: &[String]) -> Result<(), CliError> {
    let cfg = config()?;
    let Some((program, args)) = command.split_first() else {
        return Err(CliError::bad("pmi-proxy needs the MPI program to run"));
    };
    std::process::exit(coalloc_runtime::pmi::proxy::run(&cfg, program, args))
}
