//! Sites that are really apart: the link between the server and a site agent
//! (DESIGN.md "Sites apart"). [`proto`] is the wire protocol of both ends; [`tls`] the
//! certificate and its pin; [`pump`] the loop both ends run; [`hub`] and [`remote`] the server's end (the listener, and the
//! agent site as a `Backend`); [`agent`], [`relay`] and [`held`] the agent's end.

pub mod agent;
pub mod held;
pub mod hub;
pub mod proto;
pub mod pump;
pub mod relay;
pub mod remote;
pub mod tls;
