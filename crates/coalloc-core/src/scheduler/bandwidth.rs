//! The bandwidth model learns (seed 000 §2.6: Close-to-Files picks the site "such that the
//! (estimated) delay of transferring the input file ... is minimal"; §3.2's FTT is built on
//! the same estimate). Every measured transfer updates an exponentially weighted moving
//! average of the pair's throughput, the newest measurement weighing [`WEIGHT`]; the first
//! measurement is taken whole. From then on the pair's estimate is the average, not the
//! configured figure (which only seeds a pair never measured).

use super::api::SiteId;
use super::{Core, Rejected};

/// The newest measurement's weight in the average: 1/4.
pub const WEIGHT: (u64, u64) = (1, 4);

/// The average after a measurement of `rate` bytes per second (`old`: the previous one).
pub fn ewma(old: Option<u64>, rate: u64) -> u64 {
    match old {
        None => rate,
        Some(o) => {
            let (n, d) = WEIGHT;
            let v = (u128::from(o) * u128::from(d - n) + u128::from(rate) * u128::from(n))
                / u128::from(d);
            u64::try_from(v).unwrap_or(u64::MAX)
        }
    }
}

impl Core {
    pub(super) fn transfer_measured(
        &mut self,
        from: SiteId,
        to: SiteId,
        bytes: u64,
        millis: u64,
    ) -> Result<(), Rejected> {
        let n = self.sites.len();
        if let Some(bad) = [from, to].into_iter().find(|&s| s >= n) {
            return Err(Rejected::UnknownSite(bad));
        }
        if from == to || bytes == 0 {
            return Ok(());
        }
        let rate = u64::try_from(u128::from(bytes) * 1000 / u128::from(millis.max(1)))
            .unwrap_or(u64::MAX)
            .max(1);
        let avg = ewma(self.measured.get(&(from, to)).copied(), rate);
        self.measured.insert((from, to), avg);
        let to_name = self.sites.sites[to].name.clone();
        self.sites.sites[from].bandwidth.insert(to_name, avg);
        self.dirty = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::ewma;

    #[test]
    fn the_average_starts_at_the_first_measurement_and_moves_a_quarter_of_the_way() {
        assert_eq!(ewma(None, 1000), 1000);
        assert_eq!(ewma(Some(1000), 2000), 1250);
        assert_eq!(ewma(Some(1250), 2000), 1437);
        assert_eq!(ewma(Some(u64::MAX), u64::MAX), u64::MAX);
    }
}
