//! Run-time statistics of a set of jobs: the columns of seed 004's Table II.

use super::Job;

/// The mean run time and the nearest-rank percentiles of a set of jobs, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuntimeStats {
    /// The number of jobs with a known run time the figures are over.
    pub jobs: usize,
    /// The mean run time (exact sum, one division).
    pub mean: f64,
    /// 25th percentile (nearest rank).
    pub p25: i64,
    /// 50th percentile, the median (nearest rank).
    pub p50: i64,
    /// 75th percentile (nearest rank).
    pub p75: i64,
    /// 99th percentile (nearest rank).
    pub p99: i64,
}

impl RuntimeStats {
    /// The statistics of the jobs' known run times (jobs with an unknown run time are left
    /// out; [`super::read`] has already skipped them). `None` when no run time is known.
    pub fn of(jobs: &[Job]) -> Option<RuntimeStats> {
        RuntimeStats::from_run_times(jobs.iter().filter_map(Job::run_time).collect())
    }

    /// The statistics of run times in seconds, in any order. `None` when there are none.
    pub fn from_run_times(mut run_times: Vec<i64>) -> Option<RuntimeStats> {
        run_times.sort_unstable();
        let sum: i128 = run_times.iter().map(|&v| i128::from(v)).sum();
        Some(RuntimeStats {
            jobs: run_times.len(),
            mean: sum as f64 / run_times.len() as f64,
            p25: nearest_rank(&run_times, 25)?,
            p50: nearest_rank(&run_times, 50)?,
            p75: nearest_rank(&run_times, 75)?,
            p99: nearest_rank(&run_times, 99)?,
        })
    }

    /// `[mean, p25, p50, p75, p99]` in minutes (seconds / 60).
    pub fn minutes(&self) -> [f64; 5] {
        [
            self.mean / 60.0,
            self.p25 as f64 / 60.0,
            self.p50 as f64 / 60.0,
            self.p75 as f64 / 60.0,
            self.p99 as f64 / 60.0,
        ]
    }
}

/// The `percent`-th percentile of `sorted` (ascending) by the nearest-rank method: the value
/// at 1-based rank ⌈percent·n/100⌉, i.e. the smallest value that at least `percent` % of the
/// values do not exceed. Percent 0 gives the smallest value. `None` when `sorted` is empty
/// or `percent` is over 100.
pub fn nearest_rank(sorted: &[i64], percent: u32) -> Option<i64> {
    if sorted.is_empty() || percent > 100 {
        return None;
    }
    let n = sorted.len() as u128;
    let rank = (u128::from(percent) * n).div_ceil(100).max(1);
    sorted.get(usize::try_from(rank - 1).ok()?).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_by_hand() {
        // Wikipedia's example: 15, 20, 35, 40, 50.
        let v = [15, 20, 35, 40, 50];
        assert_eq!(nearest_rank(&v, 5), Some(15));
        assert_eq!(nearest_rank(&v, 30), Some(20));
        assert_eq!(nearest_rank(&v, 40), Some(20));
        assert_eq!(nearest_rank(&v, 50), Some(35));
        assert_eq!(nearest_rank(&v, 100), Some(50));
        assert_eq!(nearest_rank(&v, 0), Some(15));
        assert_eq!(nearest_rank(&v, 101), None);
        assert_eq!(nearest_rank(&[], 50), None);
        // 100 values 1..=100: the p-th percentile is p.
        let w: Vec<i64> = (1..=100).collect();
        for p in 1..=100 {
            assert_eq!(nearest_rank(&w, p), Some(i64::from(p)));
        }
    }

    #[test]
    fn stats_of_run_times() {
        let s = RuntimeStats::from_run_times(vec![600, 60, 0, 120]).unwrap();
        assert_eq!(s.jobs, 4);
        assert_eq!(s.mean, 195.0);
        assert_eq!((s.p25, s.p50, s.p75, s.p99), (0, 60, 120, 600));
        assert_eq!(s.minutes(), [3.25, 0.0, 1.0, 2.0, 10.0]);
        assert_eq!(RuntimeStats::from_run_times(vec![]), None);
    }
}
