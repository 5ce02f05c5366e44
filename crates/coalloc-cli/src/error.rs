//! The binary's errors: what went wrong, said once, with the exit code it deserves.

use std::process::ExitCode;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The user's input is wrong (exit 2). Each line is already a full message.
    #[error("{}", .0.join("\n"))]
    BadInput(Vec<String>),
    /// Something broke that is not the user's fault (exit 1).
    #[error("{0}")]
    Internal(String),
}

impl CliError {
    pub fn bad(msg: impl Into<String>) -> Self {
        CliError::BadInput(vec![msg.into()])
    }

    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::BadInput(_) => ExitCode::from(2),
            CliError::Internal(_) => ExitCode::from(1),
        }
    }

    /// Print to standard error, one `error:` line per problem.
    pub fn report(&self) {
        match self {
            CliError::BadInput(lines) => {
                for l in lines {
                    eprintln!("error: {l}");
                }
            }
            CliError::Internal(m) => eprintln!("error: internal: {m}"),
        }
    }
}
