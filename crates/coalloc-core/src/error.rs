//! Errors for everything a user writes: job files (RSL, TOML, JSON), batch files, site lists.
//!
//! Every error says where (line and column when the input has them, otherwise the field path
//! such as `component[2].count`) and what rule was broken. The CLI adds the file name.

use std::fmt;

/// A 1-based line and column in the input text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl Pos {
    pub fn new(line: u32, col: u32) -> Self {
        Pos { line, col }
    }

    /// The position of byte `offset` in `text` (columns count characters, not bytes).
    pub fn of_offset(text: &str, offset: usize) -> Pos {
        let offset = offset.min(text.len());
        let before = &text[..floor_char_boundary(text, offset)];
        let line = before.matches('\n').count() as u32 + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        let col = before[line_start..].chars().count() as u32 + 1;
        Pos { line, col }
    }
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// What can be wrong with a job file, a batch file or a site list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The text is not well-formed in its language.
    #[error("{pos}: {message}")]
    Syntax { pos: Pos, message: String },
    /// The text is well-formed but the job (or site) it describes breaks a rule.
    #[error("{}{field}: {rule}", .pos.map(|p| format!("{p}: ")).unwrap_or_default())]
    Invalid {
        pos: Option<Pos>,
        field: String,
        rule: String,
    },
    /// A conversion target cannot say what the job says.
    #[error("cannot convert to {target} without loss: {reason}")]
    Unrepresentable {
        target: &'static str,
        reason: String,
    },
}

impl SpecError {
    pub fn syntax(pos: Pos, message: impl Into<String>) -> Self {
        SpecError::Syntax {
            pos,
            message: message.into(),
        }
    }

    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Self {
        SpecError::Invalid {
            pos: None,
            field: field.into(),
            rule: rule.into(),
        }
    }

    pub fn invalid_at(pos: Pos, field: impl Into<String>, rule: impl Into<String>) -> Self {
        SpecError::Invalid {
            pos: Some(pos),
            field: field.into(),
            rule: rule.into(),
        }
    }

    /// Attach a position to an `Invalid` error that has none yet.
    pub fn at(self, at: Pos) -> Self {
        match self {
            SpecError::Invalid {
                pos: None,
                field,
                rule,
            } => SpecError::Invalid {
                pos: Some(at),
                field,
                rule,
            },
            other => other,
        }
    }
}
