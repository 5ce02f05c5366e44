//! From RSL to jobs and back (seed 003 §2.2.4 and §3.2.1, seed 002 §3.2): attribute rules,
//! job kinds, file-kind checks, substitution scope, and what `job_to_rsl` refuses.

use coalloc_core::model::{
    Attribute, Component, Flexible, Job, JobKind, JobType, Priority, RelOp, Value, MINUTE, SECOND,
};
use coalloc_core::rsl::{expand, job_from_rsl, job_to_rsl, parse, print};
use coalloc_core::SpecError;

fn job(text: &str) -> Job {
    match job_from_rsl(text, None) {
        Ok(j) => j,
        Err(e) => panic!("{text}: {e}"),
    }
}

fn err(text: &str, expect: Option<JobKind>) -> String {
    match job_from_rsl(text, expect) {
        Ok(j) => panic!("{text} read as {j:?}"),
        Err(e) => e.to_string(),
    }
}

fn expanded(text: &str) -> String {
    match parse(text).and_then(|t| expand(&t)) {
        Ok(t) => print(&t),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn attribute_names_compare_without_case_and_underscores() {
    for name in [
        "maxWallTime",
        "max_wall_time",
        "MAXWALLTIME",
        "Max_WallTime_",
    ] {
        let j = job(&format!("&(count=2)({name}=15)"));
        assert_eq!(
            j.components[0].details().max_wall_time,
            Some(15 * MINUTE),
            "{name}"
        );
    }
    let j =
        job("&(Resource_Manager_Contact=fs1)(COUNT=3)(JobType=MPI)(SubJob_Start_Type=no-barrier)");
    assert_eq!(j.kind, JobKind::Ordered);
    let c = &j.components[0];
    assert_eq!(
        (c.site.as_deref(), c.count, c.job_type),
        (Some("fs1"), 3, JobType::Mpi)
    );
    assert_eq!(c.start_type.name(), "optional");
}

#[test]
fn defaults_follow_gram() {
    let j = job("&(executable=/bin/date)");
    assert_eq!(j.kind, JobKind::Total);
    assert_eq!(
        j.components,
        vec![Component {
            count: 1,
            job_type: JobType::Multiple,
            ..Component::default()
        }
        .with(|d| {
            d.executable = Some("/bin/date".into());
        })]
    );
}

#[test]
fn other_relations_are_kept_verbatim_in_order() {
    let j = job("&(count=2)(memory>=64)(Queue=\"short\")(count_hint!=(a (b c)) d)(x<1)");
    assert_eq!(
        j.components[0].details().attributes,
        vec![
            Attribute {
                name: "memory".into(),
                op: RelOp::Ge,
                values: vec![Value::Str("64".into())],
            },
            Attribute {
                name: "Queue".into(),
                op: RelOp::Eq,
                values: vec![Value::Str("short".into())],
            },
            Attribute {
                name: "count_hint".into(),
                op: RelOp::Ne,
                values: vec![
                    Value::Seq(vec![
                        Value::Str("a".into()),
                        Value::Seq(vec![Value::Str("b".into()), Value::Str("c".into())]),
                    ]),
                    Value::Str("d".into()),
                ],
            },
            Attribute {
                name: "x".into(),
                op: RelOp::Lt,
                values: vec![Value::Str("1".into())],
            },
        ]
    );
}

#[test]
fn count_rules() {
    assert_eq!(
        err("&(count>=5)", None),
        "1:3: component[0].count: takes `=` (found `>=`): coalloc needs the exact number of \
         processors"
    );
    assert_eq!(
        err("&(count=(5))", None),
        "1:3: component[0].count: takes one string, not a sequence (found `(5)`)"
    );
    assert_eq!(
        err("&(count=5 6)", None),
        "1:3: component[0].count: takes one value (found 2: 5 6)"
    );
    assert_eq!(
        err("&(count=five)", None),
        "1:3: component[0].count: must be a whole number of processors (found `five`)"
    );
    assert_eq!(
        err("&(count=\"-1\")", None),
        "1:3: component[0].count: must be a whole number of processors (found `-1`)"
    );
    assert_eq!(
        err("&(count=0)", None),
        "1:3: component[0].count: must be at least 1 (got 0)"
    );
    assert_eq!(
        err("&(count=4294967296)", None),
        "1:3: component[0].count: is too large (at most 4294967295)"
    );
    assert_eq!(job("&(count=4294967295)").components[0].count, u32::MAX);
    assert_eq!(
        err(
            "+(&(count=1))\n (&(count=2)\n   (label=b)\n   (Count=3))",
            None
        ),
        "4:5: component[1].count: is given twice in component 1 (first at 2:5)"
    );
}

#[test]
fn other_attribute_rules() {
    assert_eq!(
        err("&(jobtype=condor)", None),
        "1:3: component[0].jobtype: unknown job type `condor` (expected one of: single, \
         multiple, mpi)"
    );
    assert_eq!(
        err("&(subjobStartType=strict)", None),
        "1:3: component[0].subjobStartType: unknown start type `strict` (expected one of: \
         required, interactive, optional, strict-barrier, loose-barrier, no-barrier)"
    );
    assert_eq!(
        err("&(maxWallTime=1.5)", None),
        "1:3: component[0].maxWallTime: must be a whole number of minutes (found `1.5`)"
    );
    assert_eq!(
        err("&(maxWallTime=0)", None),
        "1:3: component[0].maxWallTime: must be at least 1 minute (got 0)"
    );
    assert_eq!(
        err("&(environment=(A 1) (B))", None),
        "1:3: component[0].environment: takes pairs `(NAME value)`, such as \
         (environment=(LD_LIBRARY_PATH /usr/lib)); found `(B)`"
    );
    assert_eq!(
        err("&(environment=A)", None),
        "1:3: component[0].environment: takes pairs `(NAME value)`, such as \
         (environment=(LD_LIBRARY_PATH /usr/lib)); found `A`"
    );
    assert_eq!(
        err("&(arguments=a (b c))", None),
        "1:3: component[0].arguments: takes strings, not sequences (found `(b c)`)"
    );
    assert_eq!(
        err("&(executable<x)", None),
        "1:3: component[0].executable: takes `=` (found `<`)"
    );
    assert_eq!(
        err("&(label=\"a b\" c)", None),
        "1:3: component[0].label: takes one value (found 2: \"a b\" c)"
    );
    // Rules of the model, checked by spec::validate, come back with the component's position.
    assert_eq!(
        err("+(&(count=1)(label=x))\n (&(count=2)(label=x))", None),
        "2:5: component[1].label: duplicate label `x` (component 0 has it too)"
    );
    assert_eq!(
        err("&(count=1)(environment=(A 1)(A 2))", None),
        "1:3: component[0].environment: variable `A` is set twice"
    );
}

#[test]
fn job_kinds() {
    assert_eq!(job("+(&(count=1))").kind, JobKind::Unordered);
    assert_eq!(job("&(count=1)").kind, JobKind::Total);
    assert_eq!(job("( &(count=1) )").kind, JobKind::Total);
    assert_eq!(
        job("&(count=1)(resourceManagerContact=fs0)").kind,
        JobKind::Ordered
    );
    assert_eq!(
        job("+(&(resourceManagerContact=fs0)(count=1))(&(resourceManagerContact=fs1)(count=1))")
            .kind,
        JobKind::Ordered
    );
    assert_eq!(
        err(
            "+(&(resourceManagerContact=fs0)(count=1))\n (&(count=2))",
            None
        ),
        "2:5: component[1].site: component 1 names no site while others do: name a site for \
         every component (ordered) or for none (unordered)"
    );
}

#[test]
fn file_kind_checks() {
    let unordered = "+(&(count=1))\n (&(count=2))";
    assert_eq!(
        err(unordered, Some(JobKind::Ordered)),
        "1:5: component[0].resourceManagerContact: a .rsl file holds an ordered job: \
         component 0 names no resourceManagerContact (use .uno for unordered jobs)"
    );
    let mixed = "+(&(resourceManagerContact=fs0)(count=1))\n (&(count=2))";
    assert_eq!(
        err(mixed, Some(JobKind::Ordered)),
        "2:5: component[1].resourceManagerContact: a .rsl file holds an ordered job: \
         component 1 names no resourceManagerContact (use .uno for unordered jobs)"
    );
    assert_eq!(
        err("&(count=1)", Some(JobKind::Ordered)),
        "1:3: component[0].resourceManagerContact: a .rsl file holds an ordered job: \
         component 0 names no resourceManagerContact (use .uno for unordered jobs)"
    );
    assert_eq!(
        err(mixed, Some(JobKind::Unordered)),
        "1:5: component[0].resourceManagerContact: a .uno file holds an unordered job: \
         component 0 names resourceManagerContact `fs0` (use .rsl for ordered jobs)"
    );
    assert_eq!(
        job_from_rsl("&(count=3)", Some(JobKind::Unordered)).map(|j| j.kind),
        Ok(JobKind::Total)
    );
    assert_eq!(
        job_from_rsl("&(count=3)", Some(JobKind::Total)).map(|j| j.kind),
        Ok(JobKind::Total)
    );
    assert_eq!(
        err(unordered, Some(JobKind::Total)),
        "request: expected a total job: a single `&(…)` request without resourceManagerContact"
    );
    assert_eq!(
        err("&(count=3)", Some(JobKind::Flexible)),
        "request: RSL cannot describe a flexible job (it has no total to split over sites); \
         use the native TOML or JSON spec"
    );
}

#[test]
fn shapes_that_are_not_jobs() {
    assert_eq!(
        err("+(&(count=1))\n (count=2)", None),
        "2:3: component[1]: each element of a `+` multirequest is a component `&(…)(…)`; \
         found the bare relation `count`"
    );
    assert_eq!(
        err("count=2", None),
        "1:1: request: an RSL job is a conjunction `&(…)(…)` or a multirequest \
         `+(&(…))(&(…))` of them; found the bare relation `count`"
    );
    assert_eq!(
        err("|(&(count=1))(&(count=2))", None),
        "1:5: component[0]: component 0 holds a disjunction `|`, which offers alternatives, \
         but coalloc needs one count per component: pick one alternative and write its \
         relations into the component"
    );
    assert_eq!(
        err("+(&(count=1)(+(&(count=2))))", None),
        "1:18: component[0]: component 0 holds a multirequest `+`; a multirequest may only be \
         the whole specification"
    );
    // Nested conjunctions are one conjunction.
    assert_eq!(
        job("&(count=2)(&(label=a)(&(executable=b)))"),
        job("&(count=2)(label=a)(executable=b)")
    );
}

#[test]
fn substitution_scope() {
    // Later siblings of a multirequest see its top-level definitions.
    assert_eq!(
        expanded("+(rslSubstitution=(X 1))(&(count=$(X)))(&(count=$(X)0))"),
        "+\n( &(count=1)\n)\n( &(count=10)\n)\n"
    );
    // A definition inside a component does not leak into the next one.
    assert_eq!(
        expanded("+(&(rslSubstitution=(X 1))(count=$(X)))\n (&(count=$(X)))"),
        "error: 2:5: rslSubstitution: variable `X` is not defined (used in `count`): define \
         it before its use with (rslSubstitution=(X value))"
    );
    // Definitions see earlier ones, also within one relation; later ones hide earlier ones.
    assert_eq!(
        expanded("&(rslSubstitution=(A a)(B $(A)b))(rslSubstitution=(A z))(x=$(A)$(B) # \"!\")"),
        "&(x=\"zab!\")\n"
    );
    // A definition after its use is too late.
    assert_eq!(
        expanded("&(x=$(A))(rslSubstitution=(A a))"),
        "error: 1:3: rslSubstitution: variable `A` is not defined (used in `x`): define it \
         before its use with (rslSubstitution=(A value))"
    );
    // Names are case-sensitive; the attribute name is not.
    assert_eq!(expanded("&(RSL_SUBSTITUTION=(a 1))(x=$(a))"), "&(x=1)\n");
    assert!(expanded("&(rslSubstitution=(a 1))(x=$(A))").starts_with("error: "));
    // Quoted strings are not substituted.
    assert_eq!(
        expanded("&(rslSubstitution=(A a))(x=\"$(A)\")"),
        "&(x=\"$(A)\")\n"
    );
}

#[test]
fn malformed_substitutions() {
    let rule = "each definition is a pair `(NAME value)`, such as \
                (rslSubstitution=(URLBASE \"ftp://host:1234\"))";
    assert_eq!(
        expanded("&(rslSubstitution=URLBASE x)(count=1)"),
        format!("error: 1:3: rslSubstitution: {rule}; found `URLBASE`")
    );
    assert_eq!(
        expanded("&(rslSubstitution=(A b c))(count=1)"),
        format!("error: 1:3: rslSubstitution: {rule}; found `(A b c)`")
    );
    assert_eq!(
        expanded("&(rslSubstitution=(A (b c)))(count=1)"),
        "error: 1:3: rslSubstitution: a definition names one variable and gives it one \
         string; found `(A (b c))`"
    );
    assert_eq!(
        expanded("&(rslSubstitution!=(A b))(count=1)"),
        "error: 1:3: rslSubstitution: takes `=` (found `!=`)"
    );
    assert_eq!(
        expanded("&(rslSubstitution=(\"\" b))(count=1)"),
        "error: 1:3: rslSubstitution: a variable name must not be empty"
    );
    assert_eq!(
        expanded("&(count=1)(|(rslSubstitution=(A b)))"),
        "error: 1:14: rslSubstitution: this request holds nothing but rslSubstitution \
         relations, which leaves it empty"
    );
    assert_eq!(
        expanded("rslSubstitution=(A b)"),
        "error: 1:1: rslSubstitution: the specification is nothing but an rslSubstitution \
         relation"
    );
}

#[test]
fn substitution_cannot_blow_up() {
    let mut text = String::from("&(rslSubstitution=(A0 0123456789abcdef)");
    for i in 1..40 {
        text.push_str(&format!("(A{i} $(A{})$(A{}))", i - 1, i - 1));
    }
    text.push_str(")(count=1)");
    assert_eq!(
        expanded(&text),
        "error: 1:3: rslSubstitution: the variables expand to more than 4194304 bytes of text"
    );
}

#[test]
fn total_jobs_print_as_one_conjunction() {
    let j = Job::new(
        JobKind::Total,
        vec![Component {
            count: 16,
            ..Component::default()
        }
        .with(|d| {
            d.executable = Some("/bin/hostname".into());
            d.arguments = vec!["-f".into(), "a b".into()];
            d.max_wall_time = Some(90 * MINUTE);
            d.attributes = vec![Attribute {
                name: "queue".into(),
                op: RelOp::Eq,
                values: vec![Value::Str("short".into())],
            }];
        })],
    );
    let text = job_to_rsl(&j).unwrap();
    assert_eq!(
        text,
        "&(count=16)\n (executable=/bin/hostname)\n (arguments=-f \"a b\")\n (maxWallTime=90)\n \
         (jobtype=single)\n (subjobStartType=strict-barrier)\n (queue=short)\n"
    );
    assert_eq!(job_from_rsl(&text, Some(JobKind::Unordered)), Ok(j));
}

#[test]
fn one_component_jobs_keep_their_kind() {
    for (kind, site) in [(JobKind::Ordered, Some("fs0")), (JobKind::Unordered, None)] {
        let j = Job::new(
            kind,
            vec![Component {
                count: 2,
                site: site.map(Into::into),
                ..Component::default()
            }],
        );
        let text = job_to_rsl(&j).unwrap();
        assert!(text.starts_with("+\n( &"), "{text}");
        assert_eq!(job_from_rsl(&text, None), Ok(j));
    }
}

#[test]
fn what_rsl_cannot_say_is_refused_all_at_once() {
    let mut j = Job::new(
        JobKind::Flexible,
        vec![
            Component {
                count: 8,
                ..Component::default()
            },
            Component {
                count: 8,
                ..Component::default()
            }
            .with(|d| {
                d.max_wall_time = Some(90 * SECOND);
                d.attributes = vec![
                    Attribute {
                        name: "Max_Wall_Time".into(),
                        op: RelOp::Eq,
                        values: vec![Value::Str("1".into())],
                    },
                    Attribute {
                        name: "empty".into(),
                        op: RelOp::Eq,
                        values: vec![],
                    },
                ];
            }),
        ],
    );
    j.set_flexible(Some(Flexible {
        total: 8,
        min_component: None,
    }));
    j.extra_mut().name = Some("n".into());
    j.priority = Priority::High;
    j.set_deadline(Some(5));
    j.set_max_wall_time(Some(MINUTE));
    let e = job_to_rsl(&j).unwrap_err();
    assert_eq!(
        e,
        SpecError::Unrepresentable {
            target: "RSL",
            reason: "the job is flexible (RSL has no total to split over sites); the job has a \
                     name; the job has priority high; the job has a deadline; the job has a max \
                     wall time (RSL has one per component: maxWallTime); maxWallTime is in whole \
                     minutes; component 1 has 1m30s; component 1's attribute `Max_Wall_Time` \
                     would be read as RSL's own `maxWallTime`; component 1's attribute `empty` \
                     has no value"
                .into()
        }
    );
    assert!(e
        .to_string()
        .starts_with("cannot convert to RSL without loss: the job is flexible"));

    let mut j = Job::new(
        JobKind::Unordered,
        vec![Component {
            count: 1,
            ..Component::default()
        }],
    );
    j.id = Some(7);
    j.extra_mut().user = Some("u".into());
    j.submit = Some(0);
    j.runtime_estimate = Some(MINUTE);
    assert_eq!(
        job_to_rsl(&j).unwrap_err().to_string(),
        "cannot convert to RSL without loss: the job has an id; the job has a user; the job has \
         a submit time; the job has a runtime estimate"
    );
}
