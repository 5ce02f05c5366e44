//! The Globus Resource Specification Language (seed 003 §2.2.4; DUROC's co-allocation
//! requests, seed 002 §4.1 figure 1; unordered job files, seed 003 appendix B).
//!
//! This module owns RSL text and its meaning for coalloc:
//! - [`ast`]: the syntax tree ([`Request`], [`Relation`], [`RslValue`]);
//! - `lexer` and `parser`: text to tree, with line and column in every error ([`parse()`]);
//! - `print`: tree to canonical text ([`print()`]);
//! - `expand`: `rslSubstitution` and `$(NAME)` ([`expand()`]);
//! - `map`: an expanded tree to a [`Job`] ([`job_from_rsl`]);
//! - `to_rsl`: a [`Job`] back to RSL text ([`job_to_rsl`]).
//!
//! Nothing here panics on any input: the lexer never indexes out of bounds, nesting is capped
//! at [`MAX_DEPTH`] parentheses and substitution at [`MAX_EXPANDED_BYTES`] of text.

pub mod ast;
mod expand;
mod lexer;
mod map;
mod parser;
mod print;
mod to_rsl;

pub use ast::{Relation, Request, RslValue};
pub use expand::{is_substitution, MAX_EXPANDED_BYTES};
pub use map::{job_from_request, known_name};
pub use parser::MAX_DEPTH;
pub use print::quote;
pub use to_rsl::job_to_rsl;

use crate::error::SpecError;
use crate::model::{Job, JobKind};

/// Parse RSL text into its syntax tree (syntax only: no attribute is checked).
pub fn parse(text: &str) -> Result<Request, SpecError> {
    parser::parse(text)
}

/// The tree as canonical RSL text (ending in a newline); [`parse`] reads it back.
pub fn print(request: &Request) -> String {
    print::print(request)
}

/// Apply every `rslSubstitution`: drop those relations, replace `$(NAME)` references and
/// join concatenations into plain strings.
pub fn expand(request: &Request) -> Result<Request, SpecError> {
    expand::expand(request)
}

/// Read a job from RSL text: parse, expand, map onto the model and check every job rule.
///
/// `expect` is what the file name promises: `Some(Ordered)` for `.rsl` (every component names
/// a `resourceManagerContact`), `Some(Unordered)` for `.uno` (none does; a single `&` then
/// reads as a total job), `None` to take whatever the text says.
pub fn job_from_rsl(text: &str, expect: Option<JobKind>) -> Result<Job, SpecError> {
    let request = expand(&parse(text)?)?;
    let (job, positions) = job_from_request(&request, expect)?;
    crate::spec::validate::validate(&job, &positions)?;
    Ok(job)
}
