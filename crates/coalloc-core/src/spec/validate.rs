//! The rules every job obeys, whatever format it came in (seed 003 §3.2.1 for job kinds,
//! seed 002 §3.2 for start types, seed 001 §2.2 for deadlines).
//!
//! Readers build a [`Job`] and call [`validate`]; a job that passes is what the scheduler
//! may assume. Errors name the field (`component[2].count`) and the rule broken.

use crate::error::{Pos, SpecError};
use crate::model::{Component, Job, JobKind};
use std::collections::BTreeMap;

/// RSL attribute names coalloc interprets, in canonical form (see [`canonical_attribute`]).
/// A pass-through attribute may not use one of them.
pub const INTERPRETED_ATTRIBUTES: [&str; 11] = [
    "resourcemanagercontact",
    "count",
    "executable",
    "arguments",
    "environment",
    "directory",
    "maxwalltime",
    "label",
    "jobtype",
    "subjobstarttype",
    "rslsubstitution",
];

/// Globus compares attribute names case-insensitively and ignoring underscores:
/// `maxWallTime`, `max_wall_time` and `MAXWALLTIME` are one name.
pub fn canonical_attribute(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Field path of component `i`.
pub fn component_field(i: usize, field: &str) -> String {
    if field.is_empty() {
        format!("component[{i}]")
    } else {
        format!("component[{i}].{field}")
    }
}

/// The kind implied by which components name a site: all → ordered, none → unordered. A mix
/// is an error that names the first component without one.
pub fn infer_kind<'a>(
    sites: impl IntoIterator<Item = Option<&'a str>>,
) -> Result<JobKind, SpecError> {
    let sites: Vec<Option<&str>> = sites.into_iter().collect();
    if sites.is_empty() {
        return Err(empty_job());
    }
    let named = sites.iter().filter(|s| s.is_some()).count();
    if named == 0 {
        Ok(JobKind::Unordered)
    } else if named == sites.len() {
        Ok(JobKind::Ordered)
    } else {
        let i = sites.iter().position(|s| s.is_none()).unwrap_or(0);
        Err(mixed_sites(i))
    }
}

fn empty_job() -> SpecError {
    SpecError::invalid("component", "a job needs at least one component")
}

fn mixed_sites(i: usize) -> SpecError {
    SpecError::invalid(
        component_field(i, "site"),
        format!(
            "component {i} names no site while others do: name a site for every component \
             (ordered) or for none (unordered)"
        ),
    )
}

/// Check every rule; `positions[i]`, when given, is where component `i` starts in the text.
pub fn validate(job: &Job, positions: &[Pos]) -> Result<(), SpecError> {
    let at = |i: usize, e: SpecError| match positions.get(i) {
        Some(p) => e.at(*p),
        None => e,
    };
    if job.components.is_empty() {
        return Err(empty_job());
    }
    for (i, c) in job.components.iter().enumerate() {
        check_component(i, c).map_err(|e| at(i, e))?;
    }
    check_kind(job).map_err(|e| match &e {
        SpecError::Invalid { field, .. } => {
            let i = component_index(field);
            i.map_or(e.clone(), |i| at(i, e))
        }
        _ => e,
    })?;
    let mut labels: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, c) in job.components.iter().enumerate() {
        if let Some(l) = &c.details().label {
            if let Some(first) = labels.insert(l, i) {
                return Err(at(
                    i,
                    SpecError::invalid(
                        component_field(i, "label"),
                        format!("duplicate label `{l}` (component {first} has it too)"),
                    ),
                ));
            }
        }
    }
    if let (Some(submit), Some(deadline)) = (job.submit, job.deadline()) {
        if deadline < submit {
            return Err(SpecError::invalid(
                "deadline",
                format!(
                    "the deadline ({}) is before the submit time ({})",
                    super::format_time(deadline),
                    super::format_time(submit)
                ),
            ));
        }
    }
    for (field, t) in [("submit", job.submit), ("deadline", job.deadline())] {
        if let Some(t) = t {
            if t < 0 {
                return Err(SpecError::invalid(field, "must not be negative"));
            }
        }
    }
    for (field, d) in [
        ("runtime_estimate", job.runtime_estimate),
        ("max_wall_time", job.max_wall_time()),
    ] {
        if let Some(d) = d {
            if d <= 0 {
                return Err(SpecError::invalid(field, "must be longer than zero"));
            }
        }
    }
    if let Some(f) = &job.extra().input_file {
        if f.name.trim().is_empty() {
            return Err(SpecError::invalid(
                "input_file.name",
                "the logical file name must not be empty",
            ));
        }
    }
    Ok(())
}

fn component_index(field: &str) -> Option<usize> {
    let rest = field.strip_prefix("component[")?;
    rest[..rest.find(']')?].parse().ok()
}

fn check_component(i: usize, c: &Component) -> Result<(), SpecError> {
    let f = |name: &str| component_field(i, name);
    if c.count == 0 {
        return Err(SpecError::invalid(f("count"), "must be at least 1 (got 0)"));
    }
    if c.details.is_none() && c.site.is_none() {
        // A count alone (a trace's every job): nothing else to check.
        return Ok(());
    }
    if let Some(w) = c.details().max_wall_time {
        if w <= 0 {
            return Err(SpecError::invalid(
                f("max_wall_time"),
                "must be longer than zero",
            ));
        }
    }
    for (name, value) in [
        ("site", c.site.as_deref()),
        ("label", c.details().label.as_deref()),
    ] {
        if value.is_some_and(|v| v.trim().is_empty()) {
            return Err(SpecError::invalid(f(name), "must not be empty"));
        }
    }
    if c.details()
        .executable
        .as_deref()
        .is_some_and(|v| v.trim().is_empty())
    {
        return Err(SpecError::invalid(f("executable"), "must not be empty"));
    }
    for (j, a) in c.details().attributes.iter().enumerate() {
        let field = f(&format!("attribute[{j}]"));
        let canon = canonical_attribute(&a.name);
        if canon.is_empty() {
            return Err(SpecError::invalid(
                field,
                "the attribute name must not be empty",
            ));
        }
        if INTERPRETED_ATTRIBUTES.contains(&canon.as_str()) {
            return Err(SpecError::invalid(
                field,
                format!(
                    "`{}` is not a pass-through attribute: coalloc interprets it, so set the \
                     component's own field",
                    a.name
                ),
            ));
        }
        if a.values.is_empty() {
            return Err(SpecError::invalid(
                field,
                format!("attribute `{}` has no value", a.name),
            ));
        }
    }
    let mut seen: BTreeMap<&str, ()> = BTreeMap::new();
    for (k, _) in &c.details().environment {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(SpecError::invalid(
                f("environment"),
                format!("`{k}` is not a valid variable name"),
            ));
        }
        if seen.insert(k, ()).is_some() {
            return Err(SpecError::invalid(
                f("environment"),
                format!("variable `{k}` is set twice"),
            ));
        }
    }
    Ok(())
}

fn check_kind(job: &Job) -> Result<(), SpecError> {
    let n = job.components.len();
    match job.kind {
        JobKind::Ordered => {
            if let Some(i) = job.components.iter().position(|c| c.site.is_none()) {
                return Err(SpecError::invalid(
                    component_field(i, "site"),
                    "an ordered job needs a site for every component",
                ));
            }
        }
        JobKind::Unordered | JobKind::Total | JobKind::Flexible => {
            if let Some(i) = job.components.iter().position(|c| c.site.is_some()) {
                return Err(SpecError::invalid(
                    component_field(i, "site"),
                    format!(
                        "a{} {} job leaves the site to the scheduler: remove `site` or make \
                         the job ordered",
                        if job.kind == JobKind::Unordered {
                            "n"
                        } else {
                            ""
                        },
                        job.kind
                    ),
                ));
            }
        }
    }
    match job.kind {
        JobKind::Total if n != 1 => Err(SpecError::invalid(
            "component",
            format!("a total job has exactly one component (got {n})"),
        )),
        JobKind::Flexible => {
            let Some(flex) = job.flexible() else {
                return Err(SpecError::invalid(
                    "total",
                    "a flexible job needs `total`, the number of processors to split over sites",
                ));
            };
            if n != 1 {
                return Err(SpecError::invalid(
                    "component",
                    format!(
                        "a flexible job has exactly one component, the template of every piece \
                         (got {n})"
                    ),
                ));
            }
            if flex.total == 0 {
                return Err(SpecError::invalid("total", "must be at least 1 (got 0)"));
            }
            if job.components[0].count != flex.total {
                return Err(SpecError::invalid(
                    component_field(0, "count"),
                    "a flexible job's pieces get their sizes from the split: leave `count` out",
                ));
            }
            match flex.min_component {
                Some(0) => Err(SpecError::invalid(
                    "min_component",
                    "must be at least 1 (got 0)",
                )),
                Some(m) if m > flex.total => Err(SpecError::invalid(
                    "min_component",
                    format!("is larger than the total ({m} > {})", flex.total),
                )),
                _ => Ok(()),
            }
        }
        _ if job.flexible().is_some() => Err(SpecError::invalid(
            "total",
            format!("only flexible jobs have a total; this job is {}", job.kind),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infers_kinds_and_names_the_component_without_a_site() {
        assert_eq!(infer_kind([Some("a"), Some("b")]), Ok(JobKind::Ordered));
        assert_eq!(infer_kind([None, None]), Ok(JobKind::Unordered));
        let e = infer_kind([Some("a"), None, Some("c")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "component[1].site: component 1 names no site while others do: name a site for \
             every component (ordered) or for none (unordered)"
        );
    }

    #[test]
    fn positions_are_attached_to_component_errors() {
        let job = Job::new(
            JobKind::Unordered,
            vec![
                Component {
                    count: 1,
                    ..Component::default()
                },
                Component::default(),
            ],
        );
        let e = validate(&job, &[Pos::new(1, 1), Pos::new(4, 3)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "4:3: component[1].count: must be at least 1 (got 0)"
        );
    }
}
