//! The configuration a what-if replays under (issue 22 item 4): the server's own (or
//! `--config`'s), with `--policy`, `--fit` and the TAGS settings (`--tags-chains`,
//! `--tags-sets`, `--tags-limits`) written into its `[scheduler]` table before it is read,
//! so a policy chosen on the command line takes its parameters from the file (seed 004
//! §IV-B/§IV-C's chains or sets and runtime limits, `[scheduler.tags]`; `[scheduler.koala_c]`
//! and the others likewise). A TAGS policy whose chains, sets or limits neither gives is
//! refused with what is missing and where to give it.

use crate::LabError;
use coalloc_core::SpecError;
use coalloc_server::config::{ServerConfig, DEFAULT_CONFIG};
use std::path::Path;
use toml::{Table, Value};

/// The command line's part of the replay's configuration.
#[derive(Debug, Default)]
pub struct Overrides<'a> {
    pub policy: Option<&'a str>,
    pub fit: Option<&'a str>,
    /// `a1,a2;b1,b2`: chains separated by `;`, their sites by `,`.
    pub tags_chains: Option<&'a str>,
    /// `fs0,fs1,fs2;fs1,fs2;fs2`: sets separated by `;`, their sites by `,`.
    pub tags_sets: Option<&'a str>,
    /// `10m,1h`.
    pub tags_limits: Option<&'a str>,
}

fn lists(text: &str) -> Value {
    Value::Array(
        text.split(';')
            .map(|l| {
                Value::Array(
                    l.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(|s| Value::String(s.to_owned()))
                        .collect(),
                )
            })
            .collect(),
    )
}

fn table<'t>(t: &'t mut Table, key: &str) -> Result<&'t mut Table, LabError> {
    match t.entry(key).or_insert_with(|| Value::Table(Table::new())) {
        Value::Table(inner) => Ok(inner),
        _ => Err(LabError::bad(format!("`{key}` is not a table"))),
    }
}

fn count(v: Option<&Value>) -> usize {
    v.and_then(Value::as_array).map_or(0, Vec::len)
}

/// Read the configuration (`path`, else the embedded default) with the overrides set;
/// `locate` says where in the file an error of a configuration without overrides is (the
/// CLI's `file:line:` form).
pub fn load(
    path: Option<&Path>,
    o: &Overrides,
    locate: &dyn Fn(&Path, &SpecError) -> String,
) -> Result<ServerConfig, LabError> {
    let (text, source) = match path {
        Some(p) => (
            std::fs::read_to_string(p)
                .map_err(|e| LabError::bad(format!("{}: cannot read: {e}", p.display())))?,
            p.display().to_string(),
        ),
        None => (DEFAULT_CONFIG.to_owned(), "the embedded default".to_owned()),
    };
    let located = |e: &SpecError| match path {
        Some(p) => locate(p, e),
        None => format!("{source}: {e}"),
    };
    let plain = o.policy.is_none()
        && o.fit.is_none()
        && o.tags_chains.is_none()
        && o.tags_sets.is_none()
        && o.tags_limits.is_none();
    if plain {
        return ServerConfig::parse(&text).map_err(|e| LabError::bad(located(&e)));
    }
    let mut doc: Table = text
        .parse()
        .map_err(|e| LabError::bad(format!("{source}: {e}")))?;
    let sched = table(&mut doc, "scheduler")?;
    if let Some(p) = o.policy {
        sched.insert("policy".into(), Value::String(p.to_owned()));
    }
    if let Some(f) = o.fit {
        sched.insert("fit".into(), Value::String(f.to_owned()));
    }
    let policy = sched
        .get("policy")
        .and_then(Value::as_str)
        .unwrap_or("fcfs")
        .to_ascii_lowercase();
    let tags = table(sched, "tags")?;
    if let Some(c) = o.tags_chains {
        tags.insert("chains".into(), lists(c));
    }
    if let Some(s) = o.tags_sets {
        tags.insert("sets".into(), lists(s));
    }
    if let Some(l) = o.tags_limits {
        let limits = l
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| Value::String(s.to_owned()))
            .collect();
        tags.insert("limits".into(), Value::Array(limits));
    }
    check_tags(&policy, tags, &source)?;
    if tags.is_empty() {
        sched.remove("tags");
    }
    let text = toml::to_string(&doc).map_err(|e| LabError::Internal(e.to_string()))?;
    ServerConfig::parse(&text).map_err(|e| {
        LabError::bad(format!(
            "{source} with the what-if's settings (--policy, --fit, --tags-*): {e}"
        ))
    })
}

/// A TAGS policy needs its chains (or sets) and, for more than one level, its runtime
/// limits: name what neither the file nor the flags give.
fn check_tags(policy: &str, tags: &Table, source: &str) -> Result<(), LabError> {
    let (what, flag, example) = match policy {
        "tags-chain" => ("chains", "--tags-chains", "--tags-chains 'a1,a2;b1,b2'"),
        "tags-sets" => (
            "sets",
            "--tags-sets",
            "--tags-sets 'fs0,fs1,fs2;fs1,fs2;fs2'",
        ),
        _ => return Ok(()),
    };
    let mut missing = Vec::new();
    let lists = tags.get(what).and_then(Value::as_array);
    let levels = match (policy, lists) {
        (_, None) => 0,
        (_, Some(l)) if l.is_empty() => 0,
        ("tags-chain", Some(l)) => count(l.first()),
        (_, Some(l)) => l.len(),
    };
    if levels == 0 {
        missing.push(format!(
            "its {what} of sites ({flag}, or `{what}` in [scheduler.tags] of --config)"
        ));
    }
    if count(tags.get("limits")) == 0 && levels != 1 {
        missing.push(
            "its runtime limits (--tags-limits, or `limits` in [scheduler.tags] of --config)"
                .to_owned(),
        );
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(LabError::bad(format!(
        "--policy {policy} needs settings that {source} does not give: {}; for example \
         {example} --tags-limits 10m",
        missing.join(", and ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tags_policy_takes_its_chains_and_limits_from_the_flags() {
        let c = load(
            None,
            &Overrides {
                policy: Some("tags-chain"),
                tags_chains: Some("alpha,beta"),
                tags_limits: Some("10m"),
                ..Overrides::default()
            },
            &|_, e| e.to_string(),
        )
        .unwrap();
        match &c.scheduler.queue {
            coalloc_core::scheduler::QueueConfig::TagsChain(p) => {
                assert_eq!(p.chains, vec![vec![0, 1]]);
                assert_eq!(p.limits, vec![600_000]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_tags_policy_without_its_settings_is_refused_naming_them() {
        let e = load(
            None,
            &Overrides {
                policy: Some("tags-sets"),
                ..Overrides::default()
            },
            &|_, e| e.to_string(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "--policy tags-sets needs settings that the embedded default does not give: its \
             sets of sites (--tags-sets, or `sets` in [scheduler.tags] of --config), and its \
             runtime limits (--tags-limits, or `limits` in [scheduler.tags] of --config); for \
             example --tags-sets 'fs0,fs1,fs2;fs1,fs2;fs2' --tags-limits 10m"
        );
        // Chains without limits: only the limits are missing.
        let e = load(
            None,
            &Overrides {
                policy: Some("tags-chain"),
                tags_chains: Some("alpha,beta;gamma"),
                ..Overrides::default()
            },
            &|_, e| e.to_string(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "needs settings that the embedded default does not give: its runtime limits"
            ) && !e.contains("chains of sites ("),
            "{e}"
        );
        // Wrong limits reach the core's own check, which says why.
        let e = load(
            None,
            &Overrides {
                policy: Some("tags-chain"),
                tags_chains: Some("alpha,beta"),
                tags_limits: Some("10m,1h"),
                ..Overrides::default()
            },
            &|_, e| e.to_string(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("a chain of 2 sites needs 1 runtime limits (the last has none), not 2"),
            "{e}"
        );
    }
}
