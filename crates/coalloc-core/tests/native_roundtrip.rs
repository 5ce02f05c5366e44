//! Property: every valid job writes to TOML and JSON and reads back to the same job, and the
//! normalized form is a fixed point.

use coalloc_core::model::*;
use coalloc_core::spec::native;
use coalloc_core::spec::validate::{canonical_attribute, validate, INTERPRETED_ATTRIBUTES};
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9_./-]{1,12}",
        any::<String>().prop_map(|s| s.chars().take(12).collect::<String>()),
        Just("two words \"quoted\" 'single' \\ back".to_owned()),
    ]
    .prop_filter("non-blank", |s| !s.trim().is_empty())
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = text().prop_map(Value::Str);
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop::collection::vec(inner, 0..3).prop_map(Value::Seq)
    })
}

fn attribute() -> impl Strategy<Value = Attribute> {
    (
        "[a-z][a-zA-Z0-9]{0,8}".prop_filter("not interpreted", |n| {
            !INTERPRETED_ATTRIBUTES.contains(&canonical_attribute(n).as_str())
        }),
        prop::sample::select(RelOp::ALL.to_vec()),
        prop::collection::vec(value(), 1..3),
    )
        .prop_map(|(name, op, values)| Attribute { name, op, values })
}

fn duration() -> impl Strategy<Value = Millis> {
    prop_oneof![1i64..10_000, (1i64..100_000).prop_map(|s| s * 1000)]
}

fn component(i: usize) -> impl Strategy<Value = Component> {
    (
        1u32..1000,
        prop::sample::select(vec![
            StartType::Required,
            StartType::Interactive,
            StartType::Optional,
        ]),
        prop::option::of(text()),
        prop::collection::vec(text(), 0..3),
        prop::collection::btree_map("[A-Z_][A-Z0-9_]{0,6}", text(), 0..3),
        prop::option::of(text()),
        any::<bool>(),
        prop::sample::select(vec![JobType::Single, JobType::Multiple, JobType::Mpi]),
        prop::option::of(duration()),
        prop::collection::vec(attribute(), 0..3),
    )
        .prop_map(
            move |(
                count,
                start_type,
                executable,
                arguments,
                env,
                directory,
                labelled,
                job_type,
                wall,
                attributes,
            )| {
                Component {
                    count,
                    site: None,
                    start_type,
                    job_type,
                    ..Component::default()
                }
                .with(|d| {
                    d.executable = executable;
                    d.arguments = arguments;
                    d.environment = env.into_iter().collect();
                    d.directory = directory;
                    d.label = labelled.then(|| format!("c{i}"));
                    d.max_wall_time = wall;
                    d.attributes = attributes;
                })
            },
        )
}

fn job() -> impl Strategy<Value = Job> {
    let kinds = prop::sample::select(vec![
        JobKind::Ordered,
        JobKind::Unordered,
        JobKind::Flexible,
        JobKind::Total,
    ]);
    (
        kinds,
        (0usize..4).prop_flat_map(|n| (0..=n).map(component).collect::<Vec<_>>()),
        (
            prop::option::of(any::<u64>()),
            prop::option::of(text()),
            prop::option::of(text()),
            any::<bool>(),
            prop::option::of((0i64..1_000_000, 0i64..1_000_000)),
            prop::option::of((text(), any::<u32>(), any::<bool>())),
            prop::option::of(duration()),
            prop::option::of(duration()),
        ),
        (1u32..10_000, prop::option::of(1u32..10_000)),
    )
        .prop_map(|(kind, mut components, extra, (total, min))| {
            let (id, name, user, high, times, file, estimate, wall) = extra;
            let mut flexible = None;
            match kind {
                JobKind::Ordered => {
                    for (i, c) in components.iter_mut().enumerate() {
                        c.site = Some(format!("site{}", i % 3).into());
                    }
                }
                JobKind::Total => components.truncate(1),
                JobKind::Flexible => {
                    components.truncate(1);
                    components[0].count = total;
                    flexible = Some(Flexible {
                        total,
                        min_component: min.map(|m| m.min(total)),
                    });
                }
                JobKind::Unordered => {}
            }
            let mut job = Job::new(kind, components).with_limits(
                flexible,
                times.map(|(s, d)| (s + d) * 1000 + d % 7),
                wall,
            );
            job.id = id;
            job.priority = if high { Priority::High } else { Priority::Low };
            job.submit = times.map(|(s, _)| s * 1000);
            job.runtime_estimate = estimate;
            job.with(|e| {
                e.name = name.map(Into::into);
                e.user = user.map(Into::into);
                e.barrier_timeout = wall.map(|w| w / 2 + 1);
                e.input_file = file.map(|(name, size, chunks)| {
                    Box::new(InputFile {
                        name,
                        size: u64::from(size),
                        distribution: if chunks {
                            FileDistribution::Chunks
                        } else {
                            FileDistribution::Whole
                        },
                    })
                });
            })
        })
}

proptest! {
    #[test]
    fn toml_and_json_round_trip(job in job()) {
        prop_assert_eq!(validate(&job, &[]), Ok(()));
        let toml = native::to_toml(&job);
        prop_assert_eq!(native::from_toml(&toml), Ok(job.clone()), "TOML:\n{}", toml);
        let json = native::to_json(&job);
        prop_assert_eq!(native::from_json(&json), Ok(job.clone()), "JSON:\n{}", json);
        prop_assert_eq!(native::to_toml(&native::from_toml(&toml).unwrap()), toml);
    }
}
