//! From a [`Job`] to RSL text (seed 003 §3.2.1: `.rsl` and `.uno` job files; seed 002 §3.2
//! for `subjobStartType`), refusing what RSL cannot say.
//!
//! Ordered and unordered jobs become a `+` multirequest (even with one component), a total job
//! a single `&`, so that [`super::job_from_rsl`] reads back the same job.

use super::ast::{Relation, Request, RslValue};
use super::map::known_name;
use super::print::print;
use crate::error::SpecError;
use crate::model::{Component, Job, JobKind, Priority, RelOp, Value, MINUTE};
use crate::spec::units::format_duration;
use crate::spec::validate::canonical_attribute;

/// The job as RSL text, or [`SpecError::Unrepresentable`] listing every field RSL cannot say.
pub fn job_to_rsl(job: &Job) -> Result<String, SpecError> {
    let problems = problems(job);
    if !problems.is_empty() {
        return Err(SpecError::Unrepresentable {
            target: "RSL",
            reason: problems.join("; "),
        });
    }
    let components: Vec<Request> = job
        .components
        .iter()
        .map(|c| Request::And(relations(c)))
        .collect();
    let request = match (job.kind, components.as_slice()) {
        (JobKind::Total, [one]) => one.clone(),
        _ => Request::Multi(components),
    };
    Ok(print(&request))
}

fn problems(job: &Job) -> Vec<String> {
    let mut out = Vec::new();
    if job.kind == JobKind::Flexible {
        out.push("the job is flexible (RSL has no total to split over sites)".to_owned());
    } else if job.flexible().is_some() {
        out.push("the job has a flexible total".to_owned());
    }
    let mut field = |present: bool, what: &str| {
        if present {
            out.push(what.to_owned());
        }
    };
    field(job.id.is_some(), "the job has an id");
    field(job.extra().name.is_some(), "the job has a name");
    field(job.extra().user.is_some(), "the job has a user");
    field(job.priority != Priority::Low, "the job has priority high");
    field(job.submit.is_some(), "the job has a submit time");
    field(job.deadline().is_some(), "the job has a deadline");
    field(
        job.extra().input_file.is_some(),
        "the job has an input file",
    );
    field(
        job.runtime_estimate.is_some(),
        "the job has a runtime estimate",
    );
    field(
        job.max_wall_time().is_some(),
        "the job has a max wall time (RSL has one per component: maxWallTime)",
    );
    if job.components.is_empty() {
        out.push("the job has no components".to_owned());
    }
    if job.kind == JobKind::Total && job.components.len() > 1 {
        out.push(format!(
            "a total job has one component (this one has {})",
            job.components.len()
        ));
    }
    for (i, c) in job.components.iter().enumerate() {
        component_problems(job.kind, i, c, &mut out);
    }
    out
}

fn component_problems(kind: JobKind, i: usize, c: &Component, out: &mut Vec<String>) {
    match (kind, &c.site) {
        (JobKind::Ordered, None) => out.push(format!(
            "component {i} names no site (an ordered job needs one for every component)"
        )),
        (JobKind::Unordered | JobKind::Total | JobKind::Flexible, Some(_)) => {
            out.push(format!("component {i} names a site but the job is {kind}"))
        }
        _ => {}
    }
    if c.count == 0 {
        out.push(format!("count is at least 1; component {i} has 0"));
    }
    match c.details().max_wall_time {
        Some(ms) if ms <= 0 => out.push(format!(
            "maxWallTime is at least 1 minute; component {i} has {ms}ms"
        )),
        Some(ms) if ms % MINUTE != 0 => out.push(format!(
            "maxWallTime is in whole minutes; component {i} has {}",
            format_duration(ms)
        )),
        _ => {}
    }
    for a in &c.details().attributes {
        if a.values.is_empty() {
            out.push(format!(
                "component {i}'s attribute `{}` has no value",
                a.name
            ));
        }
        if canonical_attribute(&a.name).is_empty() {
            out.push(format!("component {i} has an attribute without a name"));
        }
        let own = known_name(&a.name).or_else(|| {
            (canonical_attribute(&a.name) == "rslsubstitution").then_some("rslSubstitution")
        });
        if let Some(own) = own {
            out.push(format!(
                "component {i}'s attribute `{}` would be read as RSL's own `{own}`",
                a.name
            ));
        }
    }
}

fn relation(attr: &str, values: Vec<RslValue>) -> Request {
    Request::Relation(Relation::new(attr, RelOp::Eq, values))
}

fn lit(s: &str) -> RslValue {
    RslValue::Literal(s.to_owned())
}

fn relations(c: &Component) -> Vec<Request> {
    let mut out = Vec::new();
    if let Some(site) = &c.site {
        out.push(relation("resourceManagerContact", vec![lit(site)]));
    }
    out.push(relation("count", vec![lit(&c.count.to_string())]));
    if let Some(e) = &c.details().executable {
        out.push(relation("executable", vec![lit(e)]));
    }
    if !c.details().arguments.is_empty() {
        out.push(relation(
            "arguments",
            c.details().arguments.iter().map(|a| lit(a)).collect(),
        ));
    }
    if !c.details().environment.is_empty() {
        let pairs = c
            .details()
            .environment
            .iter()
            .map(|(k, v)| RslValue::Seq(vec![lit(k), lit(v)]))
            .collect();
        out.push(relation("environment", pairs));
    }
    if let Some(d) = &c.details().directory {
        out.push(relation("directory", vec![lit(d)]));
    }
    if let Some(ms) = c.details().max_wall_time {
        out.push(relation(
            "maxWallTime",
            vec![lit(&(ms / MINUTE).to_string())],
        ));
    }
    if let Some(l) = &c.details().label {
        out.push(relation("label", vec![lit(l)]));
    }
    out.push(relation("jobtype", vec![lit(c.job_type.name())]));
    out.push(relation(
        "subjobStartType",
        vec![lit(c.start_type.duroc_name())],
    ));
    for a in &c.details().attributes {
        out.push(Request::Relation(Relation::new(
            a.name.clone(),
            a.op,
            a.values.iter().map(rsl_value).collect(),
        )));
    }
    out
}

fn rsl_value(v: &Value) -> RslValue {
    match v {
        Value::Str(s) => lit(s),
        Value::Seq(items) => RslValue::Seq(items.iter().map(rsl_value).collect()),
    }
}
