//! Tokens of Globus RSL (seed 003 §2.2.4, with the lexical rules of the Globus RSL scanner):
//! parentheses, `+ & |`, the six relation operators, `#`, `$(`, and strings.
//!
//! A string is an unquoted run of characters other than whitespace and the specials
//! [`SPECIALS`], a `"…"` or `'…'` string in which a doubled quote stands for one quote, or
//! Globus' user-delimited `^Xtext X` form. Comments `(* … *)` count as whitespace. Each token
//! records whether whitespace or a comment came right before it, so that the parser can tell
//! `$(URLBASE)/dir` (one concatenated value) from `$(URLBASE) /dir` (two values).

use crate::error::{Pos, SpecError};
use crate::model::RelOp;

/// Characters that end an unquoted string.
pub const SPECIALS: &str = "+&|()=<>!\"'^#$";

/// Whether `c` may appear in an unquoted string.
pub fn is_plain(c: char) -> bool {
    !c.is_whitespace() && !SPECIALS.contains(c)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    LParen,
    RParen,
    Plus,
    Amp,
    Pipe,
    Hash,
    /// `$(`, the start of a variable reference.
    VarOpen,
    Op(RelOp),
    Str {
        text: String,
        quoted: bool,
    },
    Eof,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub tok: Tok,
    /// Where the token starts (for `Eof`: the end of the input).
    pub pos: Pos,
    /// Whitespace or a comment separates this token from the one before.
    pub spaced: bool,
}

impl Token {
    /// The token as an error message names it: "`)`", "the string \"a b\"", "end of input".
    pub fn describe(&self) -> String {
        match &self.tok {
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::Plus => "`+`".into(),
            Tok::Amp => "`&`".into(),
            Tok::Pipe => "`|`".into(),
            Tok::Hash => "`#`".into(),
            Tok::VarOpen => "`$(`".into(),
            Tok::Op(op) => format!("`{op}`"),
            Tok::Str { text, quoted } => {
                let short: String = text.chars().take(40).collect();
                let dots = if short.len() < text.len() { "…" } else { "" };
                if *quoted {
                    format!("the string \"{short}{dots}\"")
                } else {
                    format!("`{short}{dots}`")
                }
            }
            Tok::Eof => "end of input".into(),
        }
    }
}

pub struct Lexer<'a> {
    text: &'a str,
    /// Byte offset of the next character.
    at: usize,
    line: u32,
    col: u32,
}

impl<'a> Lexer<'a> {
    pub fn new(text: &'a str) -> Self {
        Lexer {
            text,
            at: 0,
            line: 1,
            col: 1,
        }
    }

    fn pos(&self) -> Pos {
        Pos::new(self.line, self.col)
    }

    fn peek(&self) -> Option<char> {
        self.text.get(self.at..).and_then(|s| s.chars().next())
    }

    fn peek2(&self) -> Option<char> {
        self.text.get(self.at..).and_then(|s| s.chars().nth(1))
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += c.len_utf8();
        if c == '\n' {
            self.line = self.line.saturating_add(1);
            self.col = 1;
        } else {
            self.col = self.col.saturating_add(1);
        }
        Some(c)
    }

    /// Skip whitespace and comments; true when anything was skipped.
    fn skip_blank(&mut self) -> Result<bool, SpecError> {
        let start = self.at;
        loop {
            match self.peek() {
                Some(c) if c.is_whitespace() => {
                    self.bump();
                }
                Some('(') if self.peek2() == Some('*') => {
                    let open = self.pos();
                    self.bump();
                    self.bump();
                    loop {
                        match self.bump() {
                            Some('*') if self.peek() == Some(')') => {
                                self.bump();
                                break;
                            }
                            Some(_) => {}
                            None => {
                                return Err(SpecError::syntax(
                                    open,
                                    "unterminated comment: this `(*` has no closing `*)`",
                                ))
                            }
                        }
                    }
                }
                _ => return Ok(self.at != start),
            }
        }
    }

    pub fn next_token(&mut self) -> Result<Token, SpecError> {
        let spaced = self.skip_blank()?;
        let pos = self.pos();
        let token = |tok| Ok(Token { tok, pos, spaced });
        let Some(c) = self.peek() else {
            return token(Tok::Eof);
        };
        let single = match c {
            '(' => Some(Tok::LParen),
            ')' => Some(Tok::RParen),
            '+' => Some(Tok::Plus),
            '&' => Some(Tok::Amp),
            '|' => Some(Tok::Pipe),
            '#' => Some(Tok::Hash),
            _ => None,
        };
        if let Some(tok) = single {
            self.bump();
            return token(tok);
        }
        match c {
            '$' => {
                self.bump();
                if self.peek() == Some('(') {
                    self.bump();
                    token(Tok::VarOpen)
                } else {
                    Err(SpecError::syntax(
                        pos,
                        format!(
                            "expected `(` after `$` to start a variable reference `$(NAME)` \
                             (found {})",
                            self.describe_char()
                        ),
                    ))
                }
            }
            '=' | '<' | '>' | '!' => {
                self.bump();
                let eq = self.peek() == Some('=');
                let op = match (c, eq) {
                    ('=', _) => RelOp::Eq,
                    ('<', false) => RelOp::Lt,
                    ('>', false) => RelOp::Gt,
                    ('<', true) => RelOp::Le,
                    ('>', true) => RelOp::Ge,
                    ('!', true) => RelOp::Ne,
                    _ => {
                        return Err(SpecError::syntax(
                            pos,
                            format!(
                                "expected `!=` (found `!` followed by {})",
                                self.describe_char()
                            ),
                        ))
                    }
                };
                if eq && c != '=' {
                    self.bump();
                }
                token(Tok::Op(op))
            }
            '"' | '\'' => {
                let text = self.quoted(c, pos)?;
                token(Tok::Str { text, quoted: true })
            }
            '^' => {
                self.bump();
                let Some(delim) = self.bump() else {
                    return Err(SpecError::syntax(
                        pos,
                        "expected a delimiter character after `^` (found end of input)",
                    ));
                };
                let text = self.until_delim(delim, pos, &format!("^{delim}"))?;
                token(Tok::Str { text, quoted: true })
            }
            _ => {
                let start = self.at;
                while self.peek().is_some_and(is_plain) {
                    self.bump();
                }
                let text = self.text.get(start..self.at).unwrap_or_default().to_owned();
                token(Tok::Str {
                    text,
                    quoted: false,
                })
            }
        }
    }

    /// The next character as an error message names it.
    fn describe_char(&self) -> String {
        match self.peek() {
            None => "end of input".into(),
            Some(c) if c.is_whitespace() => "whitespace".into(),
            Some(c) => format!("`{c}`"),
        }
    }

    /// A string in `quote`s starting at `pos`; the cursor is on the opening quote.
    fn quoted(&mut self, quote: char, pos: Pos) -> Result<String, SpecError> {
        self.bump();
        self.until_delim(quote, pos, &quote.to_string())
    }

    /// The text up to the closing `delim`; a doubled `delim` stands for one.
    fn until_delim(&mut self, delim: char, pos: Pos, opener: &str) -> Result<String, SpecError> {
        let mut text = String::new();
        loop {
            match self.bump() {
                Some(c) if c == delim => {
                    if self.peek() == Some(delim) {
                        self.bump();
                        text.push(delim);
                    } else {
                        return Ok(text);
                    }
                }
                Some(c) => text.push(c),
                None => {
                    return Err(SpecError::syntax(
                        pos,
                        format!("unterminated string: this `{opener}` has no closing `{delim}`"),
                    ))
                }
            }
        }
    }
}
