//! The OpenAPI document against the router and the API's types: every route the server's
//! source registers (`.route(PATH, METHOD(..))` anywhere under `src/`) is documented and
//! every documented one is registered; every request and answer body has a schema and an
//! example; and every example is valid, checked by deserialising it into the Rust type its
//! schema was generated from (the structs deny unknown fields) and, for job submissions, by
//! the job parser the submit route uses.

use super::spec;
use crate::views::*;
use coalloc_core::spec::{parse_job, Format};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

const METHODS: [&str; 5] = ["get", "post", "put", "delete", "patch"];

/// `(path, method)` of every `.route(...)` call in the server's source.
fn routes_in_source() -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let mut files = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(f) = files.pop() {
        if f.is_dir() {
            files.extend(std::fs::read_dir(&f).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if f.extension().is_none_or(|e| e != "rs") || f.ends_with("openapi_tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for (at, _) in text.match_indices(".route(") {
            let rest = &text[at + ".route(".len()..];
            let rest = rest.trim_start();
            let Some(rest) = rest.strip_prefix('"') else {
                continue;
            };
            let end = rest.find('"').unwrap();
            let path = &rest[..end];
            // The handlers: up to the parenthesis that closes `.route(`.
            let mut depth = 1;
            let mut close = rest.len();
            for (i, c) in rest[end..].char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    close = end + i;
                    break;
                }
            }
            let body = &rest[end + 1..close];
            let found: Vec<&str> = METHODS
                .iter()
                .copied()
                .filter(|m| {
                    body.match_indices(&format!("{m}(")).any(|(i, _)| {
                        i == 0
                            || !body.as_bytes()[i - 1].is_ascii_alphanumeric()
                                && body.as_bytes()[i - 1] != b'_'
                    })
                })
                .collect();
            assert!(
                !found.is_empty(),
                "{}: route {path}: no method",
                f.display()
            );
            for m in found {
                out.insert((path.to_string(), m.to_string()));
            }
        }
    }
    out
}

fn routes_in_document(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            if item.get(m).is_some() {
                out.insert((path.clone(), m.to_string()));
            }
        }
    }
    out
}

#[test]
fn every_route_the_router_serves_is_documented_and_no_other() {
    let served = routes_in_source();
    assert!(served.len() >= 14, "{served:?}");
    let documented = routes_in_document(&spec());
    let missing: Vec<_> = served.difference(&documented).collect();
    assert!(missing.is_empty(), "served but not documented: {missing:?}");
    let extra: Vec<_> = documented.difference(&served).collect();
    assert!(extra.is_empty(), "documented but not served: {extra:?}");
}

fn check<T: DeserializeOwned>(v: &Value) -> Result<(), String> {
    serde_json::from_value::<T>(v.clone())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Deserialise an example into the type its component schema was generated from.
fn validate(schema: &str, v: &Value) -> Result<(), String> {
    match schema {
        "ErrorBody" => check::<ErrorBody>(v),
        "Health" => check::<Health>(v),
        "JobSpec" => {
            check::<JobSpec>(v)?;
            parse_job(&v.to_string(), Format::Json)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        "ComponentSpec" => {
            check::<ComponentSpec>(v)?;
            let job = serde_json::json!({"kind": "unordered", "component": [v]});
            parse_job(&job.to_string(), Format::Json)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        "Submitted" => check::<Submitted>(v),
        "BatchBody" => {
            check::<BatchBody>(v)?;
            v["jobs"]
                .as_array()
                .into_iter()
                .flatten()
                .try_for_each(|j| {
                    parse_job(&j.to_string(), Format::Json)
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                })
        }
        "BatchSubmitted" => check::<BatchSubmitted>(v),
        "BatchError" => check::<BatchError>(v),
        "ComponentView" => check::<ComponentView>(v),
        "JobView" => check::<JobView>(v),
        "JobList" => check::<JobList>(v),
        "Cancelled" => check::<Cancelled>(v),
        "ArrayCancelled" => check::<ArrayCancelled>(v),
        "Committed" => check::<Committed>(v),
        "EditBody" => check::<EditBody>(v),
        "Edited" => check::<Edited>(v),
        "CloudView" => check::<CloudView>(v),
        "SiteView" => check::<SiteView>(v),
        "SchedulerView" => check::<SchedulerView>(v),
        "SitesView" => check::<SitesView>(v),
        "LinkView" => check::<LinkView>(v),
        "AgentTokenView" => {
            check::<AgentTokenView>(v)?;
            let t = v["token"].as_str().unwrap_or_default();
            crate::link::proto::EnrolToken::decode(t)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        "UsableBody" => check::<UsableBody>(v),
        "ReplicaView" => check::<ReplicaView>(v),
        "FileList" => check::<FileList>(v),
        "RegisterBody" => check::<RegisterBody>(v),
        "TransferView" => check::<TransferView>(v),
        "BandwidthView" => check::<BandwidthView>(v),
        "UsableAnswer" => check::<UsableAnswer>(v),
        "ControlBody" => check::<ControlBody>(v),
        "ControlAnswer" => check::<ControlAnswer>(v),
        "CheckIn" => check::<CheckIn>(v),
        "BarrierAnswer" => check::<BarrierAnswer>(v),
        "StreamEvent" => check::<StreamEvent>(v),
        "UserBody" => check::<UserBody>(v),
        "UserView" => check::<UserView>(v),
        "UserIssued" => check::<UserIssued>(v),
        "UserList" => check::<UserList>(v),
        "UserRemoved" => check::<UserRemoved>(v),
        "OutputLaunch" => check::<OutputLaunch>(v),
        "OutputList" => check::<OutputList>(v),
        other => Err(format!("no Rust type known for schema {other}")),
    }
}

/// A media type's example: its own, else its referenced schema's.
fn example_of(doc: &Value, media: &Value) -> Option<(Option<String>, Value)> {
    let name = media["schema"]["$ref"]
        .as_str()
        .map(|r| r.trim_start_matches("#/components/schemas/").to_string());
    let own = media.get("example").cloned();
    let from_schema = name
        .as_ref()
        .and_then(|n| doc["components"]["schemas"][n].get("example").cloned());
    Some((name, own.or(from_schema)?))
}

#[test]
fn every_body_has_a_schema_and_an_example_that_validates() {
    let doc = spec();
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let mut bodies = Vec::new();
            if let Some(c) = op["requestBody"]["content"].as_object() {
                bodies.extend(c.iter().map(|(t, m)| (format!("request {t}"), m)));
            }
            for (status, r) in op["responses"].as_object().unwrap() {
                if let Some(c) = r["content"].as_object() {
                    bodies.extend(c.iter().map(|(t, m)| (format!("{status} {t}"), m)));
                }
            }
            for (what, media) in bodies {
                let at = format!("{method} {path} {what}");
                assert!(media["schema"].is_object(), "{at}: no schema");
                let (schema, example) =
                    example_of(&doc, media).unwrap_or_else(|| panic!("{at}: no example"));
                match schema {
                    Some(name) => validate(&name, &example).unwrap_or_else(|e| panic!("{at}: {e}")),
                    None => {
                        let ty = media["schema"]["type"].as_str().unwrap_or("");
                        let ok = match ty {
                            "string" => example.is_string(),
                            "object" => example.is_object(),
                            _ => false,
                        };
                        assert!(ok, "{at}: example {example} is not a {ty}");
                    }
                }
                // A submission in TOML or RSL is one the submit route takes.
                let format = match what.as_str() {
                    "request application/toml" => Some(Format::Toml),
                    "request text/x-rsl" => Some(Format::Rsl),
                    _ => None,
                };
                if let Some(f) = format {
                    parse_job(example.as_str().unwrap(), f).unwrap_or_else(|e| panic!("{at}: {e}"));
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "{checked} bodies");
    // Every schema's own example validates too, and every schema has a Rust type here.
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        let example = schema
            .get("example")
            .unwrap_or_else(|| panic!("schema {name} has no example"));
        validate(name, example).unwrap_or_else(|e| panic!("schema {name}: {e}"));
    }
}
