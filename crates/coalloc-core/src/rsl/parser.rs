//! The RSL parser (seed 003 §2.2.4's grammar, extended as Globus RSL is):
//!
//! ```text
//! specification -> request | '(' specification ')'
//! request       -> '+' request-list | '&' request-list | '|' request-list | relation
//! request-list  -> '(' request ')' request-list | '(' request ')'
//! relation      -> string operator value value*
//! value         -> '(' value* ')' | simple (('#' | no whitespace) simple)*
//! simple        -> string | '$(' string ')'
//! ```
//!
//! Syntax only: the parser checks no attribute names. Errors carry the line and column of the
//! offending token; nesting is limited to [`MAX_DEPTH`] parentheses so that no input can
//! exhaust the stack.

use super::ast::{MakeList, Relation, Request, RslValue};
use super::lexer::{Lexer, Tok, Token};
use crate::error::{Pos, SpecError};

/// The deepest nesting of parentheses the parser accepts.
pub const MAX_DEPTH: usize = 200;

/// Parse a whole specification.
pub fn parse(text: &str) -> Result<Request, SpecError> {
    let mut p = Parser {
        lexer: Lexer::new(text),
        peeked: None,
    };
    let request = p.specification(0)?;
    let t = p.next()?;
    if t.tok != Tok::Eof {
        return Err(SpecError::syntax(
            t.pos,
            format!(
                "expected the end of the specification after the request (found {})",
                t.describe()
            ),
        ));
    }
    Ok(request)
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    peeked: Option<Token>,
}

/// A name for error messages, cut short if long.
fn short(s: &str) -> String {
    let cut: String = s.chars().take(40).collect();
    if cut.len() < s.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

impl Parser<'_> {
    fn peek(&mut self) -> Result<Token, SpecError> {
        if let Some(t) = &self.peeked {
            return Ok(t.clone());
        }
        let t = self.lexer.next_token()?;
        self.peeked = Some(t.clone());
        Ok(t)
    }

    fn next(&mut self) -> Result<Token, SpecError> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lexer.next_token(),
        }
    }

    /// Check that one more level of parentheses, opened at `open`, is allowed.
    fn deeper(depth: usize, open: Pos) -> Result<usize, SpecError> {
        if depth >= MAX_DEPTH {
            Err(SpecError::syntax(
                open,
                format!("nesting deeper than {MAX_DEPTH} levels of parentheses"),
            ))
        } else {
            Ok(depth + 1)
        }
    }

    /// Consume the `)` that closes the `(` at `open`.
    fn close(&mut self, open: Pos) -> Result<(), SpecError> {
        let t = self.next()?;
        if t.tok == Tok::RParen {
            Ok(())
        } else {
            Err(SpecError::syntax(
                t.pos,
                format!(
                    "expected `)` to close the `(` at {open} (found {})",
                    t.describe()
                ),
            ))
        }
    }

    fn specification(&mut self, depth: usize) -> Result<Request, SpecError> {
        let t = self.peek()?;
        if t.tok != Tok::LParen {
            return self.request(depth);
        }
        self.next()?;
        let inner = Self::deeper(depth, t.pos)?;
        let request = self.specification(inner)?;
        self.close(t.pos)?;
        Ok(request)
    }

    fn request(&mut self, depth: usize) -> Result<Request, SpecError> {
        let t = self.next()?;
        let (make, symbol): (MakeList, &str) = match t.tok {
            Tok::Plus => (Request::Multi, "+"),
            Tok::Amp => (Request::And, "&"),
            Tok::Pipe => (Request::Or, "|"),
            Tok::Str { text, .. } => {
                return Ok(Request::Relation(self.relation(text, t.pos, depth)?));
            }
            _ => {
                return Err(SpecError::syntax(
                    t.pos,
                    format!(
                        "expected a request: `+`, `&`, `|` or a relation such as `count=4` \
                         (found {})",
                        t.describe()
                    ),
                ))
            }
        };
        let mut items = Vec::new();
        loop {
            let open = self.peek()?;
            if open.tok != Tok::LParen {
                break;
            }
            self.next()?;
            let inner = Self::deeper(depth, open.pos)?;
            items.push(self.request(inner)?);
            self.close(open.pos)?;
        }
        if items.is_empty() {
            let t = self.peek()?;
            return Err(SpecError::syntax(
                t.pos,
                format!(
                    "expected `(` to start the first request after `{symbol}` (found {})",
                    t.describe()
                ),
            ));
        }
        Ok(make(items))
    }

    fn relation(&mut self, attr: String, pos: Pos, depth: usize) -> Result<Relation, SpecError> {
        let t = self.next()?;
        let Tok::Op(op) = t.tok else {
            return Err(SpecError::syntax(
                t.pos,
                format!(
                    "expected an operator (`=`, `!=`, `<`, `<=`, `>`, `>=`) after `{}` \
                     (found {})",
                    short(&attr),
                    t.describe()
                ),
            ));
        };
        let values = self.values(depth)?;
        if values.is_empty() {
            let t = self.peek()?;
            return Err(SpecError::syntax(
                t.pos,
                format!(
                    "expected a value after `{}{op}` (found {})",
                    short(&attr),
                    t.describe()
                ),
            ));
        }
        Ok(Relation {
            attr,
            op,
            values,
            pos,
        })
    }

    /// Values up to (not including) the next token that cannot start one.
    fn values(&mut self, depth: usize) -> Result<Vec<RslValue>, SpecError> {
        let mut out = Vec::new();
        loop {
            let t = self.peek()?;
            match t.tok {
                Tok::LParen => {
                    self.next()?;
                    let inner = Self::deeper(depth, t.pos)?;
                    let seq = self.values(inner)?;
                    let after = self.peek()?;
                    if let Tok::Op(op) = after.tok {
                        // `(a=1(b=2)`: a relation where a value was expected.
                        return Err(SpecError::syntax(
                            after.pos,
                            format!(
                                "expected `)` to close the `(` at {} (found `{op}`): a value \
                                 sequence holds no relations; is a `)` missing before that `(`?",
                                t.pos
                            ),
                        ));
                    }
                    self.close(t.pos)?;
                    out.push(RslValue::Seq(seq));
                }
                Tok::Str { .. } | Tok::VarOpen => out.push(self.concatenation()?),
                Tok::Hash => {
                    return Err(SpecError::syntax(
                        t.pos,
                        "`#` joins two strings or `$(NAME)` references: write one on each side \
                         (a sequence cannot be joined)",
                    ))
                }
                _ => return Ok(out),
            }
        }
    }

    /// One or more simple values joined by `#` or written without whitespace between.
    fn concatenation(&mut self) -> Result<RslValue, SpecError> {
        let mut parts = vec![self.simple()?];
        loop {
            let t = self.peek()?;
            match t.tok {
                Tok::Hash => {
                    self.next()?;
                    let after = self.peek()?;
                    if !matches!(after.tok, Tok::Str { .. } | Tok::VarOpen) {
                        return Err(SpecError::syntax(
                            after.pos,
                            format!(
                                "expected a string or `$(NAME)` after `#` (found {})",
                                after.describe()
                            ),
                        ));
                    }
                    parts.push(self.simple()?);
                }
                Tok::Str { .. } | Tok::VarOpen if !t.spaced => parts.push(self.simple()?),
                _ => break,
            }
        }
        if parts.len() == 1 {
            if let Some(only) = parts.pop() {
                return Ok(only);
            }
        }
        Ok(RslValue::Concat(parts))
    }

    /// A string or a `$(NAME)` reference.
    fn simple(&mut self) -> Result<RslValue, SpecError> {
        let t = self.next()?;
        match t.tok {
            Tok::Str { text, .. } => Ok(RslValue::Literal(text)),
            Tok::VarOpen => {
                let name = self.next()?;
                let Tok::Str { text, .. } = name.tok else {
                    return Err(SpecError::syntax(
                        name.pos,
                        format!(
                            "expected a variable name after `$(` (found {})",
                            name.describe()
                        ),
                    ));
                };
                let close = self.next()?;
                if close.tok != Tok::RParen {
                    return Err(SpecError::syntax(
                        close.pos,
                        format!(
                            "expected `)` to close the `$(` at {} (found {})",
                            t.pos,
                            close.describe()
                        ),
                    ));
                }
                Ok(RslValue::VarRef(text))
            }
            _ => Err(SpecError::syntax(
                t.pos,
                format!("expected a string or `$(NAME)` (found {})", t.describe()),
            )),
        }
    }
}
