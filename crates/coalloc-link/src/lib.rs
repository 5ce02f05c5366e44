//! The link between the coalloc server and a site agent (DESIGN.md "Sites apart"), the parts
//! both ends share: [`proto`] the wire protocol, [`session`] each end as a sans-IO state
//! machine, [`pump`] the loop that runs a session over a WebSocket, [`tls`] the server's
//! certificate and the agent's pin on it.

pub mod proto;
pub mod pump;
pub mod session;
pub mod tls;
