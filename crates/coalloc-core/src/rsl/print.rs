//! The canonical RSL printer (seed 003 §2.2.4): one relation per line inside a conjunction,
//! multirequest components as indented blocks in the layout of seed 003 appendix B, strings
//! quoted only when they must be.
//!
//! For every tree the parser can produce, `parse(&print(r))` gives `r` back (positions
//! aside). Trees the parser never produces — an empty request list, a relation without values,
//! a concatenation of fewer than two parts or containing a sequence — are printed as well as
//! they can be but need not read back.

use super::ast::{Relation, Request, RslValue};
use super::lexer::is_plain;
use std::fmt::Write;

/// The specification as canonical text, ending in a newline.
pub fn print(request: &Request) -> String {
    let mut out = String::new();
    write_request(&mut out, request, 0);
    out.push('\n');
    out
}

/// A string as RSL writes it: bare when it can be, otherwise in double quotes with inner
/// double quotes doubled.
pub fn quote(s: &str) -> String {
    let bare =
        !s.is_empty() && !s.starts_with('*') && s.chars().all(|c| is_plain(c) && !c.is_control());
    if bare {
        s.to_owned()
    } else {
        format!("\"{}\"", s.replace('"', "\"\""))
    }
}

fn newline(out: &mut String, indent: usize) {
    out.push('\n');
    out.push_str(&" ".repeat(indent));
}

/// Write `request` starting at column `indent` (continuation lines are indented to match).
fn write_request(out: &mut String, request: &Request, indent: usize) {
    match request {
        Request::Relation(r) => write_relation(out, r),
        Request::Multi(items) => {
            out.push('+');
            for item in items {
                newline(out, indent);
                if let Request::Relation(r) = item {
                    out.push('(');
                    write_relation(out, r);
                    out.push(')');
                } else {
                    out.push_str("( ");
                    write_request(out, item, indent + 2);
                    newline(out, indent);
                    out.push(')');
                }
            }
        }
        Request::And(items) | Request::Or(items) => {
            out.push(if matches!(request, Request::And(_)) {
                '&'
            } else {
                '|'
            });
            for (k, item) in items.iter().enumerate() {
                if k > 0 {
                    newline(out, indent + 1);
                }
                out.push('(');
                write_request(out, item, indent + 2);
                out.push(')');
            }
        }
    }
}

fn write_relation(out: &mut String, r: &Relation) {
    out.push_str(&quote(&r.attr));
    out.push_str(r.op.as_str());
    for (k, v) in r.values.iter().enumerate() {
        if k > 0 {
            out.push(' ');
        }
        write_value(out, v);
    }
}

/// One value as text.
pub fn value_text(v: &RslValue) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

/// One value as an error message shows it: its text, cut short if long.
pub fn value_shown(v: &RslValue) -> String {
    let text = value_text(v);
    let cut: String = text.chars().take(60).collect();
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

fn write_value(out: &mut String, v: &RslValue) {
    match v {
        RslValue::Literal(s) => out.push_str(&quote(s)),
        RslValue::VarRef(name) => {
            let _ = write!(out, "$({})", quote(name));
        }
        RslValue::Seq(items) => {
            out.push('(');
            for (k, item) in items.iter().enumerate() {
                if k > 0 {
                    out.push(' ');
                }
                write_value(out, item);
            }
            out.push(')');
        }
        RslValue::Concat(parts) if parts.is_empty() => out.push_str("\"\""),
        RslValue::Concat(parts) => {
            let mut previous_literal = false;
            for part in parts {
                let literal = matches!(part, RslValue::Literal(_));
                if literal && previous_literal {
                    // Two strings side by side would read as one: join them explicitly.
                    out.push_str(" # ");
                }
                write_value(out, part);
                previous_literal = literal;
            }
        }
    }
}
