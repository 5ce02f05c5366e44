//! The coalloc server (`coalloc serve`): it drives the scheduling core with the wall clock,
//! journals every accepted input to SQLite before acting on it, runs components through the
//! site backends, and serves the HTTP API, the barrier and the rendezvous store.
//!
//! - [`config`]: the TOML configuration and the embedded default;
//! - [`driver`]: the thread that owns the core (journal, replay, reconcile, commands);
//! - [`msg`]: what crosses the driver's edge (requests, reports, the calls to a site);
//! - [`sites`]: one worker per site between the driver and its backend;
//! - [`api`]: the HTTP API (axum), its authentication and OpenAPI document; [`views`]: the
//!   API's types;
//! - [`journal`], [`entry`]: the event journal; [`history`]: ended jobs out of memory; [`logs`]: result and surveillance logs;
//! - [`listing`]: the filters and cursor of the job listings;
//! - [`metrics`]: the Prometheus metrics;
//! - [`state`]: the state directory; [`server`]: putting it all together; [`standby`]: a
//!   server that waits for the PostgreSQL journal's lease;
//! - [`link`]: the server's end of the links to site agents (`coalloc-agent`);
//! - [`catalog`]: the replica catalog; [`transfer`]: moving input files between sites.

pub mod api;
pub mod api_tls;
pub mod catalog;
pub mod config;
pub mod driver;
pub mod entry;
pub mod history;
pub mod journal;
pub mod link;
pub mod listing;
pub mod logs;
pub mod metrics;
pub mod msg;
#[cfg(test)]
mod scratch;
pub mod server;
pub mod sites;
pub mod standby;
pub mod state;
pub mod transfer;
pub mod users;
pub mod views;
