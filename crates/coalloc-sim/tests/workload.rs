//! Seed 001's workload: the Realistic Synthetic Distribution's means (E[Sl] = 6.95 on [1, 32]
//! and E[Sg] = 10.44 on [4, 32] with q = 0.9, seed 001 §3.1) come out of the generators within
//! sampling error; streams are reproducible and independent per purpose.

use coalloc_sim::workload::rsd::Rsd;
use coalloc_sim::workload::seed001::{global_jobs, local_jobs, GlobalParams, LocalParams};

/// Sample mean and the standard error of the mean.
fn mean_and_se(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    (m, (var / n).sqrt())
}

#[test]
fn the_exact_means_are_the_papers() {
    let local = Rsd::new(1, 32, 0.9).unwrap();
    let global = Rsd::new(4, 32, 0.9).unwrap();
    assert!((local.mean() - 6.95).abs() < 0.005, "{}", local.mean());
    assert!((global.mean() - 10.44).abs() < 0.005, "{}", global.mean());
    let p = local.probabilities();
    assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    // Size 16 (a power of two) is three times as likely as size 15 would be at its place.
    assert!((p[15] / p[14] - 3.0 * 0.9).abs() < 1e-9);
}

#[test]
fn generated_sizes_have_the_papers_means_within_sampling_error() {
    let local = local_jobs(
        &LocalParams {
            cluster_size: 32,
            q: 0.9,
            arrival_rate: 1.0,
            service_rate: 0.01,
        },
        7,
        0,
        200_000_000,
    )
    .unwrap();
    let sizes: Vec<f64> = local.iter().map(|j| f64::from(j.size)).collect();
    assert!(sizes.len() > 190_000);
    let (m, se) = mean_and_se(&sizes);
    assert!((m - 6.95).abs() < 4.0 * se + 0.005, "E[Sl] {m} ± {se}");
    let global = global_jobs(&GlobalParams::paper(0.01), 7, 200_000).unwrap();
    let sizes: Vec<f64> = global.iter().map(|j| f64::from(j.components[0])).collect();
    let (m, se) = mean_and_se(&sizes);
    assert!((m - 10.44).abs() < 4.0 * se + 0.005, "E[Sg] {m} ± {se}");
    // Components uniform on [2, 4]: mean 3; runtimes exponential with mean 200 s.
    let comps: Vec<f64> = global.iter().map(|j| j.components.len() as f64).collect();
    let (m, se) = mean_and_se(&comps);
    assert!((m - 3.0).abs() < 4.0 * se, "E[Nc] {m}");
    let runtimes: Vec<f64> = global.iter().map(|j| j.runtime as f64 / 1000.0).collect();
    let (m, se) = mean_and_se(&runtimes);
    assert!((m - 200.0).abs() < 4.0 * se, "E[runtime] {m}");
    assert!(global
        .iter()
        .all(|j| j.deadline - j.submit >= 1_000 && j.deadline - j.submit <= 3_599_000));
}

#[test]
fn streams_are_reproducible_and_independent_per_purpose() {
    let a = global_jobs(&GlobalParams::paper(0.01), 42, 1_000).unwrap();
    assert_eq!(
        global_jobs(&GlobalParams::paper(0.01), 42, 1_000).unwrap(),
        a
    );
    // A different arrival rate changes the arrivals only: sizes, components, runtimes and
    // deadlines (relative to submission) stay the same.
    let b = global_jobs(&GlobalParams::paper(0.02), 42, 1_000).unwrap();
    assert_ne!(
        a.iter().map(|j| j.submit).collect::<Vec<_>>(),
        b.iter().map(|j| j.submit).collect::<Vec<_>>()
    );
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            (&x.components, x.runtime, x.deadline - x.submit),
            (&y.components, y.runtime, y.deadline - y.submit)
        );
    }
    let c = global_jobs(&GlobalParams::paper(0.01), 43, 1_000).unwrap();
    assert_ne!(a, c);
}

#[test]
fn seed_000_jobs_follow_the_papers_rules() {
    use coalloc_core::model::Priority;
    use coalloc_sim::workload::seed000;
    let jobs = seed000::jobs(0.01, 5, 3, 2_000).unwrap();
    let mut shapes = std::collections::BTreeSet::new();
    let mut high = 0;
    for j in &jobs {
        let n = j.job.components.len() as u32;
        let size = j.job.total_processors();
        assert!(size == 36 || size == 72, "{size}");
        assert!(j
            .job
            .components
            .iter()
            .all(|c| c.count * n == size as u32 && c.count > 8));
        shapes.insert((size, n));
        let file = j.job.input_file().unwrap();
        assert!(file.size == 4_000_000_000 || file.size == 8_000_000_000);
        assert!(j.replicas[0] != j.replicas[1] && j.replicas.iter().all(|&s| s < 5));
        assert!((30_000..=192_000).contains(&j.runtime));
        high += usize::from(j.job.priority == Priority::High);
    }
    // Size 36 takes 3 or 4 components (12 or 9 processors); size 72 any of 3, 4, 6, 8.
    let expected: std::collections::BTreeSet<(u64, u32)> =
        [(36, 3), (36, 4), (72, 3), (72, 4), (72, 6), (72, 8)]
            .into_iter()
            .collect();
    assert_eq!(shapes, expected);
    assert!(
        (900..1_100).contains(&high),
        "priorities are uniform: {high} of 2,000 high"
    );
    assert!(jobs.windows(2).all(|w| w[0].job.submit <= w[1].job.submit));
}

#[test]
fn seed_003_batches_are_forty_four_component_jobs_at_once() {
    use coalloc_core::model::JobKind;
    use coalloc_sim::workload::seed003::{batch, BatchKind};
    let sites: Vec<String> = ["fs0", "fs1", "fs2", "fs3"].map(String::from).to_vec();
    let mixed = batch(BatchKind::Mixed, 8, 40, &sites).unwrap();
    assert_eq!(mixed.len(), 40);
    assert!(mixed
        .iter()
        .all(|j| j.submit == Some(0) && j.components.len() == 4));
    let ordered = mixed.iter().filter(|j| j.kind == JobKind::Ordered).count();
    assert_eq!(ordered, 20);
    let first_ordered = mixed.iter().find(|j| j.kind == JobKind::Ordered).unwrap();
    let named: Vec<_> = first_ordered
        .components
        .iter()
        .map(|c| c.site.as_deref().unwrap())
        .collect();
    assert_eq!(named, ["fs1", "fs2", "fs3", "fs0"]);
    for j in batch(BatchKind::Unordered, 4, 40, &[]).unwrap() {
        coalloc_core::spec::validate::validate(&j, &[]).unwrap();
        assert_eq!(j.total_processors(), 16);
    }
    assert!(batch(BatchKind::Ordered, 8, 40, &[]).is_err());
}
