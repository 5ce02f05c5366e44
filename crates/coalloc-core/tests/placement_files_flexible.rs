//! Worked examples of Close-to-Files (seed 000 §2.6, with §2.3's two file models) and of
//! the flexible splits, cluster filling and load balancing (seed 003 §3.2.1).

use coalloc_core::model::{Component, FileDistribution, Flexible, InputFile, Job, JobKind, Site};
use coalloc_core::placement::{
    bandwidth, place, transfer_millis, FileTransfer, Fit, FlexibleFit, NoFit, Placement, SiteView,
};
use std::collections::BTreeMap;

fn site(name: &str, processors: u32, idle: u32, files: &[&str], bw: &[(&str, u64)]) -> Site {
    Site {
        idle: Some(idle),
        files: files.iter().map(|f| f.to_string()).collect(),
        bandwidth: bw
            .iter()
            .map(|&(to, b)| (to.to_string(), b))
            .collect::<BTreeMap<_, _>>(),
        ..Site::cluster(name, processors)
    }
}

/// The replica catalog: `grid.dat` on `a` (too busy to run anything: 4 idle) and `d` (6
/// idle). `a` reaches `b` at 100 MB/s and `c` at 50 MB/s; `c` lists a 300 MB/s link to `d`,
/// which counts both ways. `b` and `d` list nothing, so `d` cannot send to `b`.
fn replica_sites() -> Vec<Site> {
    vec![
        site(
            "a",
            32,
            4,
            &["grid.dat"],
            &[("b", 100_000_000), ("c", 50_000_000)],
        ),
        site("b", 64, 64, &[], &[]),
        site("c", 64, 12, &[], &[("d", 300_000_000)]),
        site("d", 64, 6, &["grid.dat"], &[]),
    ]
}

fn job(distribution: FileDistribution) -> Job {
    let c = |l: &str| {
        Component {
            count: 8,
            ..Component::default()
        }
        .with(|d| {
            d.label = Some(l.into());
        })
    };
    let mut job = Job::new(JobKind::Unordered, vec![c("left"), c("right")]);
    job.extra_mut().input_file = Some(Box::new(InputFile {
        name: "grid.dat".into(),
        size: 4_000_000_000,
        distribution,
    }));
    job
}

fn run(job: &Job, sites: &[Site], fit: Fit) -> Result<Placement, NoFit> {
    place(
        job,
        &SiteView::from_sites(sites),
        fit,
        FlexibleFit::ClusterFilling,
    )
}

fn transfer(site: usize, name: &str, bytes: u64, estimate: i64) -> Option<FileTransfer> {
    Some(FileTransfer {
        site,
        site_name: name.into(),
        bytes,
        estimate,
    })
}

#[test]
fn bandwidths_and_estimates() {
    let s = replica_sites();
    assert_eq!(bandwidth(&s, 0, 1), Some(100_000_000));
    assert_eq!(bandwidth(&s, 1, 0), Some(100_000_000));
    assert_eq!(bandwidth(&s, 3, 2), Some(300_000_000));
    assert_eq!(bandwidth(&s, 3, 1), None);
    assert_eq!(bandwidth(&s, 1, 1), None);
    assert_eq!(transfer_millis(4_000_000_000, 300_000_000), 13_334);
    assert_eq!(transfer_millis(4_000_000_000, 100_000_000), 40_000);
    assert_eq!(transfer_millis(1, 3), 334);
}

/// Whole file: `left` (placed first; both are 8) can run on `b` (from `a`, 4 GB at 100 MB/s =
/// 40 s) or `c` (from `d`, 4 GB at 300 MB/s = 13.33 s, rounded up to 13,334 ms): `c`. Then
/// `c` has 4 idle, so `right` goes to `b`, fed from `a`. The job's FTT is 40 s.
#[test]
fn close_to_files_whole_file() {
    let s = replica_sites();
    let p = run(&job(FileDistribution::Whole), &s, Fit::CloseToFiles).unwrap();
    let got: Vec<_> = p
        .components
        .iter()
        .map(|c| (c.site_name.as_str(), c.file.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("c", transfer(3, "d", 4_000_000_000, 13_334)),
            ("b", transfer(0, "a", 4_000_000_000, 40_000)),
        ]
    );
    assert_eq!(p.idle_after, [4, 56, 4, 6]);
    assert_eq!(p.transfer_time(), Some(40_000));

    // The modified worst-fit puts `left` on the most idle site, `b`, and reports the file
    // transfers it implies.
    let w = run(&job(FileDistribution::Whole), &s, Fit::Worst).unwrap();
    let got: Vec<_> = w
        .components
        .iter()
        .map(|c| (c.site_name.as_str(), c.file.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("b", transfer(0, "a", 4_000_000_000, 40_000)),
            ("c", transfer(3, "d", 4_000_000_000, 13_334)),
        ]
    );
}

/// Chunks: each component of 8 out of 16 processors reads half the file, 2 GB: 6,667 ms
/// from `d` to `c` (6.67 s rounded up), 20,000 ms from `a` to `b`.
#[test]
fn close_to_files_chunks() {
    let p = run(
        &job(FileDistribution::Chunks),
        &replica_sites(),
        Fit::CloseToFiles,
    )
    .unwrap();
    let got: Vec<_> = p
        .components
        .iter()
        .map(|c| {
            (
                c.label.as_deref().unwrap(),
                c.site_name.as_str(),
                c.file.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("left", "c", transfer(3, "d", 2_000_000_000, 6_667)),
            ("right", "b", transfer(0, "a", 2_000_000_000, 20_000)),
        ]
    );
    assert_eq!(p.transfer_time(), Some(20_000));
}

/// A replica on the site itself costs nothing, and wins over any link.
#[test]
fn close_to_files_prefers_a_local_replica() {
    let mut s = replica_sites();
    s[3].idle = Some(16);
    let p = run(&job(FileDistribution::Whole), &s, Fit::CloseToFiles).unwrap();
    for c in &p.components {
        assert_eq!(c.site_name, "d");
        assert_eq!(c.file, transfer(3, "d", 4_000_000_000, 0));
    }
    assert_eq!(p.idle_after, [4, 64, 12, 0]);
}

#[test]
fn close_to_files_without_a_way_to_the_file() {
    // No bandwidths: `b` and `c` have room but no replica can reach them.
    let mut s = replica_sites();
    for x in &mut s {
        x.bandwidth.clear();
    }
    let err = run(&job(FileDistribution::Whole), &s, Fit::CloseToFiles).unwrap_err();
    assert_eq!(
        err.to_string(),
        "component 0 (label `left`) needs 8 processors and input file `grid.dat`: no usable \
         site with room is reachable from a replica (no bandwidth known)"
    );
    // The other fits still place the job; the transfers are unknown.
    let w = run(&job(FileDistribution::Whole), &s, Fit::Worst).unwrap();
    assert!(w.components.iter().all(|c| c.file.is_none()));

    // No replica anywhere.
    for x in &mut s {
        x.files.clear();
    }
    let err = run(&job(FileDistribution::Whole), &s, Fit::CloseToFiles).unwrap_err();
    assert_eq!(
        err.to_string(),
        "component 0 (label `left`) needs input file `grid.dat`, and no usable site holds a \
         replica of it"
    );
    // An unusable replica site does not serve the file.
    let mut s = replica_sites();
    let mut view = SiteView::from_sites(&s);
    view.set_usable(3, false);
    let p = place(
        &job(FileDistribution::Whole),
        &view,
        Fit::CloseToFiles,
        FlexibleFit::ClusterFilling,
    )
    .unwrap();
    assert_eq!(p.components[0].site_name, "b");
    assert_eq!(
        p.components[0].file,
        transfer(0, "a", 4_000_000_000, 40_000)
    );
    // Without an input file Close-to-Files is the modified worst-fit.
    s[0].files.clear();
    let mut plain = job(FileDistribution::Whole);
    plain.extra_mut().input_file = None;
    assert_eq!(
        run(&plain, &s, Fit::CloseToFiles),
        run(&plain, &s, Fit::Worst)
    );
}

/// The flexible example: 96 processors over
///
/// | site | processors | idle | load |
/// | f0   | 64         | 16   | 48   |
/// | f1   | 64         | 48   | 16   |
/// | f2   | 32         | 32   | 0    |
/// | f3   | 144        | 100  | 44   |
fn flexible_sites() -> Vec<Site> {
    vec![
        site("f0", 64, 16, &[], &[]),
        site("f1", 64, 48, &[], &[]),
        site("f2", 32, 32, &[], &[]),
        site("f3", 144, 100, &[], &[]),
    ]
}

fn flexible_job(total: u32, min: Option<u32>) -> Job {
    let mut job = Job::new(
        JobKind::Flexible,
        vec![Component {
            count: total,
            ..Component::default()
        }
        .with(|d| {
            d.label = Some("sweep".into());
            d.executable = Some("sweep".into());
        })],
    );
    job.set_flexible(Some(Flexible {
        total,
        min_component: min,
    }));
    job
}

fn split(job: &Job, sites: &[Site], how: FlexibleFit) -> Result<Placement, NoFit> {
    place(job, &SiteView::from_sites(sites), Fit::Worst, how)
}

fn pieces(p: &Placement) -> Vec<(&str, u32)> {
    p.components
        .iter()
        .map(|c| (c.site_name.as_str(), c.count))
        .collect()
}

/// Cluster filling: least loaded first — f2 (load 0) takes all 32, f1 (16) all 48, and f3
/// (44) the last 16. Loads after: f0 48, f1 64, f2 32, f3 60.
#[test]
fn cluster_filling_fills_the_least_loaded_sites() {
    let s = flexible_sites();
    let p = split(&flexible_job(96, Some(16)), &s, FlexibleFit::ClusterFilling).unwrap();
    assert_eq!(pieces(&p), [("f2", 32), ("f1", 48), ("f3", 16)]);
    assert_eq!(p.idle_after, [16, 0, 0, 84]);
    assert!(p.components.iter().all(|c| c.component == 0));

    // With pieces of at least 20, filling f1 would leave 16: f1 takes 44 and leaves 20.
    let p = split(&flexible_job(96, Some(20)), &s, FlexibleFit::ClusterFilling).unwrap();
    assert_eq!(pieces(&p), [("f2", 32), ("f1", 44), ("f3", 20)]);
}

/// Load balancing without a minimum: the water level is 58 — f0 takes 10 (load 58), f1 41
/// (57), f2 all 32 (32), f3 13 (57); the one unit above level 57 goes to the first site, f0.
/// With min_component 16, f0's 10 and f3's 13 are too small. The lowest level at which sites
/// taking at least 16 each hold 96 is 62: f1 46, f2 32, f3 18 (f0 would need level 64).
#[test]
fn load_balancing_evens_the_loads_and_respects_min_component() {
    let s = flexible_sites();
    let p = split(&flexible_job(96, None), &s, FlexibleFit::LoadBalancing).unwrap();
    assert_eq!(pieces(&p), [("f0", 10), ("f1", 41), ("f2", 32), ("f3", 13)]);
    assert_eq!(p.idle_after, [6, 7, 0, 87]);

    let p = split(&flexible_job(96, Some(16)), &s, FlexibleFit::LoadBalancing).unwrap();
    assert_eq!(pieces(&p), [("f1", 46), ("f2", 32), ("f3", 18)]);
    assert_eq!(p.idle_after, [16, 2, 0, 82]);
    // Pieces copy the template and become an ordered job with unique labels.
    let o = p.to_ordered_job(&flexible_job(96, Some(16)));
    let got: Vec<_> = o
        .components
        .iter()
        .map(|c| {
            (
                c.details().label.as_deref().unwrap(),
                c.site.as_deref().unwrap(),
                c.count,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("sweep-0", "f1", 46),
            ("sweep-1", "f2", 32),
            ("sweep-2", "f3", 18)
        ]
    );
    assert!(o
        .components
        .iter()
        .all(|c| c.details().executable.as_deref() == Some("sweep")));
    coalloc_core::spec::validate::validate(&o, &[]).unwrap();
}

/// A small piece that cannot be dropped (the other site alone cannot hold the total) is raised
/// to min_component: at level 30, A (load 20) would get 10 and B (load 0) 30. With pieces of
/// at least 15, the lowest level where A and B hold 40 is 35 (A 15, B 30: 45); the 5 too many
/// go back from B (A is at the minimum), so A gets 15 (load 35) and B 25 (load 25).
#[test]
fn load_balancing_raises_a_small_piece_it_cannot_drop() {
    let s = vec![site("A", 50, 30, &[], &[]), site("B", 30, 30, &[], &[])];
    let p = split(&flexible_job(40, None), &s, FlexibleFit::LoadBalancing).unwrap();
    assert_eq!(pieces(&p), [("A", 10), ("B", 30)]);
    let p = split(&flexible_job(40, Some(15)), &s, FlexibleFit::LoadBalancing).unwrap();
    assert_eq!(pieces(&p), [("A", 15), ("B", 25)]);
}

#[test]
fn flexible_jobs_that_do_not_fit_say_why() {
    let s = flexible_sites();
    let err = split(&flexible_job(200, Some(20)), &s, FlexibleFit::LoadBalancing).unwrap_err();
    assert_eq!(
        err.to_string(),
        "component 0 (label `sweep`) of the flexible job needs 200 processors; the usable \
         sites have 196 idle in all, 180 of them on sites with at least 20 idle (the smallest \
         piece allowed)"
    );
    // 25 in pieces of at least 15 is one piece, and no site has 25 idle.
    let s = vec![site("x", 64, 20, &[], &[]), site("y", 64, 20, &[], &[])];
    for how in FlexibleFit::ALL {
        let err = split(&flexible_job(25, Some(15)), &s, how).unwrap_err();
        assert_eq!(
            err.to_string(),
            "component 0 (label `sweep`) of the flexible job needs 25 processors in pieces of \
             at least 15, so on at most 1 site; the usable site with the most idle has 20"
        );
    }
    let s = vec![
        site("x", 64, 20, &[], &[]),
        site("y", 64, 20, &[], &[]),
        site("z", 64, 20, &[], &[]),
    ];
    let err = split(&flexible_job(50, Some(20)), &s, FlexibleFit::LoadBalancing).unwrap_err();
    assert_eq!(
        err,
        NoFit::FlexibleSplit {
            label: Some("sweep".into()),
            total: 50,
            min_component: 20,
            max_pieces: 2,
            idle_on_best_sites: 40,
        }
    );
    assert_eq!(
        err.to_string(),
        "component 0 (label `sweep`) of the flexible job needs 50 processors in pieces of at \
         least 20, so on at most 2 sites; the 2 usable sites with the most idle have 40 in all"
    );
    // In pieces of 10 or more it fits: cluster filling uses two sites, load balancing three.
    let p = split(&flexible_job(50, Some(10)), &s, FlexibleFit::ClusterFilling).unwrap();
    assert_eq!(pieces(&p), [("x", 20), ("y", 20), ("z", 10)]);
    let p = split(&flexible_job(50, Some(10)), &s, FlexibleFit::LoadBalancing).unwrap();
    assert_eq!(pieces(&p), [("x", 17), ("y", 17), ("z", 16)]);
}
