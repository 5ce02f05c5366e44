//! What can go wrong reading a trace: each error on a job line names the line and column.

/// An error reading an SWF trace.
///
/// Errors in the text carry a 1-based line and a 1-based column (in bytes; SWF job lines are
/// ASCII) and display as `LINE:COLUMN: message`, so that a caller prefixes the file name
/// without a space: `trace.swf:7:31: ...`. Errors that have no position (the file cannot be
/// read, or its gzip stream is broken) display as a bare message, which a caller prefixes
/// with `file: `; [`SwfError::position`] tells the two kinds apart.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SwfError {
    /// A job line does not have exactly 18 fields. The column is where the 19th field starts
    /// (too many) or just past the end of the line (too few).
    #[error("{line}:{column}: expected 18 fields, found {found}")]
    FieldCount {
        line: usize,
        column: usize,
        found: usize,
    },
    /// A field is not a number: a whole number for every field but field 6, a decimal
    /// number for field 6 (average CPU time).
    #[error("{line}:{column}: field {field} ({name}): `{text}` is not {expected}")]
    NotANumber {
        line: usize,
        column: usize,
        /// The field, 1 to 18.
        field: usize,
        /// The field's name, e.g. `run time`.
        name: &'static str,
        /// The offending text (cut to 40 characters).
        text: String,
        /// `a whole number` or `a number`.
        expected: &'static str,
    },
    /// A whole number that does not fit in 64 bits.
    #[error("{line}:{column}: field {field} ({name}): `{text}` does not fit in 64 bits")]
    OutOfRange {
        line: usize,
        column: usize,
        field: usize,
        name: &'static str,
        text: String,
    },
    /// The file starts with the gzip magic bytes but does not decompress.
    #[error("not a valid gzip file: {0}")]
    Gzip(String),
    /// The file cannot be read.
    #[error("cannot read: {0}")]
    Io(String),
}

impl SwfError {
    /// The line and column of an error in the text; `None` for [`SwfError::Gzip`] and
    /// [`SwfError::Io`].
    pub fn position(&self) -> Option<(usize, usize)> {
        match *self {
            SwfError::FieldCount { line, column, .. }
            | SwfError::NotANumber { line, column, .. }
            | SwfError::OutOfRange { line, column, .. } => Some((line, column)),
            SwfError::Gzip(_) | SwfError::Io(_) => None,
        }
    }

    /// The message with a file name in front: `file:line:col: message` for errors with a
    /// position, `file: message` for the others.
    pub fn with_file(&self, file: &str) -> String {
        match self.position() {
            Some(_) => format!("{file}:{self}"),
            None => format!("{file}: {self}"),
        }
    }
}
