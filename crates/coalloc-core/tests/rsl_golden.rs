//! Golden tests of the RSL module against the documents' own examples: seed 003 appendix B
//! (an unordered Poisson job), seed 002 figure 1 (master/worker), seed 003 §2.2.4 (the
//! `rslSubstitution` and `myprog` examples), and the example job files in `examples/jobs/`.

use coalloc_core::model::{Component, Job, JobKind, JobType, RelOp, StartType, MINUTE};
use coalloc_core::rsl::{
    expand, job_from_rsl, job_to_rsl, parse, print, Relation, Request, RslValue,
};

const POISSON: &str = include_str!("golden/poisson_4x8.uno");
const POISSON_PRINTED: &str = include_str!("golden/poisson_4x8.printed.uno");
const MASTER_WORKER: &str = include_str!("golden/master_worker.rsl");
const MASTER_WORKER_TO_RSL: &str = include_str!("golden/master_worker.to_rsl.rsl");
const SUBSTITUTION: &str = include_str!("golden/substitution.rsl");
const SUBSTITUTION_EXPANDED: &str = include_str!("golden/substitution.expanded.rsl");
const MYPROG: &str = include_str!("golden/myprog.rsl");
const MYPROG_PRINTED: &str = include_str!("golden/myprog.printed.rsl");

const EXAMPLE_POISSON: &str = include_str!("../../../examples/jobs/poisson_4x8.uno");
const EXAMPLE_MASTER_WORKER: &str = include_str!("../../../examples/jobs/master-worker.rsl");
const EXAMPLE_SUBSTITUTION: &str = include_str!("../../../examples/jobs/substitution.uno");

fn rel(attr: &str, op: RelOp, values: &[&str]) -> Request {
    Request::Relation(Relation::new(
        attr,
        op,
        values.iter().map(|v| RslValue::lit(*v)).collect(),
    ))
}

fn poisson_component(i: usize) -> Component {
    Component {
        count: 8,
        site: None,
        start_type: StartType::Required,
        job_type: JobType::Mpi,
        ..Component::default()
    }
    .with(|d| {
        d.executable = Some("/home1/jsinaga/poisson/poissonT_globus".into());
        d.arguments = vec!["8".into(), "4".into()];
        d.environment = vec![
            ("GLOBUS_DUROC_SUBJOB_INDEX".into(), i.to_string()),
            (
                "LD_LIBRARY_PATH".into(),
                "/usr/local/globus/globus-2.2.4/lib/".into(),
            ),
        ];
        d.directory = Some("/home1/jsinaga/poisson".into());
        d.label = Some(format!("sub{}", i + 1));
        d.max_wall_time = Some(10 * MINUTE);
        d.attributes = vec![];
    })
}

#[test]
fn appendix_b_is_an_unordered_job_of_four_mpi_components() {
    let expected = Job::new(JobKind::Unordered, (0..4).map(poisson_component).collect());
    assert_eq!(
        job_from_rsl(POISSON, Some(JobKind::Unordered)),
        Ok(expected.clone())
    );
    assert_eq!(job_from_rsl(POISSON, None), Ok(expected.clone()));
    assert_eq!(
        job_from_rsl(EXAMPLE_POISSON, Some(JobKind::Unordered)),
        Ok(expected.clone())
    );
    let job = expected;
    assert_eq!(job.total_processors(), 32);
    assert_eq!(job.components[3].details().environment[0].1, "3");
}

#[test]
fn appendix_b_prints_canonically_and_reads_back() {
    let tree = parse(POISSON).unwrap();
    assert_eq!(print(&tree), POISSON_PRINTED);
    assert_eq!(
        parse(POISSON_PRINTED).unwrap().erase_positions(),
        tree.erase_positions()
    );
    // The canonical text of the job is the same text with the defaults coalloc spells out.
    let job = job_from_rsl(POISSON, None).unwrap();
    let text = job_to_rsl(&job).unwrap();
    assert_eq!(job_from_rsl(&text, Some(JobKind::Unordered)), Ok(job));
}

#[test]
fn appendix_b_positions_point_into_the_text() {
    let Request::Multi(components) = parse(POISSON).unwrap() else {
        panic!("not a multirequest")
    };
    assert_eq!(components.len(), 4);
    let Request::And(relations) = &components[1] else {
        panic!("not a conjunction")
    };
    let Request::Relation(count) = &relations[0] else {
        panic!("not a relation")
    };
    assert_eq!((count.pos.line, count.pos.col), (12, 5));
    // A broken count in the third component is reported there.
    let broken = POISSON.replacen(
        "( &(count=8)\n  (jobtype=mpi)\n  (label=\"sub3\")",
        "( &(count=eight)\n  (jobtype=mpi)\n  (label=\"sub3\")",
        1,
    );
    assert_eq!(
        job_from_rsl(&broken, None).unwrap_err().to_string(),
        "22:5: component[2].count: must be a whole number of processors (found `eight`)"
    );
}

fn master_worker(sites: [&str; 4]) -> Job {
    let component = |i: usize| {
        Component {
            count: if i == 0 { 1 } else { 4 },
            site: Some(sites[i].into()),
            start_type: if i == 0 {
                StartType::Required
            } else {
                StartType::Interactive
            },
            job_type: JobType::Multiple,
            ..Component::default()
        }
        .with(|d| {
            d.executable = Some(if i == 0 { "master" } else { "worker" }.to_owned());
        })
    };
    Job::new(JobKind::Ordered, (0..4).map(component).collect())
}

#[test]
fn figure_1_is_an_ordered_master_worker_job() {
    let expected = master_worker(["RM1", "RM2", "RM3", "RM4"]);
    assert_eq!(
        job_from_rsl(MASTER_WORKER, Some(JobKind::Ordered)),
        Ok(expected.clone())
    );
    assert_eq!(job_from_rsl(MASTER_WORKER, None), Ok(expected.clone()));
    assert_eq!(
        job_from_rsl(EXAMPLE_MASTER_WORKER, Some(JobKind::Ordered)),
        Ok(master_worker(["fs0", "fs1", "fs2", "fs3"]))
    );
    // The job printed back uses DUROC's start type names and spells out the defaults.
    let text = job_to_rsl(&expected).unwrap();
    assert_eq!(text, MASTER_WORKER_TO_RSL);
    assert_eq!(job_from_rsl(&text, Some(JobKind::Ordered)), Ok(expected));
}

#[test]
fn figure_1_in_a_uno_file_is_refused() {
    assert_eq!(
        job_from_rsl(MASTER_WORKER, Some(JobKind::Unordered))
            .unwrap_err()
            .to_string(),
        "1:9: component[0].resourceManagerContact: a .uno file holds an unordered job: \
         component 0 names resourceManagerContact `RM1` (use .rsl for ordered jobs)"
    );
}

#[test]
fn substitution_example_expands_as_the_document_shows() {
    let expanded = expand(&parse(SUBSTITUTION).unwrap()).unwrap();
    let expected = Request::And(vec![rel(
        "executable",
        RelOp::Eq,
        &["ftp://host:1234/dir/myfile"],
    )]);
    assert_eq!(expanded.erase_positions(), expected);
    assert_eq!(
        parse(SUBSTITUTION_EXPANDED).unwrap().erase_positions(),
        expected
    );
    assert_eq!(print(&expanded), SUBSTITUTION_EXPANDED);
    // Before expansion the tree holds the definitions, references and concatenations.
    let def = |name: &str, value: RslValue| {
        Request::Relation(Relation::new(
            "rslSubstitution",
            RelOp::Eq,
            vec![RslValue::Seq(vec![RslValue::lit(name), value])],
        ))
    };
    let concat = |var: &str, rest: &str| {
        RslValue::Concat(vec![RslValue::VarRef(var.into()), RslValue::lit(rest)])
    };
    assert_eq!(
        parse(SUBSTITUTION).unwrap().erase_positions(),
        Request::And(vec![
            def("URLBASE", RslValue::lit("ftp://host:1234")),
            def("URLDIR", concat("URLBASE", "/dir")),
            Request::Relation(Relation::new(
                "executable",
                RelOp::Eq,
                vec![concat("URLDIR", "/myfile")]
            )),
        ])
    );
    // As a job: one component, no site, so a total job.
    let job = job_from_rsl(SUBSTITUTION, Some(JobKind::Unordered)).unwrap();
    assert_eq!(job.kind, JobKind::Total);
    assert_eq!(
        job.components[0].details().executable.as_deref(),
        Some("ftp://host:1234/dir/myfile")
    );
}

#[test]
fn myprog_parses_to_a_disjunction_of_conjunctions() {
    let tree = parse(MYPROG).unwrap();
    assert_eq!(
        tree.erase_positions(),
        Request::And(vec![
            rel("executable", RelOp::Eq, &["myprog"]),
            Request::Or(vec![
                Request::And(vec![
                    rel("count", RelOp::Eq, &["5"]),
                    rel("memory", RelOp::Ge, &["64"]),
                ]),
                Request::And(vec![
                    rel("count", RelOp::Eq, &["10"]),
                    rel("memory", RelOp::Ge, &["32"]),
                ]),
            ]),
        ])
    );
    assert_eq!(print(&tree), MYPROG_PRINTED);
    assert_eq!(
        parse(MYPROG_PRINTED).unwrap().erase_positions(),
        tree.erase_positions()
    );
    assert_eq!(expand(&tree).unwrap(), tree);
}

#[test]
fn myprog_is_not_a_job() {
    assert_eq!(
        job_from_rsl(MYPROG, None).unwrap_err().to_string(),
        "2:11: component[0]: component 0 holds a disjunction `|`, which offers alternatives, \
         but coalloc needs one count per component: pick one alternative and write its \
         relations into the component"
    );
}

#[test]
fn substitution_example_file_is_an_unordered_job() {
    let job = job_from_rsl(EXAMPLE_SUBSTITUTION, Some(JobKind::Unordered)).unwrap();
    assert_eq!(job.kind, JobKind::Unordered);
    let component = |i: usize| {
        Component {
            count: 8,
            job_type: JobType::Mpi,
            ..Component::default()
        }
        .with(|d| {
            d.executable = Some("/home1/jsinaga/poisson/poissonT_globus".into());
            d.arguments = vec!["16".into(), "4".into()];
            d.environment = vec![
                ("GLOBUS_DUROC_SUBJOB_INDEX".into(), i.to_string()),
                (
                    "LD_LIBRARY_PATH".into(),
                    "/usr/local/globus/globus-2.2.4/lib/".into(),
                ),
            ];
            d.directory = Some("/home1/jsinaga/poisson".into());
            d.label = Some(format!("sub{i}"));
            d.max_wall_time = Some(10 * MINUTE);
        })
    };
    assert_eq!(
        job,
        Job::new(JobKind::Unordered, vec![component(0), component(1)])
    );
}
