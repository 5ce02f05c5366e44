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

/// A study's errors keep their kind: the user's input (exit 2) or not (exit 1).
impl From<coalloc_lab::LabError> for CliError {
    fn from(e: coalloc_lab::LabError) -> Self {
        match e {
            coalloc_lab::LabError::Input(m) => CliError::bad(m),
            coalloc_lab::LabError::Internal(m) => CliError::Internal(m),
        }
    }
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
