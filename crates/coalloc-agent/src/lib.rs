//! The site agent (`coalloc agent`): the agent's end of the link to the server (DESIGN.md
//! "Sites apart"), run on a site's login node, where it hosts the site's own backend.
//!
//! - [`agent`]: the agent itself, its connection loop and the server's calls on its backend;
//! - [`config`]: its configuration file (the `[agent]` table and its one `[[site]]`);
//! - [`held`]: its record of the launches it made (`launches.jsonl`);
//! - [`relay`]: the HTTP relay its components' barrier and rendezvous calls go through.
//!
//! A crate of its own (issue 30 item 3) so that the agent does not link the server: it
//! shares the wire protocol and the sans-IO sessions with the server through `coalloc-link`,
//! and reads its site and makes its backend as the server does through `coalloc-backends`
//! (`kind::backend_of`, `kind::backend_for`).

pub mod agent;
pub mod config;
pub mod held;
pub mod relay;

pub use agent::{Agent, AgentError};
pub use coalloc_link::proto::EnrolToken;
pub use config::AgentConfig;
