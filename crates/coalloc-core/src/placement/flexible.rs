//! Splitting a flexible job's total over sites (seed 003 §3.2.1): cluster filling and load
//! balancing, with no piece smaller than the job's `min_component`.
//!
//! Only usable sites with at least `min_component` (`m`) idle processors can take a piece;
//! the *load* of a site is its busy processors, `processors - idle`. A split of `T`
//! processors exists exactly when the `K = T / m` sites with the most idle hold `T` between
//! them (no more than `K` pieces of at least `m` fit in `T`); when it does not, both policies
//! fail with [`NoFit::FlexibleSplit`], and when one exists both find one.
//!
//! **Cluster filling** visits the sites from the least loaded (ties: site order) and fills
//! each completely until the total is met. A site is skipped when taking it would leave no
//! way to finish with pieces of at least `m` (too many sites for `T`). When the last piece
//! is smaller than `m`, the remainder is folded back: the pieces before it, latest first,
//! give it processors down to `m` each.
//!
//! **Load balancing** pours the total into the sites like water: every site that gets a piece
//! ends at the same load `W` (or `W - 1`; the units above `W - 1` go to the earlier sites),
//! the lowest level that holds the total, unless the site fills up below it; sites already
//! above `W` get nothing. When a
//! piece comes out smaller than `m`, the split is made at the lowest level `W` at which the
//! `K` sites that can take the most processors up to `W` — each at least `m` — hold the
//! total (ties: the less loaded, then the earlier site); the processors beyond the total are
//! then given back by the most loaded of those sites, evenly, none going below `m`. So the
//! most loaded site that gets a piece is as little loaded as the rules allow.

use super::{FlexibleFit, NoFit, SiteView};

/// Why a split failed; [`SplitError::into_no_fit`] adds the job's words.
#[derive(Debug)]
pub(super) enum SplitError {
    /// The usable sites with at least `m` idle hold less than the total.
    Capacity { idle: u64, idle_on_big_enough: u64 },
    /// The `max_pieces` sites with the most idle hold less than the total.
    Pieces { max_pieces: u32, idle_on_best: u64 },
}

impl SplitError {
    pub(super) fn into_no_fit(self, label: Option<&str>, total: u32, min: u32) -> NoFit {
        match self {
            SplitError::Capacity {
                idle,
                idle_on_big_enough,
            } => NoFit::FlexibleCapacity {
                label: label.map(str::to_owned),
                total,
                min_component: min,
                idle,
                idle_on_big_enough,
            },
            SplitError::Pieces {
                max_pieces,
                idle_on_best,
            } => NoFit::FlexibleSplit {
                label: label.map(str::to_owned),
                total,
                min_component: min,
                max_pieces,
                idle_on_best_sites: idle_on_best,
            },
        }
    }
}

/// Split `total` processors into `(site, count)` pieces of at least `min` each, on distinct
/// sites.
pub(super) fn split(
    total: u32,
    min: u32,
    view: &SiteView,
    how: FlexibleFit,
) -> Result<Vec<(usize, u32)>, SplitError> {
    let min = min.max(1);
    let idle = view.idle();
    let usable = view.usable();
    let cands: Vec<usize> = (0..view.len())
        .filter(|&i| usable[i] && idle[i] >= min)
        .collect();
    let caps: Vec<u64> = cands.iter().map(|&i| u64::from(idle[i])).collect();
    let capacity: u64 = caps.iter().sum();
    if capacity < u64::from(total) {
        return Err(SplitError::Capacity {
            idle: (0..view.len())
                .filter(|&i| usable[i])
                .map(|i| u64::from(idle[i]))
                .sum(),
            idle_on_big_enough: capacity,
        });
    }
    if total == 0 {
        return Ok(Vec::new());
    }
    let max_pieces = total / min;
    let best = top_sum(caps, max_pieces as usize);
    let no_split = SplitError::Pieces {
        max_pieces,
        idle_on_best: best,
    };
    if best < u64::from(total) {
        return Err(no_split);
    }
    let t = u64::from(total);
    let m = u64::from(min);
    let pieces = match how {
        FlexibleFit::ClusterFilling => cluster_filling(t, m, view, cands),
        FlexibleFit::LoadBalancing => load_balancing(t, m, view, cands),
    };
    // A split exists, and both policies find one when it does; `None` would be a bug.
    let pieces = pieces.ok_or(no_split)?;
    Ok(pieces
        .into_iter()
        .filter(|&(_, x)| x > 0)
        .map(|(i, x)| (i, x as u32))
        .collect())
}

/// The sum of the `k` largest values.
fn top_sum(mut values: Vec<u64>, k: usize) -> u64 {
    if k == 0 {
        return 0;
    }
    if values.len() > k {
        values.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
        values.truncate(k);
    }
    values.iter().sum()
}

fn cluster_filling(
    t: u64,
    m: u64,
    view: &SiteView,
    mut order: Vec<usize>,
) -> Option<Vec<(usize, u64)>> {
    order.sort_by_key(|&i| (view.load(i), i));
    let idle = |i: usize| u64::from(view.idle()[i]);
    let k = (t / m) as usize;
    let mut chosen: Vec<usize> = Vec::new();
    let mut cap = 0u64;
    for (pos, &i) in order.iter().enumerate() {
        if cap >= t || chosen.len() >= k {
            break;
        }
        let with = cap + idle(i);
        // Taking this site leaves a way to finish: the best `k - chosen - 1` later sites hold
        // the rest.
        let can_finish = with >= t || {
            let later = order[pos + 1..].iter().map(|&j| idle(j)).collect();
            with + top_sum(later, k - chosen.len() - 1) >= t
        };
        if can_finish {
            chosen.push(i);
            cap = with;
        }
    }
    if cap < t {
        return None;
    }
    let mut pieces: Vec<u64> = chosen.iter().map(|&i| idle(i)).collect();
    let last = pieces.len() - 1;
    pieces[last] -= cap - t;
    // Fold a small remainder back: earlier pieces, latest first, give down to `m`.
    let mut need = m.saturating_sub(pieces[last]);
    pieces[last] += need;
    for p in pieces[..last].iter_mut().rev() {
        let give = need.min(*p - m);
        *p -= give;
        need -= give;
    }
    (need == 0).then(|| chosen.into_iter().zip(pieces).collect())
}

fn load_balancing(t: u64, m: u64, view: &SiteView, cands: Vec<usize>) -> Option<Vec<(usize, u64)>> {
    let loads: Vec<u64> = cands.iter().map(|&i| u64::from(view.load(i))).collect();
    let caps: Vec<u64> = cands.iter().map(|&i| u64::from(view.idle()[i])).collect();
    let xs = pour(&loads, &caps, t);
    let xs = if xs.iter().any(|&x| x > 0 && x < m) {
        bottleneck(t, m, &loads, &caps)?
    } else {
        xs
    };
    Some(cands.into_iter().zip(xs).collect())
}

/// Water-filling: `x[k] = clamp(W - loads[k], 0, caps[k])` at the lowest level `W` where the
/// pieces hold `total`, the units above `total` left out of the last sites at level `W`.
/// Needs `sum(caps) >= total`.
fn pour(loads: &[u64], caps: &[u64], total: u64) -> Vec<u64> {
    let at = |w: u64, k: usize| w.saturating_sub(loads[k]).min(caps[k]);
    let sum = |w: u64| (0..loads.len()).map(|k| at(w, k)).sum::<u64>();
    let top = (0..loads.len())
        .map(|k| loads[k] + caps[k])
        .max()
        .unwrap_or(0);
    let w = lowest(0, top, |w| sum(w) >= total);
    if w == 0 {
        return vec![0; loads.len()];
    }
    let mut xs: Vec<u64> = (0..loads.len()).map(|k| at(w - 1, k)).collect();
    let mut left = total - xs.iter().sum::<u64>();
    for (k, x) in xs.iter_mut().enumerate() {
        if left == 0 {
            break;
        }
        if at(w, k) > *x {
            *x += 1;
            left -= 1;
        }
    }
    xs
}

/// The lowest `w` in `lo..=hi` with `ok(w)`, for a monotone `ok` that holds at `hi`.
fn lowest(mut lo: u64, mut hi: u64, ok: impl Fn(u64) -> bool) -> u64 {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// Load balancing with pieces of at least `m`: the lowest level `W` at which the `t / m` sites
/// that can take the most up to `W` (at least `m` each) hold `t`; those sites take that
/// much, then the most loaded give back the excess. `None` when no level works.
fn bottleneck(t: u64, m: u64, loads: &[u64], caps: &[u64]) -> Option<Vec<u64>> {
    let n = loads.len();
    let k = (t / m) as usize;
    let up_to = |w: u64, i: usize| {
        if w >= loads[i] + m {
            caps[i].min(w - loads[i])
        } else {
            0
        }
    };
    let top = (0..n).map(|i| loads[i] + caps[i]).max().unwrap_or(0);
    if top_sum((0..n).map(|i| up_to(top, i)).collect(), k) < t {
        return None;
    }
    let w = lowest(0, top, |w| {
        top_sum((0..n).map(|i| up_to(w, i)).collect(), k) >= t
    });
    let mut order: Vec<usize> = (0..n).filter(|&i| up_to(w, i) > 0).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(up_to(w, i)), loads[i], i));
    order.truncate(k);
    let mut xs = vec![0u64; n];
    for &i in &order {
        xs[i] = up_to(w, i);
    }
    let excess = xs.iter().sum::<u64>() - t;
    give_back(loads, &mut xs, m, excess).then_some(xs)
}

/// Take `amount` from the pieces above `m` whose sites are most loaded, by lowering a ceiling
/// on `load + piece` (no piece below `m`; at the last step, the later sites give first).
/// False when the pieces cannot spare that much.
fn give_back(loads: &[u64], xs: &mut [u64], m: u64, amount: u64) -> bool {
    let n = xs.len();
    let spare: u64 = xs.iter().filter(|&&x| x > m).map(|&x| x - m).sum();
    if spare < amount {
        return false;
    }
    if amount == 0 {
        return true;
    }
    let cut = |c: u64, k: usize| {
        if xs[k] > m {
            c.saturating_sub(loads[k]).clamp(m, xs[k])
        } else {
            xs[k]
        }
    };
    let taken = |c: u64| (0..n).map(|k| xs[k] - cut(c, k)).sum::<u64>();
    let top = (0..n).map(|k| loads[k] + xs[k]).max().unwrap_or(0);
    // The lowest ceiling that takes less than `amount`; one below it takes enough.
    let c = lowest(0, top, |c| taken(c) < amount);
    let mut left = amount - taken(c);
    let mut next: Vec<u64> = (0..n).map(|k| cut(c, k)).collect();
    for k in (0..n).rev() {
        if left == 0 {
            break;
        }
        if next[k] > m && loads[k] + next[k] == c {
            next[k] -= 1;
            left -= 1;
        }
    }
    xs.copy_from_slice(&next);
    true
}
