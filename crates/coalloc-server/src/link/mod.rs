//! Sites that are really apart: the server's end of the link to a site agent (DESIGN.md
//! "Sites apart"). The parts both ends share live in `coalloc-link` and are re-exported
//! here: [`proto`] the wire protocol, [`session`] each end as a sans-IO machine, [`pump`] the
//! loop that runs a session over a WebSocket, [`tls`] the certificate and its pin. [`hub`],
//! [`remote`] and [`calls`] are the server's end (the listener and its pumps, the agent
//! site's link state shared by the driver and the pump, and the driver's calls to the site
//! as a sans-IO machine); the agent's end is the `coalloc-agent` crate.

pub use coalloc_link::{proto, pump, session, tls};

pub mod calls;
pub mod hub;
pub mod remote;
