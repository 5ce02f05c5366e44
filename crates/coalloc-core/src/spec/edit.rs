//! The body of an edit to a job held before its commit (seed 002 §3.2's interactive
//! transaction: add a component, delete or substitute one), as `POST /v1/jobs/{id}/edit`
//! and `coalloc edit` send it: `{"op": "add" | "delete" | "substitute", "index": I,
//! "component": {...}}`, the component in the native spec.

use super::native;
use crate::error::SpecError;
use crate::model::Component;
use crate::scheduler::Edit;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditDoc {
    op: String,
    index: Option<usize>,
    component: Option<Value>,
}

/// Read an edit body (JSON): an [`Edit`] or why not.
pub fn edit_from_json(text: &str) -> Result<Edit, SpecError> {
    let doc: EditDoc =
        serde_json::from_str(text).map_err(|e| SpecError::invalid("edit", e.to_string()))?;
    let comp = || -> Result<Component, SpecError> {
        let c = doc
            .component
            .clone()
            .ok_or_else(|| SpecError::invalid("component", "is required"))?;
        one_component(&json!({ "kind": "unordered", "component": [c] }).to_string())
    };
    let index = || {
        doc.index
            .ok_or_else(|| SpecError::invalid("index", "is required"))
    };
    match doc.op.as_str() {
        "add" => Ok(Edit::Add(comp()?)),
        "delete" => Ok(Edit::Delete(index()?)),
        "substitute" => Ok(Edit::Substitute(index()?, comp()?)),
        other => Err(SpecError::invalid(
            "op",
            format!("unknown op `{other}` (add, delete, substitute)"),
        )),
    }
}

/// The one component of a native JSON job text.
pub fn one_component(text: &str) -> Result<Component, SpecError> {
    let job = native::from_json(text)?;
    match <[Component; 1]>::try_from(job.components) {
        Ok([c]) => Ok(c),
        Err(v) => Err(SpecError::invalid(
            "component",
            format!("expected one component, got {}", v.len()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_three_ops_and_refuses_the_rest() {
        let add = r#"{"op":"add","component":{"count":2,"executable":"/bin/true"}}"#;
        match edit_from_json(add).unwrap() {
            Edit::Add(c) => assert_eq!(c.count, 2),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            edit_from_json(r#"{"op":"delete","index":1}"#).unwrap(),
            Edit::Delete(1)
        );
        let sub =
            r#"{"op":"substitute","index":0,"component":{"count":1,"executable":"/bin/true"}}"#;
        assert!(matches!(
            edit_from_json(sub).unwrap(),
            Edit::Substitute(0, _)
        ));
        assert_eq!(
            edit_from_json(r#"{"op":"delete"}"#)
                .unwrap_err()
                .to_string(),
            "index: is required"
        );
        assert_eq!(
            edit_from_json(r#"{"op":"add"}"#).unwrap_err().to_string(),
            "component: is required"
        );
        assert_eq!(
            edit_from_json(r#"{"op":"move","index":1}"#)
                .unwrap_err()
                .to_string(),
            "op: unknown op `move` (add, delete, substitute)"
        );
        assert!(edit_from_json(r#"{"op":"delete","index":-1}"#).is_err());
        assert!(edit_from_json(r#"{"op":"delete","index":1,"x":2}"#).is_err());
    }
}
