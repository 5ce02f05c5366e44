//! Sites that are really apart: the link between the server and a site agent
//! (DESIGN.md "Sites apart"). The parts both ends share live in `coalloc-link` and are
//! re-exported here: [`proto`] the wire protocol, [`session`] each end as a sans-IO machine,
//! [`pump`] the loop that runs a session over a WebSocket, [`tls`] the certificate and its
//! pin. [`hub`] and [`remote`] are the server's end (the listener, and the agent site as a
//! `Backend`); [`agent`], [`relay`] and [`held`] the agent's end.

pub use coalloc_link::{proto, pump, session, tls};

pub mod agent;
pub mod held;
pub mod hub;
pub mod relay;
pub mod remote;
