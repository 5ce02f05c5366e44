//! Sites that are really apart: the link between the server and a site agent
//! (DESIGN.md "Sites apart"). The parts both ends share live in `coalloc-link` and are
//! re-exported here: [`proto`] the wire protocol, [`session`] each end as a sans-IO machine,
//! [`pump`] the loop that runs a session over a WebSocket, [`tls`] the certificate and its
//! pin. [`hub`], [`remote`] and [`calls`] are the server's end (the listener and its pumps,
//! the agent site's link state shared by the driver and the pump, and the driver's calls to
//! the site as a sans-IO machine); [`agent`], [`relay`] and [`held`] the agent's end.

pub use coalloc_link::{proto, pump, session, tls};

pub mod agent;
pub mod calls;
pub mod held;
pub mod hub;
pub mod relay;
pub mod remote;
