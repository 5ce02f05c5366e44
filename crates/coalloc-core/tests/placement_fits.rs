//! Worked examples of the unordered and ordered fits: seed 003 §4.3.3's modified worst-fit and
//! best-fit step by step, seed 001 §2.2's plain Worst Fit, first-fit, and the ordered fit.

use coalloc_core::model::{Component, Job, JobKind, Site};
use coalloc_core::placement::{place, Fit, FlexibleFit, IdleList, NoFit, Placement, SiteView};

fn sites(idle: &[(&str, u32)]) -> Vec<Site> {
    idle.iter()
        .map(|&(name, n)| Site {
            idle: Some(n),
            ..Site::cluster(name, 144)
        })
        .collect()
}

fn comp(label: &str, count: u32) -> Component {
    Component {
        count,
        ..Component::default()
    }
    .with(|d| {
        d.label = Some(label.into());
    })
}

fn unordered(counts: &[(&str, u32)]) -> Job {
    Job::new(
        JobKind::Unordered,
        counts.iter().map(|&(l, n)| comp(l, n)).collect(),
    )
}

fn ordered(parts: &[(&str, &str, u32)]) -> Job {
    Job::new(
        JobKind::Ordered,
        parts
            .iter()
            .map(|&(l, site, n)| Component {
                site: Some(site.into()),
                ..comp(l, n)
            })
            .collect(),
    )
}

fn run(job: &Job, sites: &[Site], fit: Fit) -> Result<Placement, NoFit> {
    place(
        job,
        &SiteView::from_sites(sites),
        fit,
        FlexibleFit::ClusterFilling,
    )
}

/// Site names of the components, in job order.
fn names(p: &Placement) -> Vec<&str> {
    p.components.iter().map(|c| c.site_name.as_str()).collect()
}

/// The job of seed 003 figure 4.2: subjob-1 asks 10 processors, subjob-2 20, subjob-3 15.
fn figure_4_2_job() -> Job {
    unordered(&[("subjob-1", 10), ("subjob-2", 20), ("subjob-3", 15)])
}

/// Seed 003 figure 4.2 with the modified worst-fit, one request-list element at a time.
///
/// The figure's idle numbers are not in the text (only the requests 10, 20 and 15 are), so
/// this idle-list is ours: fs0 40, fs1 12, fs2 25 idle. It exercises step 1 with marks, a
/// smaller unmarked site chosen over a bigger marked one, and the unmark-all rule. The
/// request-list is sorted largest first: 20 (subjob-2), 15 (subjob-3), 10 (subjob-1).
#[test]
fn figure_4_2_modified_worst_fit_step_by_step() {
    let s = sites(&[("fs0", 40), ("fs1", 12), ("fs2", 25)]);
    let view = SiteView::from_sites(&s);
    let mut list = IdleList::new(&view);

    // 20: the unmarked site with the most idle is fs0; mark it.
    assert_eq!(list.fit(20, Fit::Worst), Some(0));
    assert_eq!(list.idle(), [20, 12, 25]);
    assert_eq!(list.marked(), [true, false, false]);
    // 15: the unmarked sites are fs1 (12) and fs2 (25); fs2 has the most and room.
    assert_eq!(list.fit(15, Fit::Worst), Some(2));
    assert_eq!(list.idle(), [20, 12, 10]);
    assert_eq!(list.marked(), [true, false, true]);
    // 10: fs1, the only unmarked site, has room (12) although fs0 has more (20). Now every
    // site is marked, so every mark is removed.
    assert_eq!(list.fit(10, Fit::Worst), Some(1));
    assert_eq!(list.idle(), [20, 2, 10]);
    assert_eq!(list.marked(), [false, false, false]);

    let p = run(&figure_4_2_job(), &s, Fit::Worst).unwrap();
    assert_eq!(names(&p), ["fs1", "fs0", "fs2"]);
    assert_eq!(p.idle_after, [20, 2, 10]);
    let labels: Vec<_> = p
        .components
        .iter()
        .map(|c| c.label.as_deref().unwrap())
        .collect();
    assert_eq!(labels, ["subjob-1", "subjob-2", "subjob-3"]);
    let counts: Vec<_> = p.components.iter().map(|c| c.count).collect();
    assert_eq!(counts, [10, 20, 15]);
}

/// The same idle-list with the modified best-fit: the fewest idle among the sites with room.
#[test]
fn figure_4_2_modified_best_fit_step_by_step() {
    let s = sites(&[("fs0", 40), ("fs1", 12), ("fs2", 25)]);
    let view = SiteView::from_sites(&s);
    let mut list = IdleList::new(&view);

    // 20: unmarked sites with room are fs0 (40) and fs2 (25): fs2 has the fewest.
    assert_eq!(list.fit(20, Fit::Best), Some(2));
    assert_eq!(list.idle(), [40, 12, 5]);
    assert_eq!(list.marked(), [false, false, true]);
    // 15: of the unmarked sites only fs0 has room (fs1 has 12).
    assert_eq!(list.fit(15, Fit::Best), Some(0));
    assert_eq!(list.idle(), [25, 12, 5]);
    assert_eq!(list.marked(), [true, false, true]);
    // 10: fs1 (12) fits; all marked, so all marks go.
    assert_eq!(list.fit(10, Fit::Best), Some(1));
    assert_eq!(list.idle(), [25, 2, 5]);
    assert_eq!(list.marked(), [false, false, false]);

    let p = run(&figure_4_2_job(), &s, Fit::Best).unwrap();
    assert_eq!(names(&p), ["fs1", "fs2", "fs0"]);
    assert_eq!(p.idle_after, [25, 2, 5]);
}

/// Seed 001's plain Worst Fit on the same idle-list: no marks, so subjob-1 goes to fs0 (20
/// idle after subjob-2) where the modified worst-fit sent it to the unmarked fs1.
#[test]
fn plain_worst_fit_differs_from_the_modified_one() {
    let s = sites(&[("fs0", 40), ("fs1", 12), ("fs2", 25)]);
    let plain = run(&figure_4_2_job(), &s, Fit::WorstPlain).unwrap();
    assert_eq!(names(&plain), ["fs0", "fs0", "fs2"]);
    assert_eq!(plain.idle_after, [10, 12, 10]);
    let modified = run(&figure_4_2_job(), &s, Fit::Worst).unwrap();
    assert_eq!(names(&modified), ["fs1", "fs0", "fs2"]);

    // First-fit: the first site in list order with room.
    let first = run(&figure_4_2_job(), &s, Fit::First).unwrap();
    assert_eq!(names(&first), ["fs1", "fs0", "fs0"]);
    assert_eq!(first.idle_after, [5, 2, 25]);
}

/// Step 2 of §4.3.3: when no unmarked site has room, the marked site with the most idle
/// takes the component (and stays marked).
#[test]
fn step_2_falls_back_to_the_marked_sites() {
    let s = sites(&[("A", 40), ("B", 12)]);
    let view = SiteView::from_sites(&s);
    let mut list = IdleList::new(&view);
    assert_eq!(list.fit(20, Fit::Worst), Some(0));
    assert_eq!(
        (list.idle(), list.marked()),
        (&[20, 12][..], &[true, false][..])
    );
    // 15: B is unmarked but has 12 idle; step 2 takes marked A.
    assert_eq!(list.fit(15, Fit::Worst), Some(0));
    assert_eq!(
        (list.idle(), list.marked()),
        (&[5, 12][..], &[true, false][..])
    );
    assert_eq!(list.fit(10, Fit::Worst), Some(1));
    assert_eq!(
        (list.idle(), list.marked()),
        (&[5, 2][..], &[false, false][..])
    );
    // Nothing has room for 6 now: the list is left as it was.
    assert_eq!(list.fit(6, Fit::Worst), None);
    assert_eq!(list.idle(), [5, 2]);

    let err = run(
        &figure_4_2_job(),
        &sites(&[("A", 30), ("B", 12)]),
        Fit::Worst,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "component 2 (label `subjob-3`) needs 15 processors; the most idle on any usable site \
         is 12 after placing 1 other component of the job"
    );
}

/// The unmark-all rule changes where later components go: with four components of 10 on A
/// (50 idle) and B (30), the fourth goes to B because the marks were removed after the
/// second and B is unmarked again after the third. Without the rule step 2 would pick A (30
/// against B's 20).
#[test]
fn unmarking_spreads_later_components_again() {
    let s = sites(&[("A", 50), ("B", 30)]);
    let view = SiteView::from_sites(&s);
    let mut list = IdleList::new(&view);
    let mut steps = Vec::new();
    for _ in 0..4 {
        let site = list.fit(10, Fit::Worst).unwrap();
        steps.push((site, list.idle().to_vec(), list.marked().to_vec()));
    }
    assert_eq!(
        steps,
        [
            (0, vec![40, 30], vec![true, false]),
            (1, vec![40, 20], vec![false, false]),
            (0, vec![30, 20], vec![true, false]),
            (1, vec![30, 10], vec![false, false]),
        ]
    );
    let job = unordered(&[("a", 10), ("b", 10), ("c", 10), ("d", 10)]);
    assert_eq!(
        names(&run(&job, &s, Fit::Worst).unwrap()),
        ["A", "B", "A", "B"]
    );
    assert_eq!(
        names(&run(&job, &s, Fit::WorstPlain).unwrap()),
        ["A", "A", "A", "B"]
    );
}

/// DAS-2 (seed 003 §6) all idle, four components of 8: the modified worst-fit spreads them,
/// the plain one stacks them on fs0, best-fit fills the smallest clusters first.
#[test]
fn poisson_on_das2() {
    let s = sites(&[
        ("fs0", 144),
        ("fs1", 64),
        ("fs2", 64),
        ("fs3", 64),
        ("fs4", 64),
    ]);
    let job = unordered(&[("s0", 8), ("s1", 8), ("s2", 8), ("s3", 8)]);
    let p = run(&job, &s, Fit::Worst).unwrap();
    assert_eq!(names(&p), ["fs0", "fs1", "fs2", "fs3"]);
    assert_eq!(p.idle_after, [136, 56, 56, 56, 64]);
    assert_eq!(names(&run(&job, &s, Fit::WorstPlain).unwrap()), ["fs0"; 4]);
    assert_eq!(
        names(&run(&job, &s, Fit::Best).unwrap()),
        ["fs1", "fs2", "fs3", "fs4"]
    );
    assert_eq!(names(&run(&job, &s, Fit::First).unwrap()), ["fs0"; 4]);
}

/// Unusable sites are not in the idle-list: they take nothing and are never marked.
#[test]
fn unusable_sites_are_skipped() {
    let s = sites(&[("fs0", 144), ("fs1", 64)]);
    let mut view = SiteView::from_sites(&s);
    view.set_usable(0, false);
    let job = unordered(&[("a", 8), ("b", 8)]);
    let p = place(&job, &view, Fit::Worst, FlexibleFit::ClusterFilling).unwrap();
    assert_eq!(names(&p), ["fs1", "fs1"]);
    assert_eq!(p.idle_after, [144, 48]);
    view.set_usable(1, false);
    assert_eq!(
        place(&job, &view, Fit::Worst, FlexibleFit::ClusterFilling)
            .unwrap_err()
            .to_string(),
        "component 0 (label `a`) needs 8 processors; no site is usable"
    );
}

/// Seed 003 §4.3.3, "Fitting an Ordered Job": two components on one site fit when their sum
/// does.
#[test]
fn ordered_fit_counts_earlier_components_on_a_site() {
    let s = vec![
        Site::cluster("fs0", 144),
        Site {
            idle: Some(40),
            ..Site::cluster("fs1", 64)
        },
    ];
    let job = ordered(&[("a", "fs1", 24), ("b", "fs0", 8), ("c", "fs1", 16)]);
    let p = run(&job, &s, Fit::Worst).unwrap();
    assert_eq!(names(&p), ["fs1", "fs0", "fs1"]);
    assert_eq!(p.idle_after, [136, 0]);
    // The fit does not matter for an ordered job.
    assert_eq!(run(&job, &s, Fit::First).unwrap(), p);

    // Each of 24 and 17 fits in fs1's 40 alone; together they do not.
    let job = ordered(&[("a", "fs1", 24), ("b", "fs0", 8), ("c", "fs1", 17)]);
    let err = run(&job, &s, Fit::Worst).unwrap_err();
    assert_eq!(
        err,
        NoFit::SiteFull {
            component: 2,
            label: Some("c".into()),
            site: "fs1".into(),
            needs: 17,
            idle: 16,
            idle_before: 40,
        }
    );
    assert_eq!(
        err.to_string(),
        "component 2 (label `c`) needs 17 processors on site `fs1`, which has 16 idle after the \
         job's earlier components there (40 before)"
    );
    let err = run(&ordered(&[("a", "fs1", 41)]), &s, Fit::Worst).unwrap_err();
    assert_eq!(
        err.to_string(),
        "component 0 (label `a`) needs 41 processors on site `fs1`, which has 40 idle"
    );
}

#[test]
fn ordered_fit_names_unknown_and_unusable_sites() {
    let s = sites(&[("fs0", 144), ("fs1", 64)]);
    let err = run(&ordered(&[("m", "fs9", 1)]), &s, Fit::Worst).unwrap_err();
    assert_eq!(
        err.to_string(),
        "site `fs9` named by component 0 (label `m`) is not in the site list"
    );
    let mut view = SiteView::from_sites(&s);
    view.set_usable(1, false);
    let job = ordered(&[("m", "fs0", 1), ("w", "fs1", 1)]);
    let err = place(&job, &view, Fit::Worst, FlexibleFit::ClusterFilling).unwrap_err();
    assert_eq!(
        err.to_string(),
        "site `fs1` named by component 1 (label `w`) is unusable"
    );
}

/// A total job is one component on one site with the chosen fit.
#[test]
fn total_job_uses_the_fit() {
    let s = sites(&[("fs0", 20), ("fs1", 64), ("fs2", 40)]);
    let job = Job::new(JobKind::Total, vec![comp("all", 32)]);
    assert_eq!(names(&run(&job, &s, Fit::Worst).unwrap()), ["fs1"]);
    assert_eq!(names(&run(&job, &s, Fit::Best).unwrap()), ["fs2"]);
    assert_eq!(names(&run(&job, &s, Fit::First).unwrap()), ["fs1"]);
    let big = Job::new(JobKind::Total, vec![comp("all", 65)]);
    assert_eq!(
        run(&big, &s, Fit::Worst).unwrap_err().to_string(),
        "component 0 (label `all`) needs 65 processors; the most idle on any usable site is 64"
    );
}

/// Components of equal size keep job order when sorted; the placement lists them in job
/// order and `to_ordered_job` names the chosen sites.
#[test]
fn equal_sizes_keep_job_order_and_the_ordered_job_names_sites() {
    let s = sites(&[("x", 10), ("y", 10)]);
    let job = unordered(&[("a", 4), ("b", 6), ("c", 4)]);
    let p = run(&job, &s, Fit::Worst).unwrap();
    // 6 (b) → x; 4 (a) → y (unmarked); marks cleared; 4 (c) → y (6 idle against x's 4).
    assert_eq!(names(&p), ["y", "x", "y"]);
    let o = p.to_ordered_job(&job);
    assert_eq!(o.kind, JobKind::Ordered);
    let sites: Vec<_> = o
        .components
        .iter()
        .map(|c| c.site.as_deref().unwrap())
        .collect();
    assert_eq!(sites, ["y", "x", "y"]);
    coalloc_core::spec::validate::validate(&o, &[]).unwrap();
}

/// The names of the fits, as the CLI takes them.
#[test]
fn fit_names_round_trip() {
    for f in Fit::ALL {
        assert_eq!(Fit::from_name(f.name()), Ok(f));
    }
    for f in FlexibleFit::ALL {
        assert_eq!(FlexibleFit::from_name(f.name()), Ok(f));
    }
    assert_eq!(Fit::default(), Fit::Worst);
    assert_eq!(
        Fit::from_name("worst-fit").unwrap_err(),
        "unknown fit `worst-fit` (expected one of: worst, best, first, worst-plain, ctf)"
    );
}

/// The bench's shape: 8 components over 1,000 sites, every fit.
#[test]
fn eight_components_over_a_thousand_sites() {
    let s: Vec<Site> = (0..1000)
        .map(|i| Site {
            idle: Some((i * 37 % 64) as u32),
            ..Site::cluster(format!("s{i}"), 64)
        })
        .collect();
    let job = unordered(&[
        ("a", 60),
        ("b", 50),
        ("c", 40),
        ("d", 63),
        ("e", 63),
        ("f", 10),
        ("g", 1),
        ("h", 33),
    ]);
    for fit in Fit::ALL {
        let p = run(&job, &s, fit).unwrap();
        assert_eq!(p.components.len(), 8);
    }
}
