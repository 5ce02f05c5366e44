//! The Realistic Synthetic Distribution of job sizes (seed 001 §2.1): on `[a, b]`, size `i`
//! has probability `q^i / Q`, or `3 q^i / Q` when `i` is a power of two, `Q` normalising.
//! It favours small sizes and powers of two, as real workloads do.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// The distribution on `[low, high]` with parameter `q`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rsd {
    low: u32,
    /// Cumulative probabilities of `low..=high`.
    cdf: Vec<f64>,
    mean: f64,
}

impl Rsd {
    /// `0 < q < 1`, `1 <= low <= high`.
    pub fn new(low: u32, high: u32, q: f64) -> Result<Rsd, String> {
        if !(q > 0.0 && q < 1.0) {
            return Err(format!("q must be in (0, 1), got {q}"));
        }
        if low == 0 || low > high {
            return Err(format!(
                "the size range [{low}, {high}] is empty or starts at 0"
            ));
        }
        let weight = |i: u32| if i.is_power_of_two() { 3.0 } else { 1.0 } * q.powi(i as i32);
        let total: f64 = (low..=high).map(weight).sum();
        let mut acc = 0.0;
        let cdf = (low..=high)
            .map(|i| {
                acc += weight(i) / total;
                acc
            })
            .collect();
        let mean = (low..=high).map(|i| f64::from(i) * weight(i) / total).sum();
        Ok(Rsd { low, cdf, mean })
    }

    /// The exact expected size.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// The probability of each size, from `low` up.
    pub fn probabilities(&self) -> Vec<f64> {
        let mut prev = 0.0;
        self.cdf
            .iter()
            .map(|&c| {
                let p = c - prev;
                prev = c;
                p
            })
            .collect()
    }

    /// One size.
    pub fn sample(&self, rng: &mut ChaCha8Rng) -> u32 {
        let u: f64 = rng.random();
        let k = self
            .cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1);
        self.low + k as u32
    }
}
