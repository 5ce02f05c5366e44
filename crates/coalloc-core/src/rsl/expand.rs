//! Globus RSL variable substitution (seed 003 §2.2.4, the `rslSubstitution` example):
//! `(rslSubstitution=(NAME value)…)` defines variables, `$(NAME)` uses them, and
//! concatenations become plain strings.
//!
//! Scope: a definition is visible to the relations after it in the same request list
//! (conjunction, disjunction or multirequest) and to every request nested in those; a
//! definition may use earlier ones, and a later definition of a name hides an earlier one.
//! Definitions inside a nested request do not leak out of it. Variable names are
//! case-sensitive; the attribute name `rslSubstitution` is compared as every attribute name
//! is (see [`canonical_attribute`]).
//!
//! The variables a GRAM job manager defines where the job lands ([`SITE_VARIABLES`]:
//! `$(HOME)`, `$(LOGNAME)`, `$(SCRATCH_DIRECTORY)`) are kept as text when the request does
//! not define them: they are expanded at the site the component runs on
//! (`coalloc_backends::site_vars`), not refused here.

use super::ast::{MakeList, Relation, Request, RslValue};
use super::print::value_shown;
use crate::error::SpecError;
use crate::spec::validate::canonical_attribute;
use std::collections::BTreeMap;

/// The most text substitution may produce in all, so that definitions that double each
/// other cannot exhaust memory.
pub const MAX_EXPANDED_BYTES: usize = 4 << 20;

const FIELD: &str = "rslSubstitution";

/// Variables a site defines (GRAM's job manager did): left for the site to expand.
pub const SITE_VARIABLES: [&str; 3] = ["HOME", "LOGNAME", "SCRATCH_DIRECTORY"];

/// Whether a relation defines variables.
pub fn is_substitution(r: &Relation) -> bool {
    canonical_attribute(&r.attr) == "rslsubstitution"
}

/// Apply every `rslSubstitution`: remove those relations and replace each `$(NAME)` and
/// each concatenation by the string it stands for.
pub fn expand(request: &Request) -> Result<Request, SpecError> {
    let mut x = Expander {
        budget: MAX_EXPANDED_BYTES,
        vars: BTreeMap::new(),
        defined: Vec::new(),
    };
    x.request(request)
}

struct Expander {
    /// Bytes substitution may still produce.
    budget: usize,
    /// Every definition in scope, the innermost (latest) last for each name.
    vars: BTreeMap<String, Vec<String>>,
    /// The names defined, in order, so that leaving a request list can undo its definitions.
    defined: Vec<String>,
}

impl Expander {
    fn request(&mut self, request: &Request) -> Result<Request, SpecError> {
        let (items, make): (&[Request], MakeList) = match request {
            Request::Relation(r) if is_substitution(r) => {
                return Err(SpecError::invalid_at(
                    r.pos,
                    FIELD,
                    "the specification is nothing but an rslSubstitution relation",
                ))
            }
            Request::Relation(r) => return Ok(Request::Relation(self.relation(r)?)),
            Request::Multi(items) => (items, Request::Multi),
            Request::And(items) => (items, Request::And),
            Request::Or(items) => (items, Request::Or),
        };
        let scope = self.defined.len();
        let mut out = Vec::new();
        let mut first_definition = None;
        for item in items {
            match item {
                Request::Relation(r) if is_substitution(r) => {
                    first_definition.get_or_insert(r.pos);
                    self.define(r)?;
                }
                _ => out.push(self.request(item)?),
            }
        }
        self.leave(scope);
        match (out.is_empty(), first_definition) {
            (true, Some(pos)) => Err(SpecError::invalid_at(
                pos,
                FIELD,
                "this request holds nothing but rslSubstitution relations, which leaves it empty",
            )),
            _ => Ok(make(out)),
        }
    }

    fn relation(&mut self, r: &Relation) -> Result<Relation, SpecError> {
        let values = r
            .values
            .iter()
            .map(|v| self.value(v, r))
            .collect::<Result<_, _>>()?;
        Ok(Relation {
            attr: r.attr.clone(),
            op: r.op,
            values,
            pos: r.pos,
        })
    }

    fn value(&mut self, v: &RslValue, r: &Relation) -> Result<RslValue, SpecError> {
        Ok(match v {
            RslValue::Literal(s) => RslValue::Literal(s.clone()),
            RslValue::Seq(items) => RslValue::Seq(
                items
                    .iter()
                    .map(|i| self.value(i, r))
                    .collect::<Result<_, _>>()?,
            ),
            RslValue::VarRef(_) | RslValue::Concat(_) => RslValue::Literal(self.string(v, r)?),
        })
    }

    /// The string a simple value stands for.
    fn string(&mut self, v: &RslValue, r: &Relation) -> Result<String, SpecError> {
        match v {
            RslValue::Literal(s) => Ok(s.clone()),
            RslValue::VarRef(name) => {
                let defined = self.vars.get(name).and_then(|v| v.last()).cloned();
                let site = SITE_VARIABLES
                    .contains(&name.as_str())
                    .then(|| format!("$({name})"));
                let Some(value) = defined.or(site) else {
                    return Err(SpecError::invalid_at(
                        r.pos,
                        FIELD,
                        format!(
                            "variable `{name}` is not defined (used in `{}`): define it before \
                             its use with (rslSubstitution=({name} value))",
                            r.attr
                        ),
                    ));
                };
                self.budget = self.budget.checked_sub(value.len()).ok_or_else(|| {
                    SpecError::invalid_at(
                        r.pos,
                        FIELD,
                        format!(
                            "the variables expand to more than {MAX_EXPANDED_BYTES} bytes of text"
                        ),
                    )
                })?;
                Ok(value)
            }
            RslValue::Concat(parts) => {
                let mut out = String::new();
                for part in parts {
                    out.push_str(&self.string(part, r)?);
                }
                Ok(out)
            }
            RslValue::Seq(_) => Err(SpecError::invalid_at(
                r.pos,
                r.attr.clone(),
                format!(
                    "a sequence cannot be part of a string: `{}`",
                    value_shown(v)
                ),
            )),
        }
    }

    /// Forget the definitions made since `self.defined` had length `scope`.
    fn leave(&mut self, scope: usize) {
        while self.defined.len() > scope {
            let Some(name) = self.defined.pop() else {
                break;
            };
            if let Some(values) = self.vars.get_mut(&name) {
                values.pop();
                if values.is_empty() {
                    self.vars.remove(&name);
                }
            }
        }
    }

    /// Bring the definitions of an `rslSubstitution` relation into scope.
    fn define(&mut self, r: &Relation) -> Result<(), SpecError> {
        let bad = |rule: String| SpecError::invalid_at(r.pos, FIELD, rule);
        if r.op != crate::model::RelOp::Eq {
            return Err(bad(format!("takes `=` (found `{}`)", r.op)));
        }
        for v in &r.values {
            let pair = match v {
                RslValue::Seq(pair) => pair.as_slice(),
                _ => &[],
            };
            let [name, value] = pair else {
                return Err(bad(format!(
                    "each definition is a pair `(NAME value)`, such as \
                     (rslSubstitution=(URLBASE \"ftp://host:1234\")); found `{}`",
                    value_shown(v)
                )));
            };
            let name = match name {
                RslValue::Seq(_) => None,
                simple => Some(self.string(simple, r)?),
            };
            let value = match value {
                RslValue::Seq(_) => None,
                simple => Some(self.string(simple, r)?),
            };
            let (Some(name), Some(value)) = (name, value) else {
                return Err(bad(format!(
                    "a definition names one variable and gives it one string; found `{}`",
                    value_shown(v)
                )));
            };
            if name.is_empty() {
                return Err(bad("a variable name must not be empty".into()));
            }
            self.vars.entry(name.clone()).or_default().push(value);
            self.defined.push(name);
        }
        Ok(())
    }
}
