//! The sites whose holdings changed at the current instant: a bit per site, taken lowest
//! number first (the order the engine settles them in, as the ordered set it replaces did).

use coalloc_core::scheduler::SiteId;

#[derive(Debug, Default)]
pub(super) struct SiteSet {
    words: Vec<u64>,
}

impl SiteSet {
    pub(super) fn insert(&mut self, site: SiteId) {
        let w = site / 64;
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (site % 64);
    }

    /// Take the lowest site held.
    pub(super) fn pop_first(&mut self) -> Option<SiteId> {
        let (w, word) = self.words.iter_mut().enumerate().find(|(_, x)| **x != 0)?;
        let bit = word.trailing_zeros() as usize;
        *word &= *word - 1;
        Some(w * 64 + bit)
    }
}

#[cfg(test)]
mod tests {
    use super::SiteSet;

    #[test]
    fn pops_lowest_first_once_each() {
        let mut s = SiteSet::default();
        for site in [130, 3, 64, 3, 0, 63] {
            s.insert(site);
        }
        let mut out = Vec::new();
        while let Some(site) = s.pop_first() {
            out.push(site);
            if site == 3 {
                s.insert(1);
            }
        }
        assert_eq!(out, [0, 3, 1, 63, 64, 130]);
    }
}
