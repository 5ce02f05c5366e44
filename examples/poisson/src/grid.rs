//! One vertical strip of the grid and the red-black Gauss-Seidel half-sweeps on it (seed 003
//! §6.1: "all points of one colour must be visited prior to the ones of the other colour";
//! seed 000 §4.1: the unit square split into adjacent vertical strips, one per cluster).
//!
//! The problem is -Δu = f on the unit square, u = g on the boundary, with the analytic
//! solution u = sin(πx)·sin(πy), so f = 2π²u and g = u; the n×n interior points sit at
//! (x, y) = (j·h, i·h), h = 1/(n+1), i and j from 1 to n. A point is red when i + j is even.

use std::f64::consts::PI;

/// The analytic solution.
pub fn exact(x: f64, y: f64) -> f64 {
    (PI * x).sin() * (PI * y).sin()
}

/// The first global column (from 1) and the width of every strip: each strip gets one
/// column, and the other n − C columns are shared in proportion to `weights` (the
/// components' sizes, COALLOC_SIZES) by largest remainder, ties to the lower index — equal
/// sizes give equal widths up to one column. `None` when there are fewer columns than strips.
pub fn split(n: usize, weights: &[u32]) -> Option<Vec<(usize, usize)>> {
    let c = weights.len();
    if c == 0 || n < c {
        return None;
    }
    let spare = (n - c) as u128;
    let total: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    let weight = |k: usize| {
        if total == 0 {
            1
        } else {
            u128::from(weights[k])
        }
    };
    let sum = if total == 0 { c as u128 } else { total };
    let mut widths: Vec<usize> = (0..c)
        .map(|k| 1 + (spare * weight(k) / sum) as usize)
        .collect();
    let mut left = n - widths.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..c).collect();
    order.sort_by_key(|&k| (std::cmp::Reverse(spare * weight(k) % sum), k));
    for &k in order.iter().cycle().take(c * 2) {
        if left == 0 {
            break;
        }
        widths[k] += 1;
        left -= 1;
    }
    let mut first = 1;
    Some(
        widths
            .into_iter()
            .map(|w| {
                let s = (first, w);
                first += w;
                s
            })
            .collect(),
    )
}

/// The two colours of a half-sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    Red = 0,
    Black = 1,
}

/// A strip of `width` columns starting at global column `first`, with one halo column on
/// each side (the neighbour's edge, or the boundary) and the boundary rows 0 and n+1.
/// Columns are contiguous in memory (column-major), so an edge column is one slice.
#[derive(Debug, Clone)]
pub struct Strip {
    n: usize,
    first: usize,
    width: usize,
    /// Current values, `(width + 2) × (n + 2)`.
    u: Vec<f64>,
    /// h²·f at each point, same layout.
    rhs: Vec<f64>,
}

impl Strip {
    /// A strip with interior values 0 and the boundary set from the analytic solution.
    pub fn new(n: usize, first: usize, width: usize) -> Strip {
        let h = 1.0 / (n as f64 + 1.0);
        let rows = n + 2;
        let mut u = vec![0.0; (width + 2) * rows];
        let mut rhs = vec![0.0; (width + 2) * rows];
        for lc in 0..width + 2 {
            let gj = first + lc - 1;
            for i in 0..rows {
                let (x, y) = (gj as f64 * h, i as f64 * h);
                let on_boundary = gj == 0 || gj == n + 1 || i == 0 || i == n + 1;
                if on_boundary {
                    u[lc * rows + i] = exact(x, y);
                } else {
                    rhs[lc * rows + i] = h * h * 2.0 * PI * PI * exact(x, y);
                }
            }
        }
        Strip {
            n,
            first,
            width,
            u,
            rhs,
        }
    }

    /// Update every interior point of `colour` in the strip; the largest change.
    pub fn half_sweep(&mut self, colour: Colour) -> f64 {
        let rows = self.n + 2;
        let mut change: f64 = 0.0;
        for lc in 1..=self.width {
            let gj = self.first + lc - 1;
            let start = if (1 + gj) % 2 == colour as usize {
                1
            } else {
                2
            };
            let base = lc * rows;
            for i in (start..=self.n).step_by(2) {
                let k = base + i;
                let new = (self.u[k - 1]
                    + self.u[k + 1]
                    + self.u[k - rows]
                    + self.u[k + rows]
                    + self.rhs[k])
                    * 0.25;
                change = change.max((new - self.u[k]).abs());
                self.u[k] = new;
            }
        }
        change
    }

    /// The interior values of the strip's first (`left`) or last owned column.
    pub fn edge(&self, left: bool) -> &[f64] {
        let lc = if left { 1 } else { self.width };
        let rows = self.n + 2;
        &self.u[lc * rows + 1..lc * rows + 1 + self.n]
    }

    /// Overwrite the interior of the left or right halo column with a neighbour's edge.
    pub fn set_halo(&mut self, left: bool, values: &[f64]) {
        let lc = if left { 0 } else { self.width + 1 };
        let rows = self.n + 2;
        self.u[lc * rows + 1..lc * rows + 1 + self.n].copy_from_slice(values);
    }

    /// The largest distance to the analytic solution over the strip's own points.
    pub fn max_error(&self) -> f64 {
        let h = 1.0 / (self.n as f64 + 1.0);
        let rows = self.n + 2;
        let mut worst: f64 = 0.0;
        for lc in 1..=self.width {
            let gj = self.first + lc - 1;
            for i in 1..=self.n {
                let e = (self.u[lc * rows + i] - exact(gj as f64 * h, i as f64 * h)).abs();
                // NaN (a diverging run) must not hide behind `max`.
                worst = if e.is_nan() { f64::NAN } else { worst.max(e) };
            }
        }
        worst
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_proportional_and_covers_every_column() {
        assert_eq!(
            split(64, &[1, 1, 1]).unwrap(),
            vec![(1, 22), (23, 21), (44, 21)]
        );
        assert_eq!(
            split(10, &[8, 8, 16]).unwrap(),
            vec![(1, 3), (4, 3), (7, 4)]
        );
        assert_eq!(
            split(3, &[1, 100, 1]).unwrap(),
            vec![(1, 1), (2, 1), (3, 1)]
        );
        assert_eq!(split(5, &[0, 0]).unwrap(), vec![(1, 3), (4, 2)]);
        assert!(split(2, &[1, 1, 1]).is_none());
        for n in 3..40 {
            let s = split(n, &[3, 1, 7]).unwrap();
            assert_eq!(s.iter().map(|p| p.1).sum::<usize>(), n);
            assert!(s.iter().all(|p| p.1 >= 1));
        }
    }

    #[test]
    fn edges_and_halos_are_the_right_columns() {
        // Columns 3 and 4 of a 4×4 grid; the left halo is column 2.
        let mut fed = Strip::new(4, 3, 2);
        let mut plain = fed.clone();
        fed.set_halo(true, &[1.0, 2.0, 3.0, 4.0]);
        fed.half_sweep(Colour::Red);
        plain.half_sweep(Colour::Red);
        let (a, b) = (fed.edge(true), plain.edge(true));
        // Row 1 of column 3 is red (1 + 3 even): it saw the halo's 1.0 with weight 1/4.
        assert!((a[0] - b[0] - 0.25).abs() < 1e-12);
        // Row 2 is black: untouched by a red half-sweep.
        assert_eq!((a[1], b[1]), (0.0, 0.0));
        // The right edge (column 4) does not touch the left halo.
        assert_eq!(fed.edge(false), plain.edge(false));
    }
}
