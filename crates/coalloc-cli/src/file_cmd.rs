//! `coalloc file register | ls | rm`: the server's replica catalog (seed 000 §2.3), where a
//! job's input file is found by its logical name.

use crate::client::{Client, StateArgs};
use crate::error::CliError;
use crate::table;
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum FileCommand {
    /// Register a replica: logical file NAME is at PATH on SITE. Its size and BLAKE3
    /// checksum are read here when PATH can be read, else where the file is: by the server
    /// for its own sites, by the site's agent for an agent's site.
    Register {
        site: String,
        name: String,
        /// The file's path on the site.
        path: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// The replicas (of logical file NAME only, when given): site, path, size, checksum and
    /// origin (static: site configuration; registered; cached: made by a transfer, evicted
    /// least recently used first when the site's cache_limit is reached).
    Ls(LsArgs),
    /// Remove a logical file's replicas from the catalog (on SITE only with --site); the
    /// files stay where they are.
    Rm {
        name: String,
        #[arg(long)]
        site: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
}

#[derive(Args)]
pub struct LsArgs {
    pub name: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

pub fn run(cmd: FileCommand) -> Result<(), CliError> {
    match cmd {
        FileCommand::Register {
            site,
            name,
            path,
            json: as_json,
            state,
        } => {
            let client = Client::connect(&state)?;
            let path = std::path::absolute(&path).unwrap_or(path);
            let mut body = json!({"site": site, "name": name, "path": path.to_string_lossy()});
            if let Ok(s) = coalloc_server::transfer::stat(&path) {
                body["size"] = s.size.into();
                body["blake3"] = s.blake3.into();
            }
            let v = client.send("POST", "/v1/files", "application/json", &body.to_string())?;
            print_files(&json!({"files": [v]}), as_json);
            Ok(())
        }
        FileCommand::Ls(a) => {
            let client = Client::connect(&a.state)?;
            let q = a
                .name
                .map(|n| format!("?name={}", encode(&n)))
                .unwrap_or_default();
            let v = client.get(&format!("/v1/files{q}"))?;
            print_files(&v, a.json);
            Ok(())
        }
        FileCommand::Rm {
            name,
            site,
            json: as_json,
            state,
        } => {
            let client = Client::connect(&state)?;
            let q = site
                .map(|s| format!("?site={}", encode(&s)))
                .unwrap_or_default();
            let v = client.delete(&format!("/v1/files/{}{q}", encode(&name)))?;
            print_files(&v, as_json);
            Ok(())
        }
    }
}

/// Percent-encode what is not unreserved in a URL path segment or query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn print_files(v: &Value, as_json: bool) {
    if as_json {
        println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
        return;
    }
    let text = |x: &Value| x.as_str().unwrap_or("-").to_string();
    let rows: Vec<Vec<String>> = v["files"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            vec![
                text(&r["name"]),
                text(&r["site"]),
                r["size"].to_string(),
                text(&r["origin"]),
                r["blake3"]
                    .as_str()
                    .map_or("-".into(), |s| s[..16.min(s.len())].to_string()),
                text(&r["path"]),
            ]
        })
        .collect();
    print!(
        "{}",
        table::render(
            &["file", "site", "bytes", "origin", "blake3", "path"],
            &rows
        )
    );
}
