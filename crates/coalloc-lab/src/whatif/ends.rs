//! Each component's own end, read from its site's coalloc level in the surveillance log
//! (what a what-if's history says of components that end before the others of their job).

use coalloc_core::model::{Millis, Time};
use coalloc_server::logs::SiteSample;
use std::collections::BTreeMap;

/// One component of a finished job's last run, as the result log saw it (engine times).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Comp {
    /// The job's index in `workload.jobs`, the component's in the job.
    pub job: usize,
    pub component: usize,
    pub site: usize,
    pub count: u32,
    /// The run's placement, barrier release and end (its last component's end).
    pub placed: Time,
    pub release: Time,
    pub end: Time,
}

/// When each component ended, if before its job's end (`None`: with the job, as far as the
/// log tells), read from its site's coalloc level in the surveillance log: at each reading
/// the processors coalloc is seen to hold are compared with those of the components whose
/// runs hold processors then (placed, not yet ended); the difference is components that
/// have ended, chosen among the running ones (barrier released, job not ended) whose counts
/// add up to it exactly, those of the jobs that end first first. Readings within `guard` of
/// a placement on the site are skipped (the new launch may or may not be counted yet); a
/// difference no running components add up to exactly is left unexplained (their ends stay
/// their jobs'). A job keeps at least one component to its end.
pub fn component_ends(
    comps: &[Comp],
    samples: &BTreeMap<usize, Vec<&SiteSample>>,
    t0: i64,
    guard: Millis,
) -> Vec<Option<Time>> {
    let mut ended: Vec<Option<Time>> = vec![None; comps.len()];
    for (&site, readings) in samples {
        let here: Vec<usize> = (0..comps.len())
            .filter(|&i| comps[i].site == site)
            .collect();
        if here.is_empty() {
            continue;
        }
        for s in readings.iter() {
            let t = s.time - t0;
            if here
                .iter()
                .any(|&i| comps[i].placed <= t && t - comps[i].placed < guard)
            {
                continue;
            }
            let holding = |i: usize| {
                let c = &comps[i];
                c.placed <= t && t < c.end && ended[i].is_none_or(|e| e > t)
            };
            let held: u64 = here
                .iter()
                .filter(|&&i| holding(i))
                .map(|&i| u64::from(comps[i].count))
                .sum();
            let level = u64::from(s.coalloc);
            if level >= held {
                continue;
            }
            let mut running: Vec<usize> = here
                .iter()
                .copied()
                .filter(|&i| holding(i) && comps[i].release < t)
                .collect();
            running.sort_by_key(|&i| (comps[i].end, i));
            if let Some(chosen) =
                exact_subset(&running, |i| u64::from(comps[i].count), held - level)
            {
                for i in chosen {
                    ended[i] = Some(t);
                }
            }
        }
    }
    // A job ends with its last component: keep the one that ended last (or the first) to
    // the end.
    let mut jobs: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, c) in comps.iter().enumerate() {
        jobs.entry(c.job).or_default().push(i);
    }
    for members in jobs.values() {
        if members.iter().all(|&i| ended[i].is_some()) {
            if let Some(&last) = members.iter().max_by_key(|&&i| (ended[i], i)) {
                ended[last] = None;
            }
        }
    }
    ended
}

/// Some of `items` (in their order of preference) whose weights add up to `want` exactly,
/// preferring the earlier ones; `None` when none do (or `want` is too large to search).
fn exact_subset(items: &[usize], weight: impl Fn(usize) -> u64, want: u64) -> Option<Vec<usize>> {
    let want = usize::try_from(want).ok().filter(|w| *w <= 1 << 20)?;
    // reach[s]: the item that first reached sum s, and the sum before it.
    let mut reach: Vec<Option<(usize, usize)>> = vec![None; want + 1];
    let mut reached = vec![false; want + 1];
    reached[0] = true;
    for (k, &item) in items.iter().enumerate() {
        let w = usize::try_from(weight(item)).ok()?;
        if w == 0 || w > want {
            continue;
        }
        for s in (w..=want).rev() {
            if !reached[s] && reached[s - w] {
                reached[s] = true;
                reach[s] = Some((k, s - w));
            }
        }
    }
    if !reached[want] {
        return None;
    }
    let mut out = Vec::new();
    let mut s = want;
    while s > 0 {
        let (k, prev) = reach[s]?;
        out.push(items[k]);
        s = prev;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(time: i64, coalloc: u32) -> SiteSample {
        SiteSample {
            time,
            site: "alpha".into(),
            total: 16,
            idle: 16 - coalloc,
            coalloc,
            other: 0,
            healthy: true,
        }
    }

    #[test]
    fn a_component_that_ends_before_its_job_is_read_from_the_sites_level() {
        // Job 0: components of 3 and 5 on site 0, released at 100, ended at 9000; job 1: 4
        // processors there from 100 to 5000. The level falls by 3 at 4000 (job 0's first
        // component), by 4 at 5000 (job 1's end).
        let comp = |job, component, count, end| Comp {
            job,
            component,
            site: 0,
            count,
            placed: 0,
            release: 100,
            end,
        };
        let comps = [
            comp(0, 0, 3, 9000),
            comp(0, 1, 5, 9000),
            comp(1, 0, 4, 5000),
        ];
        let rs = [
            reading(500, 12),
            reading(4000, 9),
            reading(5000, 5),
            reading(9000, 0),
        ];
        let samples = BTreeMap::from([(0, rs.iter().collect::<Vec<_>>())]);
        assert_eq!(
            component_ends(&comps, &samples, 0, 300),
            vec![Some(4000), None, None]
        );
        // A reading just after a placement is not read (the launch may not count yet), and
        // a fall no running components add up to is left alone.
        let rs = [reading(200, 9), reading(4000, 10)];
        let samples = BTreeMap::from([(0, rs.iter().collect::<Vec<_>>())]);
        assert_eq!(component_ends(&comps, &samples, 0, 300), vec![None; 3]);
    }
}
