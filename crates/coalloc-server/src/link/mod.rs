//! Sites that are really apart: the server's end of the link to a site agent (DESIGN.md
//! "Sites apart"). The parts both ends share live in `coalloc-link` and are re-exported
//! here: [`proto`] the wire protocol, [`session`] each end as a sans-IO machine, [`pump`] the
//! loop that runs a session over a WebSocket, [`tls`] the certificate and its pin. [`hub`]
//! and [`remote`] are the server's end (the listener, and the agent site as a `Backend`);
//! the agent's end is the `coalloc-agent` crate.

pub use coalloc_link::{proto, pump, session, tls};

pub mod hub;
pub mod remote;
