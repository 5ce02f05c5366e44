//! `coalloc edit` and `coalloc commit`: the owner's side of an interactive transaction
//! (seed 002 §3.2). A job submitted with `hold_at_barrier = true` waits at the barrier for
//! `coalloc commit`; before that, `coalloc edit` adds, deletes or substitutes components,
//! and the event stream (`coalloc events`) tells the owner when one failed
//! (`interactive_failed`) and when the job may be committed (`awaiting_commit`).

use crate::client::{Client, StateArgs};
use crate::error::CliError;
use crate::load::load_all;
use clap::{Args, Subcommand};
use coalloc_core::spec::native;
use serde_json::{json, Value};
use std::path::PathBuf;

#[derive(Args)]
pub struct EditArgs {
    /// The job, before its commit.
    pub job: u64,
    #[command(subcommand)]
    pub op: EditOp,
    /// Print the server's answer as JSON.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

#[derive(Subcommand)]
pub enum EditOp {
    /// Add the component of FILE (a job file with one component) and start it.
    Add { file: PathBuf },
    /// Delete component INDEX (from 0); its launch is cancelled.
    Delete { index: usize },
    /// Replace component INDEX by the component of FILE, started afresh.
    Substitute { index: usize, file: PathBuf },
}

#[derive(Args)]
pub struct CommitArgs {
    /// The job, held at the barrier (`hold_at_barrier = true`).
    pub job: u64,
    /// Print the server's answer as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

/// The one component of a job file, in the native JSON form.
fn component_of(file: &PathBuf) -> Result<Value, CliError> {
    let loaded = load_all(std::slice::from_ref(file)).remove(0);
    let job = loaded.job.map_err(|e| CliError::BadInput(vec![e]))?;
    let doc: Value = serde_json::from_str(&native::to_json(&job))
        .map_err(|e| CliError::Internal(e.to_string()))?;
    match doc["component"].as_array().map(Vec::as_slice) {
        Some([one]) => Ok(one.clone()),
        _ => Err(CliError::bad(format!(
            "{}: an edit takes a job file with exactly one component",
            file.display()
        ))),
    }
}

pub fn edit(args: EditArgs) -> Result<(), CliError> {
    let body = match &args.op {
        EditOp::Add { file } => json!({ "op": "add", "component": component_of(file)? }),
        EditOp::Delete { index } => json!({ "op": "delete", "index": index }),
        EditOp::Substitute { index, file } => {
            json!({ "op": "substitute", "index": index, "component": component_of(file)? })
        }
    };
    let client = Client::connect(&args.state)?;
    let path = format!("/v1/jobs/{}/edit", args.job);
    let v = client.send("POST", &path, "application/json", &body.to_string())?;
    print_answer(args.json, &v, || {
        format!("job {}: {}", args.job, body["op"].as_str().unwrap_or(""))
    });
    Ok(())
}

pub fn commit(args: CommitArgs) -> Result<(), CliError> {
    let client = Client::connect(&args.state)?;
    let path = format!("/v1/jobs/{}/commit", args.job);
    let v = client.send("POST", &path, "application/json", "")?;
    print_answer(args.json, &v, || format!("job {}: committed", args.job));
    Ok(())
}

fn print_answer(json: bool, v: &Value, line: impl FnOnce() -> String) {
    if json {
        println!("{v}");
    } else {
        println!("{}", line());
    }
}
