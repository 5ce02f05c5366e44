//! The syntax tree of a Globus RSL specification (seed 003 §2.2.4): requests, relations and
//! values exactly as written, with the position of every relation.
//!
//! The tree says nothing about jobs; [`super::job_from_rsl`] gives it a meaning. Variable
//! references and concatenations stay in the tree until [`super::expand()`] resolves them.

use crate::error::Pos;
use crate::model::RelOp;

/// A request: the whole specification, a component, or one of its parts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Request {
    /// `+(r1)(r2)…`: a multirequest, one component per element (DUROC's subjobs).
    Multi(Vec<Request>),
    /// `&(r1)(r2)…`: a conjunction; every part holds.
    And(Vec<Request>),
    /// `|(r1)(r2)…`: a disjunction; one of the parts holds.
    Or(Vec<Request>),
    /// `attribute op values`.
    Relation(Relation),
}

/// Builds a request list of one kind: `Request::Multi`, `Request::And` or `Request::Or`.
pub(super) type MakeList = fn(Vec<Request>) -> Request;

/// `attribute op value…`, such as `(arguments= "8" "4")` or `(memory>=64)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Relation {
    /// The attribute name as written (without quotes).
    pub attr: String,
    pub op: RelOp,
    /// The value sequence; the parser never produces an empty one.
    pub values: Vec<RslValue>,
    /// Where the attribute name starts.
    pub pos: Pos,
}

/// One value of a relation's value sequence.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RslValue {
    /// A string, quoted or not in the text.
    Literal(String),
    /// `(v1 v2 …)`: a nested sequence, such as `(LD_LIBRARY_PATH /usr/lib)`.
    Seq(Vec<RslValue>),
    /// `$(NAME)`: a variable defined by `rslSubstitution`.
    VarRef(String),
    /// Strings and references written next to each other (`$(URLBASE)/dir`) or joined with
    /// `#`; the parser produces two or more parts, none of them a sequence.
    Concat(Vec<RslValue>),
}

impl Request {
    /// The same tree with every position set to `Pos::default()`, for comparing trees.
    pub fn erase_positions(&self) -> Request {
        match self {
            Request::Multi(items) => {
                Request::Multi(items.iter().map(Self::erase_positions).collect())
            }
            Request::And(items) => Request::And(items.iter().map(Self::erase_positions).collect()),
            Request::Or(items) => Request::Or(items.iter().map(Self::erase_positions).collect()),
            Request::Relation(r) => Request::Relation(Relation {
                pos: Pos::default(),
                ..r.clone()
            }),
        }
    }

    /// The position of the first relation in this request, in text order.
    pub fn first_pos(&self) -> Option<Pos> {
        match self {
            Request::Multi(items) | Request::And(items) | Request::Or(items) => {
                items.iter().find_map(Self::first_pos)
            }
            Request::Relation(r) => Some(r.pos),
        }
    }
}

impl Relation {
    /// A relation at the default position (for building trees in code and tests).
    pub fn new(attr: impl Into<String>, op: RelOp, values: Vec<RslValue>) -> Relation {
        Relation {
            attr: attr.into(),
            op,
            values,
            pos: Pos::default(),
        }
    }
}

impl RslValue {
    /// A literal value.
    pub fn lit(s: impl Into<String>) -> RslValue {
        RslValue::Literal(s.into())
    }
}
