//! `coalloc user add|ls|rm` (the admin; issue 20 item 6): issue a token to a remote user
//! (for a time with `--expires`), list the users, take a token back. Local users need no token: the CLI reaches the server
//! over its Unix socket and the server knows them by their uid.

use crate::client::{Client, StateArgs};
use crate::error::CliError;
use crate::table::render;
use clap::Subcommand;
use coalloc_server::users::utc;

#[derive(Subcommand)]
pub enum UserCommand {
    /// Issue a token to a new user and print it (once; the server keeps only its hash). The
    /// user sets COALLOC_TOKEN=TOKEN (and COALLOC_URL=http://HOST:PORT when remote); they
    /// see and change only their own jobs, unless --admin.
    Add {
        /// The user's name: the owner of the jobs they submit.
        name: String,
        /// Give the admin's rights (every job, users, sites).
        #[arg(long)]
        admin: bool,
        /// The token stops being accepted this long from now: seconds or a duration such as
        /// 30d, 12h, 1h30m (default: it never expires; `coalloc user rm` revokes it at once).
        #[arg(long, value_name = "DURATION")]
        expires: Option<String>,
        /// Print JSON (name, admin, token, and expires in milliseconds since the epoch).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// The users that have a token.
    Ls {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Take a user's token back at once (their jobs stay theirs).
    Rm {
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
}

fn print_json(v: &serde_json::Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

pub fn run(cmd: UserCommand) -> Result<(), CliError> {
    match cmd {
        UserCommand::Add {
            name,
            admin,
            expires,
            json,
            state,
        } => {
            let client = Client::connect(&state)?;
            let mut body = serde_json::json!({ "name": name, "admin": admin });
            if let Some(d) = expires {
                body["expires_in"] = d.into();
            }
            let body = body.to_string();
            let v = client.send("POST", "/v1/users", "application/json", &body)?;
            if json {
                print_json(&v);
            } else {
                println!("{}", v["token"].as_str().unwrap_or_default());
                let until = v["expires"]
                    .as_i64()
                    .map_or(String::new(), |t| format!(", valid until {}", utc(t)));
                eprintln!("user {name}: token issued (shown this once; keep it secret){until}");
            }
        }
        UserCommand::Ls { json, state } => {
            let v = Client::connect(&state)?.get("/v1/users")?;
            if json {
                print_json(&v);
            } else {
                let rows: Vec<Vec<String>> = v["users"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|u| {
                        let admin = if u["admin"] == true { "yes" } else { "no" };
                        let expires = u["expires"].as_i64().map_or("never".into(), utc);
                        vec![
                            u["name"].as_str().unwrap_or("").into(),
                            admin.into(),
                            expires,
                        ]
                    })
                    .collect();
                print!("{}", render(&["NAME", "ADMIN", "EXPIRES"], &rows));
            }
        }
        UserCommand::Rm { name, json, state } => {
            let v = Client::connect(&state)?.delete(&format!("/v1/users/{name}"))?;
            if json {
                print_json(&v);
            } else {
                println!("user {name}: removed");
            }
        }
    }
    Ok(())
}
