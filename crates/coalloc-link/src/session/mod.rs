//! The two ends of an agent link as sans-IO state machines (DESIGN.md "Sites apart" habit
//! 1; issue 30 item 2): [`agent::AgentSession`] and [`server::ServerSession`], each with
//! `handle(now, message)`, `poll_transmit()`, `poll_timeout()`/`handle_timeout(now)` and
//! `poll_event()`, as quinn-proto's `Connection`. No socket, no clock, no task: the time is
//! passed in, so the tests here (and a simulation) step both ends on a virtual clock. The
//! pumps around them ([`crate::pump`], the server's hub, the agent) own TLS, the WebSocket
//! and tokio.

pub mod agent;
pub mod server;

/// What a session has to go out on its connection.
#[derive(Debug, Clone, PartialEq)]
pub enum Transmit<T> {
    Message(T),
    /// A WebSocket ping (the server's heartbeat).
    Ping,
}

#[cfg(test)]
mod tests;
