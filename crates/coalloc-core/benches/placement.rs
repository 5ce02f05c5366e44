//! Placement of one 8-component unordered job over 1,000 sites, with every fit.
//!
//! The sites have 16–128 processors, 0–100 % of them idle (a fixed pseudo-random pattern, so
//! every run measures the same thing). For Close-to-Files the job has a 2 GB input file with
//! replicas on 10 of the sites, each linked to every other site; the other fits see the same
//! job and report the file site they would use.
//!
//! `cargo bench -p coalloc-core --bench placement`

use coalloc_core::model::{Component, FileDistribution, InputFile, Job, JobKind, Site};
use coalloc_core::placement::{place, Fit, FlexibleFit, SiteView};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;

const SITES: usize = 1_000;
const REPLICAS: usize = 10;

/// A small deterministic generator (SplitMix64), so the benches need no `rand`.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn sites() -> (Vec<Site>, Vec<u32>) {
    let mut mix = Mix(42);
    let mut sites: Vec<Site> = (0..SITES)
        .map(|i| Site::cluster(format!("site{i:04}"), 16 + mix.below(113) as u32))
        .collect();
    let idle = sites
        .iter()
        .map(|s| (u64::from(s.processors) * mix.below(101) / 100) as u32)
        .collect();
    let names: Vec<String> = sites.iter().map(|s| s.name.clone()).collect();
    for r in 0..REPLICAS {
        let site = &mut sites[r * (SITES / REPLICAS)];
        site.files.push("data".to_owned());
        for (j, name) in names.iter().enumerate() {
            if *name != site.name {
                site.bandwidth
                    .insert(name.clone(), 10_000_000 + 1_000_000 * (j as u64 % 97));
            }
        }
    }
    (sites, idle)
}

fn job() -> Job {
    let mut job = Job::new(
        JobKind::Unordered,
        [32, 24, 16, 16, 8, 8, 4, 4]
            .into_iter()
            .map(|count| Component {
                count,
                ..Component::default()
            })
            .collect(),
    );
    job.extra_mut().input_file = Some(Box::new(InputFile {
        name: "data".to_owned(),
        size: 2_000_000_000,
        distribution: FileDistribution::Whole,
    }));
    job
}

fn placement(c: &mut Criterion) {
    let (sites, idle) = sites();
    let view = SiteView::new(&sites, idle, vec![true; SITES]);
    let job = job();
    let mut group = c.benchmark_group("place 8-component unordered job, 1000 sites");
    for fit in Fit::ALL {
        let p = place(&job, &view, fit, FlexibleFit::ClusterFilling).expect("the job fits");
        assert_eq!(p.components.len(), 8);
        group.bench_with_input(BenchmarkId::from_parameter(fit.name()), &fit, |b, &fit| {
            b.iter(|| {
                place(
                    black_box(&job),
                    black_box(&view),
                    fit,
                    FlexibleFit::ClusterFilling,
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, placement);
criterion_main!(benches);
