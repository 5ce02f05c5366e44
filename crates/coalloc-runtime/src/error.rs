//! The runtime's errors: a bad environment, a refused request, an unreachable server.

/// What can go wrong in a runtime call.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A `COALLOC_*` variable is not set (the process was not started by coalloc).
    #[error("environment variable {0} is not set")]
    MissingVar(&'static str),
    /// A `COALLOC_*` variable does not parse or contradicts another one.
    #[error("environment variable {var} is invalid: {reason}")]
    BadVar {
        /// The variable's name.
        var: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// `401`: the secret is missing or not one the server knows.
    #[error("the server refused the job secret (401): {0}")]
    Unauthorized(String),
    /// `403`: the secret belongs to another job.
    #[error("the job secret is not valid for this job (403): {0}")]
    Forbidden(String),
    /// Any other unexpected HTTP status, with the server's message.
    #[error("the server answered {status}: {message}")]
    Http {
        /// The HTTP status code.
        status: u16,
        /// The server's `error` message, or the raw body.
        message: String,
    },
    /// The job did not commit within its barrier timeout (`COALLOC_BARRIER_TIMEOUT_MS`):
    /// the server has failed this component's start by now, so the process leaves.
    #[error("the job did not commit within the barrier timeout ({0:?}): {1}")]
    BarrierTimeout(std::time::Duration, String),
    /// The server could not be reached for the whole retry budget.
    #[error("the coalloc server is unreachable: {0}")]
    Unreachable(String),
    /// Something else in the exchange failed (a body not read, a bad URL).
    #[error("HTTP exchange failed: {0}")]
    Transport(String),
    /// The server answered something that is not the protocol.
    #[error("unexpected answer from the server: {0}")]
    Protocol(String),
}
