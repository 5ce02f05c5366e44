//! Properties of every placement: for random sites and jobs, a successful placement never
//! puts more processors on a site than it had idle, places every component exactly once (on
//! its named site for an ordered job), uses only usable sites, and is deterministic.

use coalloc_core::model::{Component, FileDistribution, Flexible, InputFile, Job, JobKind, Site};
use coalloc_core::placement::{place, place_sites, Fit, FlexibleFit, NoFit, SiteView};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A site list with each site's idle processors and usable flag.
type Parts = (Vec<Site>, Vec<u32>, Vec<bool>);

const NAMES: [&str; 6] = ["s0", "s1", "s2", "s3", "s4", "s5"];

/// Sites with idle counts and usable flags; some hold the file `f`, some have links.
fn view_parts() -> impl Strategy<Value = Parts> {
    (1usize..=6)
        .prop_flat_map(|n| {
            (
                prop::collection::vec((1u32..=64, 0u32..=100, any::<bool>()), n),
                prop::collection::vec(prop::bool::weighted(0.85), n),
                prop::collection::vec(prop::option::of(1u64..=1_000_000_000), n * n),
            )
        })
        .prop_map(|(specs, usable, links)| {
            let n = specs.len();
            let sites: Vec<Site> = specs
                .iter()
                .enumerate()
                .map(|(i, &(p, _, has_file))| Site {
                    files: if has_file {
                        vec!["f".into()]
                    } else {
                        Vec::new()
                    },
                    bandwidth: (0..n)
                        .filter(|&j| j != i)
                        .filter_map(|j| links[i * n + j].map(|b| (NAMES[j].to_string(), b)))
                        .collect::<BTreeMap<_, _>>(),
                    ..Site::cluster(NAMES[i], p)
                })
                .collect();
            let idle = specs.iter().map(|&(p, pct, _)| p * pct / 100).collect();
            (sites, idle, usable)
        })
}

fn job(n_sites: usize) -> impl Strategy<Value = Job> {
    let comps = prop::collection::vec((1u32..=40, 0..n_sites + 1), 1..=5);
    let file = prop::option::of((0u64..=10_000_000_000, any::<bool>()));
    (0..4u8, comps, file, 1u32..=150, 0u32..=40).prop_map(move |(k, comps, file, total, min)| {
        let kind = [
            JobKind::Ordered,
            JobKind::Unordered,
            JobKind::Total,
            JobKind::Flexible,
        ][k as usize];
        let mut components: Vec<Component> = comps
            .iter()
            .enumerate()
            .map(|(i, &(count, s))| {
                Component {
                    count,
                    site: (kind == JobKind::Ordered)
                        .then(|| NAMES.get(s).copied().unwrap_or("zz").into()),
                    ..Component::default()
                }
                .with(|d| {
                    d.label = Some(format!("c{i}"));
                })
            })
            .collect();
        if matches!(kind, JobKind::Total | JobKind::Flexible) {
            components.truncate(1);
        }
        let mut job = Job::new(kind, components);
        if kind == JobKind::Flexible {
            let min = min.clamp(1, total);
            job.components[0].count = total;
            job.set_flexible(Some(Flexible {
                total,
                min_component: Some(min),
            }));
        }
        job.extra_mut().input_file = file.map(|(size, chunks)| {
            Box::new(InputFile {
                name: "f".into(),
                size,
                distribution: if chunks {
                    FileDistribution::Chunks
                } else {
                    FileDistribution::Whole
                },
            })
        });
        job
    })
}

fn case() -> impl Strategy<Value = (Parts, Job, Fit, FlexibleFit)> {
    view_parts().prop_flat_map(|parts| {
        let n = parts.0.len();
        (
            Just(parts),
            job(n),
            prop::sample::select(Fit::ALL.to_vec()),
            prop::sample::select(FlexibleFit::ALL.to_vec()),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn placements_respect_idle_counts_and_place_everything(
        ((sites, idle, usable), job, fit, how) in case()
    ) {
        coalloc_core::spec::validate::validate(&job, &[]).unwrap();
        let view = SiteView::new(&sites, idle.clone(), usable.clone());
        let result = place(&job, &view, fit, how);
        // Deterministic: the same input gives the same output.
        prop_assert_eq!(&result, &place(&job, &view, fit, how));
        // The dry run agrees with the placement, processors per site and failure alike.
        let dry = place_sites(&job, &SiteView::borrowed(&sites, &idle, &usable), fit, how);
        match &result {
            Ok(p) => {
                let sites: Vec<(usize, u32)> =
                    p.components.iter().map(|c| (c.site, c.count)).collect();
                prop_assert_eq!(dry.map(|d| d.to_vec()), Ok(sites));
            }
            Err(e) => prop_assert_eq!(dry, Err(e.clone())),
        }
        let p = match result {
            Ok(p) => p,
            Err(NoFit::NoRoom { needs, most_idle, .. }) => {
                // Only when no usable site had room at that point.
                prop_assert!(most_idle.is_none_or(|m| m < needs));
                prop_assert!(job.kind == JobKind::Unordered || job.kind == JobKind::Total);
                return Ok(());
            }
            Err(NoFit::FlexibleCapacity { idle_on_big_enough, total, .. }) => {
                prop_assert!(idle_on_big_enough < u64::from(total));
                return Ok(());
            }
            Err(_) => return Ok(()),
        };
        let mut used = vec![0u32; sites.len()];
        for c in &p.components {
            prop_assert!(usable[c.site], "unusable site {} used", c.site);
            prop_assert_eq!(&c.site_name, &sites[c.site].name);
            used[c.site] += c.count;
            if let Some(f) = &c.file {
                prop_assert!(usable[f.site]);
                prop_assert!(sites[f.site].files.iter().any(|x| x == "f"));
                prop_assert_eq!(f.estimate == 0, f.site == c.site || f.bytes == 0);
            }
        }
        for s in 0..sites.len() {
            prop_assert!(used[s] <= idle[s], "site {} got {} with {} idle", s, used[s], idle[s]);
            prop_assert_eq!(p.idle_after[s], idle[s] - used[s]);
        }
        if job.kind == JobKind::Flexible {
            let f = job.flexible().unwrap();
            let min = f.min_component.unwrap();
            prop_assert_eq!(p.components.iter().map(|c| c.count).sum::<u32>(), f.total);
            let mut seen = vec![false; sites.len()];
            for c in &p.components {
                prop_assert!(c.count >= min, "piece {} < min {}", c.count, min);
                prop_assert_eq!(c.component, 0);
                prop_assert!(!seen[c.site], "two pieces on site {}", c.site);
                seen[c.site] = true;
            }
        } else {
            // Every component exactly once, in job order, with its own count and label.
            prop_assert_eq!(p.components.len(), job.components.len());
            for (i, (placed, c)) in p.components.iter().zip(&job.components).enumerate() {
                prop_assert_eq!(placed.component, i);
                prop_assert_eq!(placed.count, c.count);
                prop_assert_eq!(&placed.label, &c.details().label);
                if job.kind == JobKind::Ordered {
                    prop_assert_eq!(Some(placed.site_name.as_str()), c.site.as_deref());
                }
            }
        }
        let ordered = p.to_ordered_job(&job);
        prop_assert!(coalloc_core::spec::validate::validate(&ordered, &[]).is_ok());
    }

    /// A split into pieces of at least `m` exists exactly when the `total / m` usable sites
    /// with the most idle hold the total; both policies then find one, and fail otherwise.
    #[test]
    fn flexible_splits_succeed_exactly_when_a_split_exists(
        (sites, idle, usable) in view_parts(),
        total in 1u32..=200,
        min_pct in 1u32..=100,
    ) {
        let min = (total * min_pct / 100).max(1);
        let mut job = Job::new(JobKind::Flexible, vec![Component { count: total, ..Component::default() }]);
        job.set_flexible(Some(Flexible { total, min_component: Some(min) }));
        let view = SiteView::new(&sites, idle.clone(), usable.clone());
        let mut big: Vec<u32> = (0..sites.len())
            .filter(|&i| usable[i] && idle[i] >= min)
            .map(|i| idle[i])
            .collect();
        big.sort_unstable_by(|a, b| b.cmp(a));
        let exists = big.iter().take((total / min) as usize).sum::<u32>() >= total;
        for how in FlexibleFit::ALL {
            let r = place(&job, &view, Fit::Worst, how);
            prop_assert_eq!(r.is_ok(), exists, "{} {:?}", how, r);
            if let Ok(p) = r {
                prop_assert_eq!(p.components.iter().map(|c| c.count).sum::<u32>(), total);
                prop_assert!(p.components.iter().all(|c| c.count >= min && c.count <= idle[c.site]));
            }
        }
    }

    /// With pieces of any size, both splits succeed exactly when the usable sites have the
    /// total idle.
    #[test]
    fn flexible_without_a_minimum_fits_when_capacity_allows(
        (sites, idle, usable) in view_parts(),
        total in 1u32..=300,
    ) {
        let mut job = Job::new(JobKind::Flexible, vec![Component { count: total, ..Component::default() }]);
        job.set_flexible(Some(Flexible { total, min_component: None }));
        let view = SiteView::new(&sites, idle.clone(), usable.clone());
        let capacity: u32 = (0..sites.len()).filter(|&i| usable[i]).map(|i| idle[i]).sum();
        for how in FlexibleFit::ALL {
            prop_assert_eq!(place(&job, &view, Fit::Worst, how).is_ok(), capacity >= total);
        }
    }
}
