//! From an expanded RSL request to a [`Job`] (seed 003 §3.2.1 and appendix B for ordered and
//! unordered jobs, seed 002 §3.2 and figure 1 for `subjobStartType`).
//!
//! A `+` multirequest is a job with one component per `&` element; a single `&` is a
//! one-component job — a total job when it names no `resourceManagerContact`. Attribute names
//! compare as Globus compares them ([`canonical_attribute`]). The attributes coalloc understands
//! (`resourceManagerContact`, `count`, `executable`, `arguments`, `environment`, `directory`,
//! `maxWallTime`, `label`, `jobtype`, `subjobStartType`) fill the component's fields; every
//! other relation is kept verbatim as an [`Attribute`].

use super::ast::{Relation, Request, RslValue};
use super::print::value_shown;
use crate::error::{Pos, SpecError};
use crate::model::{Attribute, Component, Job, JobKind, JobType, RelOp, StartType, Value, MINUTE};
use crate::spec::validate::{canonical_attribute, component_field, infer_kind};
use std::collections::BTreeMap;

/// The attributes coalloc interprets: (canonical form, name as coalloc writes it).
pub const KNOWN: [(&str, &str); 10] = [
    ("resourcemanagercontact", "resourceManagerContact"),
    ("count", "count"),
    ("executable", "executable"),
    ("arguments", "arguments"),
    ("environment", "environment"),
    ("directory", "directory"),
    ("maxwalltime", "maxWallTime"),
    ("label", "label"),
    ("jobtype", "jobtype"),
    ("subjobstarttype", "subjobStartType"),
];

/// The name coalloc writes for an attribute it interprets, if `attr` is one.
pub fn known_name(attr: &str) -> Option<&'static str> {
    let canon = canonical_attribute(attr);
    KNOWN.iter().find(|(c, _)| *c == canon).map(|(_, n)| *n)
}

/// The job an expanded request describes, with the position where each component starts.
/// `expect` is the kind the file name promises (`.rsl` ordered, `.uno` unordered).
pub fn job_from_request(
    request: &Request,
    expect: Option<JobKind>,
) -> Result<(Job, Vec<Pos>), SpecError> {
    let (elements, single) = elements_of(request)?;
    let mut components = Vec::new();
    let mut positions = Vec::new();
    for (i, element) in elements.iter().enumerate() {
        let pos = element.first_pos().unwrap_or_default();
        let relations = match element {
            Request::And(items) => {
                let mut relations = Vec::new();
                flatten(items, i, pos, &mut relations)?;
                relations
            }
            Request::Relation(r) => {
                return Err(SpecError::invalid_at(
                    r.pos,
                    component_field(i, ""),
                    format!(
                        "each element of a `+` multirequest is a component `&(…)(…)`; found \
                         the bare relation `{}`",
                        r.attr
                    ),
                ))
            }
            Request::Or(_) => return Err(disjunction(i, pos)),
            Request::Multi(_) => return Err(nested_multi(i, pos)),
        };
        components.push(component(i, &relations)?);
        positions.push(pos);
    }
    let kind = kind_of(&components, &positions, single, expect)?;
    Ok((Job::new(kind, components), positions))
}

/// The components of the job, and whether it was written as a single `&`.
fn elements_of(request: &Request) -> Result<(Vec<&Request>, bool), SpecError> {
    match request {
        Request::Multi(items) => Ok((items.iter().collect(), false)),
        // `&(+(…)(…))`: what remains of a multirequest wrapped in a conjunction of
        // substitutions.
        Request::And(items) => match items.as_slice() {
            [inner @ Request::Multi(_)] => elements_of(inner),
            _ => Ok((vec![request], true)),
        },
        Request::Or(_) => Err(disjunction(0, request.first_pos().unwrap_or_default())),
        Request::Relation(r) => Err(SpecError::invalid_at(
            r.pos,
            "request",
            format!(
                "an RSL job is a conjunction `&(…)(…)` or a multirequest \
                 `+(&(…))(&(…))` of them; found the bare relation `{}`",
                r.attr
            ),
        )),
    }
}

fn disjunction(i: usize, pos: Pos) -> SpecError {
    SpecError::invalid_at(
        pos,
        component_field(i, ""),
        format!(
            "component {i} holds a disjunction `|`, which offers alternatives, but coalloc needs \
             one count per component: pick one alternative and write its relations into the \
             component"
        ),
    )
}

fn nested_multi(i: usize, pos: Pos) -> SpecError {
    SpecError::invalid_at(
        pos,
        component_field(i, ""),
        format!(
            "component {i} holds a multirequest `+`; a multirequest may only be the whole \
             specification"
        ),
    )
}

/// The relations of a component, with nested conjunctions flattened.
fn flatten<'a>(
    items: &'a [Request],
    i: usize,
    pos: Pos,
    out: &mut Vec<&'a Relation>,
) -> Result<(), SpecError> {
    for item in items {
        match item {
            Request::Relation(r) => out.push(r),
            Request::And(inner) => flatten(inner, i, pos, out)?,
            Request::Or(_) => return Err(disjunction(i, item.first_pos().unwrap_or(pos))),
            Request::Multi(_) => return Err(nested_multi(i, item.first_pos().unwrap_or(pos))),
        }
    }
    Ok(())
}

fn component(i: usize, relations: &[&Relation]) -> Result<Component, SpecError> {
    let mut c = Component {
        // GRAM's default.
        count: 1,
        job_type: JobType::Multiple,
        ..Component::default()
    };
    let mut seen: BTreeMap<&str, Pos> = BTreeMap::new();
    for r in relations {
        let Some(name) = known_name(&r.attr) else {
            c.details_mut().attributes.push(Attribute {
                name: r.attr.clone(),
                op: r.op,
                values: r
                    .values
                    .iter()
                    .map(|v| model_value(v, r))
                    .collect::<Result<_, _>>()?,
            });
            continue;
        };
        let field = component_field(i, name);
        let bad = |rule: String| SpecError::invalid_at(r.pos, field.clone(), rule);
        if let Some(first) = seen.insert(name, r.pos) {
            return Err(bad(format!(
                "is given twice in component {i} (first at {first})"
            )));
        }
        if r.op != RelOp::Eq {
            let why = if name == "count" {
                ": coalloc needs the exact number of processors"
            } else {
                ""
            };
            return Err(bad(format!("takes `=` (found `{}`){why}", r.op)));
        }
        match name {
            "arguments" => {
                for v in &r.values {
                    match v {
                        RslValue::Literal(s) => c.details_mut().arguments.push(s.clone()),
                        _ => {
                            return Err(bad(format!(
                                "takes strings, not sequences (found `{}`)",
                                value_shown(v)
                            )))
                        }
                    }
                }
            }
            "environment" => {
                for v in &r.values {
                    match v {
                        RslValue::Seq(pair) => match pair.as_slice() {
                            [RslValue::Literal(k), RslValue::Literal(val)] => {
                                c.details_mut().environment.push((k.clone(), val.clone()))
                            }
                            _ => return Err(bad(env_rule(v))),
                        },
                        _ => return Err(bad(env_rule(v))),
                    }
                }
            }
            _ => {
                let s = single(r).map_err(bad)?;
                match name {
                    "resourceManagerContact" => c.site = Some(s.into()),
                    "count" => c.count = count(s).map_err(bad)?,
                    "executable" => c.details_mut().executable = Some(s.to_owned()),
                    "directory" => c.details_mut().directory = Some(s.to_owned()),
                    "label" => c.details_mut().label = Some(s.to_owned()),
                    "maxWallTime" => c.details_mut().max_wall_time = Some(minutes(s).map_err(bad)?),
                    "jobtype" => c.job_type = JobType::from_name(s).map_err(bad)?,
                    "subjobStartType" => c.start_type = StartType::from_name(s).map_err(bad)?,
                    _ => {}
                }
            }
        }
    }
    Ok(c)
}

fn env_rule(v: &RslValue) -> String {
    format!(
        "takes pairs `(NAME value)`, such as (environment=(LD_LIBRARY_PATH /usr/lib)); found `{}`",
        value_shown(v)
    )
}

/// The one string of a relation that takes one.
fn single(r: &Relation) -> Result<&str, String> {
    match r.values.as_slice() {
        [RslValue::Literal(s)] => Ok(s),
        [v] => Err(format!(
            "takes one string, not a sequence (found `{}`)",
            value_shown(v)
        )),
        values => Err(format!(
            "takes one value (found {}: {})",
            values.len(),
            values.iter().map(value_shown).collect::<Vec<_>>().join(" ")
        )),
    }
}

fn whole_number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Digits only: the parse fails only on overflow.
    Some(s.parse::<u64>().unwrap_or(u64::MAX))
}

fn count(s: &str) -> Result<u32, String> {
    match whole_number(s) {
        None => Err(format!(
            "must be a whole number of processors (found `{s}`)"
        )),
        Some(0) => Err("must be at least 1 (got 0)".into()),
        Some(n) => u32::try_from(n).map_err(|_| format!("is too large (at most {})", u32::MAX)),
    }
}

fn minutes(s: &str) -> Result<i64, String> {
    match whole_number(s) {
        None => Err(format!("must be a whole number of minutes (found `{s}`)")),
        Some(0) => Err("must be at least 1 minute (got 0)".into()),
        Some(n) => i64::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(MINUTE))
            .ok_or_else(|| format!("is too large (at most {} minutes)", i64::MAX / MINUTE)),
    }
}

fn model_value(v: &RslValue, r: &Relation) -> Result<Value, SpecError> {
    match v {
        RslValue::Literal(s) => Ok(Value::Str(s.clone())),
        RslValue::Seq(items) => Ok(Value::Seq(
            items
                .iter()
                .map(|i| model_value(i, r))
                .collect::<Result<_, _>>()?,
        )),
        RslValue::VarRef(_) | RslValue::Concat(_) => Err(SpecError::invalid_at(
            r.pos,
            r.attr.clone(),
            format!("`{}` is left unexpanded", value_shown(v)),
        )),
    }
}

fn kind_of(
    components: &[Component],
    positions: &[Pos],
    single: bool,
    expect: Option<JobKind>,
) -> Result<JobKind, SpecError> {
    let at = |i: usize| positions.get(i).copied().unwrap_or_default();
    let field = |i: usize| component_field(i, "resourceManagerContact");
    let without = components.iter().position(|c| c.site.is_none());
    let with = components
        .iter()
        .enumerate()
        .find_map(|(i, c)| c.site.as_deref().map(|s| (i, s)));
    match (expect, without, with) {
        (Some(JobKind::Ordered), Some(i), _) => {
            return Err(SpecError::invalid_at(
                at(i),
                field(i),
                format!(
                    "a .rsl file holds an ordered job: component {i} names no \
                     resourceManagerContact (use .uno for unordered jobs)"
                ),
            ))
        }
        (Some(JobKind::Unordered | JobKind::Total), _, Some((i, site))) => {
            return Err(SpecError::invalid_at(
                at(i),
                field(i),
                format!(
                    "a .uno file holds an unordered job: component {i} names \
                     resourceManagerContact `{site}` (use .rsl for ordered jobs)"
                ),
            ))
        }
        (Some(JobKind::Flexible), _, _) => {
            return Err(SpecError::invalid(
                "request",
                "RSL cannot describe a flexible job (it has no total to split over sites); \
                 use the native TOML or JSON spec",
            ))
        }
        _ => {}
    }
    let kind = if single && with.is_none() {
        JobKind::Total
    } else {
        infer_kind(components.iter().map(|c| c.site.as_deref()))
            .map_err(|e| e.at(at(without.unwrap_or(0))))?
    };
    if expect == Some(JobKind::Total) && kind != JobKind::Total {
        return Err(SpecError::invalid(
            "request",
            "expected a total job: a single `&(…)` request without resourceManagerContact",
        ));
    }
    Ok(kind)
}
