//! Property tests of the RSL module: the printer and the parser agree on every tree, every
//! job RSL can represent survives `job_to_rsl` then `job_from_rsl`, and no input makes any of
//! it panic.

use coalloc_core::model::MINUTE;
use coalloc_core::model::{Attribute, Component, Job, JobKind, JobType, RelOp, StartType, Value};
use coalloc_core::rsl::{
    expand, job_from_rsl, job_to_rsl, parse, print, Relation, Request, RslValue,
};
use coalloc_core::spec::validate::{canonical_attribute, INTERPRETED_ATTRIBUTES};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// Strings that stress quoting: specials, quotes, blanks, comment markers, unicode, and
/// anything at all.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9_./:-]{1,10}",
        "[a-z\"' ()=<>!#$^&|+*\\t\\n/é€\u{a0}-]{0,12}",
        any::<String>(),
    ]
}

fn op() -> impl Strategy<Value = RelOp> {
    prop::sample::select(RelOp::ALL.to_vec())
}

fn simple_value() -> impl Strategy<Value = RslValue> {
    prop_oneof![
        3 => text().prop_map(RslValue::Literal),
        1 => text().prop_map(RslValue::VarRef),
    ]
}

fn value() -> impl Strategy<Value = RslValue> {
    let leaf = prop_oneof![
        4 => simple_value(),
        1 => prop::collection::vec(simple_value(), 2..4).prop_map(RslValue::Concat),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(RslValue::Seq)
    })
}

fn relation() -> impl Strategy<Value = Request> {
    (text(), op(), prop::collection::vec(value(), 1..4))
        .prop_map(|(attr, op, values)| Request::Relation(Relation::new(attr, op, values)))
}

fn request() -> impl Strategy<Value = Request> {
    relation().prop_recursive(4, 32, 4, |inner| {
        let list = prop::collection::vec(inner, 1..4);
        prop_oneof![
            list.clone().prop_map(Request::Multi),
            list.clone().prop_map(Request::And),
            list.prop_map(Request::Or),
        ]
    })
}

/// A string that is not blank.
fn word() -> impl Strategy<Value = String> {
    (text(), "[a-zA-Z0-9_./-]{1,3}").prop_map(|(a, b)| format!("{a}{b}"))
}

fn model_value() -> impl Strategy<Value = Value> {
    text()
        .prop_map(Value::Str)
        .prop_recursive(3, 12, 3, |inner| {
            prop::collection::vec(inner, 0..3).prop_map(Value::Seq)
        })
}

fn attribute() -> impl Strategy<Value = Attribute> {
    (
        text().prop_filter("a name coalloc can pass through", |n| {
            let canon = canonical_attribute(n);
            !canon.is_empty() && !INTERPRETED_ATTRIBUTES.contains(&canon.as_str())
        }),
        op(),
        prop::collection::vec(model_value(), 1..3),
    )
        .prop_map(|(name, op, values)| Attribute { name, op, values })
}

fn component(i: usize, with_site: bool) -> impl Strategy<Value = Component> {
    let env_name =
        prop_oneof!["[A-Z_][A-Z0-9_]{0,8}", word()].prop_map(|n| n.replace(['=', '\0'], "_"));
    (
        (
            1..=u32::MAX,
            word(),
            prop::sample::select(vec![
                StartType::Required,
                StartType::Interactive,
                StartType::Optional,
            ]),
            prop::option::of(word()),
            prop::collection::vec(text(), 0..3),
            prop::collection::vec((env_name, text()), 0..3),
        ),
        (
            prop::option::of(text()),
            prop::option::of(word()),
            prop::sample::select(vec![JobType::Single, JobType::Multiple, JobType::Mpi]),
            prop::option::of(1i64..100_000),
            prop::collection::vec(attribute(), 0..3),
        ),
    )
        .prop_map(
            move |(
                (count, site, start_type, executable, arguments, env),
                (directory, label, job_type, minutes, attributes),
            )| {
                let mut names = BTreeSet::new();
                let environment = env
                    .into_iter()
                    .filter(|(k, _)| names.insert(k.clone()))
                    .collect();
                Component {
                    count,
                    site: with_site.then_some(site.into()),
                    start_type,
                    job_type,
                    details: None,
                }
                .with(|d| {
                    d.executable = executable;
                    d.arguments = arguments;
                    d.environment = environment;
                    d.directory = directory;
                    // `#i` keeps labels unique within the job.
                    d.label = label.map(|l| format!("{l}#{i}"));
                    d.max_wall_time = minutes.map(|m| m * MINUTE);
                    d.attributes = attributes;
                })
            },
        )
}

fn job() -> impl Strategy<Value = Job> {
    prop_oneof![
        Just(JobKind::Ordered),
        Just(JobKind::Unordered),
        Just(JobKind::Total)
    ]
    .prop_flat_map(|kind| {
        let n = if kind == JobKind::Total {
            1..2
        } else {
            1..5usize
        };
        n.prop_flat_map(move |n| {
            (0..n)
                .map(|i| component(i, kind == JobKind::Ordered))
                .collect::<Vec<_>>()
                .prop_map(move |components| Job::new(kind, components))
        })
    })
}

proptest! {
    #[test]
    fn printed_trees_parse_back(tree in request()) {
        let text = print(&tree);
        let back = parse(&text).map(|t| t.erase_positions());
        prop_assert_eq!(back, Ok(tree), "printed:\n{}", text);
    }

    #[test]
    fn representable_jobs_survive_rsl(job in job()) {
        let text = job_to_rsl(&job).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(job_from_rsl(&text, None), Ok(job.clone()), "rsl:\n{}", text);
        let expect = match job.kind {
            JobKind::Ordered => JobKind::Ordered,
            _ => JobKind::Unordered,
        };
        prop_assert_eq!(job_from_rsl(&text, Some(expect)), Ok(job), "rsl:\n{}", text);
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        check_any_text(&text)?;
    }

    #[test]
    fn rsl_like_text_never_panics(text in "[-+&|()=<>!\"'^#$ a-z0-9*\\n]{0,60}") {
        check_any_text(&text)?;
    }

    #[test]
    fn mangled_job_files_never_panic(
        edits in prop::collection::vec((0usize..2000, "[-+&|()=<>!\"'^#$ a-z0-9*]{0,3}"), 1..6),
        delete in prop::collection::vec(0usize..2000, 0..4),
    ) {
        let mut text: Vec<char> = include_str!("../../../examples/jobs/substitution.uno")
            .chars()
            .collect();
        for (at, insert) in edits {
            let at = at.min(text.len());
            text.splice(at..at, insert.chars());
        }
        for at in delete {
            if at < text.len() {
                text.remove(at);
            }
        }
        check_any_text(&text.into_iter().collect::<String>())?;
    }
}

/// Whatever the text, nothing panics; whatever parses prints and parses back the same.
fn check_any_text(text: &str) -> Result<(), TestCaseError> {
    for expect in [Some(JobKind::Ordered), Some(JobKind::Unordered)] {
        let _ = job_from_rsl(text, expect);
    }
    if let Ok(job) = job_from_rsl(text, None) {
        // What RSL said, RSL can say again.
        let back = job_to_rsl(&job).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(job_from_rsl(&back, None), Ok(job));
    }
    if let Ok(tree) = parse(text) {
        let printed = print(&tree);
        prop_assert_eq!(
            parse(&printed).map(|t| t.erase_positions()),
            Ok(tree.erase_positions())
        );
        if let Ok(expanded) = expand(&tree) {
            prop_assert_eq!(
                parse(&print(&expanded)).map(|t| t.erase_positions()),
                Ok(expanded.erase_positions())
            );
        }
    }
    Ok(())
}
