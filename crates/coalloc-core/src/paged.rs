//! Values by dense number (job numbers), in pages of [`PAGE`] numbers that exist only while
//! they hold a value (issue 23, item 2: history must not weigh on memory). A dense vector
//! over every number ever given out costs a slot per job ever submitted; here the cost is
//! one page-table entry per [`PAGE`] numbers between the lowest and the highest held, plus
//! a page for each stretch of [`PAGE`] numbers that holds a value: never more than the
//! dense vector over the same numbers. The core's job table and the arrival index of the
//! queue policies both keep their per-job state so, and so does the simulator's engine with its
//! launches and jobs (numbered densely by the core, looked up at every event).

use std::collections::VecDeque;

/// Numbers per page.
pub const PAGE: u64 = 512;

/// A page: a slot per number, and how many hold a value.
#[derive(Debug, Clone)]
struct Page<T> {
    slots: Box<[Option<T>; PAGE as usize]>,
    live: u32,
}

/// Values by number.
#[derive(Debug, Clone)]
pub struct Paged<T> {
    /// The number of `pages`' first page (numbers `PAGE * first_page ..`).
    first_page: u64,
    /// Empty pages inside the range are `None`; none at either end.
    pages: VecDeque<Option<Page<T>>>,
    /// Values held.
    len: usize,
    /// The slots of the last page that went empty, kept for the next page made: a queue that
    /// empties and fills again (a job in, a job out) does not make and drop a page of
    /// [`PAGE`] slots at every job. At most one.
    spare: Option<Box<[Option<T>; PAGE as usize]>>,
}

impl<T> Default for Paged<T> {
    fn default() -> Self {
        Paged {
            first_page: 0,
            pages: VecDeque::new(),
            len: 0,
            spare: None,
        }
    }
}

impl<T> Paged<T> {
    /// Where number `n`'s slot is: its page's place in `pages`, and the slot's in the page.
    fn at(&self, n: u64) -> Option<(usize, usize)> {
        let page = usize::try_from((n / PAGE).checked_sub(self.first_page)?).ok()?;
        Some((page, (n % PAGE) as usize))
    }

    pub fn get(&self, n: u64) -> Option<&T> {
        let (p, i) = self.at(n)?;
        self.pages.get(p)?.as_ref()?.slots[i].as_ref()
    }

    pub fn get_mut(&mut self, n: u64) -> Option<&mut T> {
        let (p, i) = self.at(n)?;
        self.pages.get_mut(p)?.as_mut()?.slots[i].as_mut()
    }

    /// Hold `value` at number `n`, making its page if need be; the value it replaces.
    pub fn insert(&mut self, n: u64, value: T) -> Option<T> {
        // Most inserts land on a page that is there: a short path, the rest out of line
        // (the simulator inserts at every job; its hot code must stay small).
        if let Some((p, i)) = self.at(n) {
            if let Some(Some(page)) = self.pages.get_mut(p) {
                let old = page.slots[i].replace(value);
                if old.is_none() {
                    page.live += 1;
                    self.len += 1;
                }
                return old;
            }
        }
        self.insert_paging(n, value)
    }

    /// [`Paged::insert`] where the page must be made (and the table grown) first.
    #[cold]
    #[inline(never)]
    fn insert_paging(&mut self, n: u64, value: T) -> Option<T> {
        let page = n / PAGE;
        if self.pages.is_empty() {
            self.first_page = page;
        }
        while page < self.first_page {
            self.pages.push_front(None);
            self.first_page -= 1;
        }
        let (p, i) = self.at(n).expect("the page table reaches number n");
        if self.pages.len() <= p {
            self.pages.resize_with(p + 1, || None);
        }
        let spare = &mut self.spare;
        let page = self.pages[p].get_or_insert_with(|| Page {
            slots: spare
                .take()
                .unwrap_or_else(|| Box::new([const { None }; PAGE as usize])),
            live: 0,
        });
        let old = page.slots[i].replace(value);
        if old.is_none() {
            page.live += 1;
            self.len += 1;
        }
        old
    }

    /// Take the value at number `n`; a page left empty goes, and so do the empty pages at
    /// either end of the table.
    pub fn remove(&mut self, n: u64) -> Option<T> {
        let (p, i) = self.at(n)?;
        let page = self.pages.get_mut(p)?.as_mut()?;
        let old = page.slots[i].take()?;
        page.live -= 1;
        self.len -= 1;
        if page.live == 0 {
            if let Some(empty) = self.pages[p].take() {
                // Every slot is `None` again: ready for the next page.
                self.spare.get_or_insert(empty.slots);
            }
            while self.pages.front().is_some_and(Option::is_none) {
                self.pages.pop_front();
                self.first_page += 1;
            }
            while self.pages.back().is_some_and(Option::is_none) {
                self.pages.pop_back();
            }
            // A page table that shrank to a small part of its room gives the rest back.
            if self.pages.capacity() > 1024 && self.pages.len() < self.pages.capacity() / 4 {
                self.pages.shrink_to(self.pages.len() * 2);
            }
        }
        Some(old)
    }

    /// Values held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no value is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every number held and its value, by number.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        let first = self.first_page;
        (first..).zip(&self.pages).flat_map(|(page, p)| {
            p.iter().flat_map(move |p| {
                (page * PAGE..)
                    .zip(p.slots.iter())
                    .filter_map(|(n, v)| Some((n, v.as_ref()?)))
            })
        })
    }

    /// Room in the page table for numbers up to `n`.
    pub(crate) fn reserve(&mut self, n: u64) {
        let pages = (n / PAGE + 1).saturating_sub(self.first_page) as usize;
        self.pages.reserve(pages.saturating_sub(self.pages.len()));
    }

    /// Every value, by number.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.pages.iter().flatten().flat_map(Page::values)
    }

    /// Every value, by number, to change.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.pages
            .iter_mut()
            .flatten()
            .flat_map(|p| p.slots.iter_mut().flatten())
    }

    /// The values of the pages that may hold numbers above `after`, by number (the caller
    /// skips those of the first page at or below it): a listing's next page starts there
    /// without walking the values before it.
    pub(crate) fn values_from_page_of(&self, after: u64) -> impl Iterator<Item = &T> {
        let from = usize::try_from((after / PAGE).saturating_sub(self.first_page))
            .unwrap_or(usize::MAX)
            .min(self.pages.len());
        self.pages.range(from..).flatten().flat_map(Page::values)
    }

    /// The values of ranks `from..to` (the `k`-th value held, by number, from 0): the pages
    /// before the first are skipped by their counts.
    pub(crate) fn ranks(&self, from: usize, to: usize) -> impl Iterator<Item = &T> {
        let mut skipped = 0;
        let first = self
            .pages
            .iter()
            .position(|p| {
                let n = p.as_ref().map_or(0, |p| p.live as usize);
                if skipped + n > from {
                    return true;
                }
                skipped += n;
                false
            })
            .unwrap_or(self.pages.len());
        self.pages
            .range(first..)
            .flatten()
            .flat_map(Page::values)
            .skip(from - skipped)
            .take(to.saturating_sub(from))
    }

    /// Empty the table.
    pub(crate) fn clear(&mut self) {
        *self = Paged::default();
    }

    /// The page table's length, empty pages inside it included (tests).
    #[cfg(test)]
    pub(crate) fn table_len(&self) -> usize {
        self.pages.len()
    }

    /// Pages held (tests).
    #[cfg(test)]
    pub(crate) fn pages_held(&self) -> usize {
        self.pages.iter().flatten().count()
    }

    /// Whether the page holding number `n` is held (tests).
    #[cfg(test)]
    pub(crate) fn holds_page_of(&self, n: u64) -> bool {
        self.at(n)
            .and_then(|(p, _)| self.pages.get(p))
            .is_some_and(Option::is_some)
    }

    /// The number of the table's first page (tests).
    #[cfg(test)]
    pub(crate) fn first_page(&self) -> u64 {
        self.first_page
    }
}

impl<T> Page<T> {
    fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_table_agrees_with_a_map_and_frees_the_pages_it_no_longer_needs() {
        let mut ix = Paged::default();
        let mut map = BTreeMap::new();
        let mut x: u64 = 12345;
        for step in 0..200_000u64 {
            // A small deterministic generator: numbers cluster, as job numbers do, and
            // some fall below the table's first page after it has moved up.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = (step / 4) + x % 3000;
            if x.is_multiple_of(3) {
                assert_eq!(ix.remove(id), map.remove(&id));
            } else {
                assert_eq!(ix.insert(id, step), map.insert(id, step));
            }
        }
        for id in 0..60_000 {
            assert_eq!(ix.get(id), map.get(&id), "number {id}");
        }
        assert_eq!(ix.len(), map.len());
        assert!(ix.values().eq(map.values()));
        let pages: std::collections::BTreeSet<_> = map.keys().map(|&id| id / PAGE).collect();
        assert_eq!(ix.pages_held(), pages.len());
        for id in map.keys().copied().collect::<Vec<_>>() {
            ix.remove(id);
        }
        assert_eq!(ix.pages_held(), 0);
        assert_eq!(ix.table_len(), 0);
        assert_eq!(ix.get(u64::MAX), None);
        assert_eq!(ix.remove(u64::MAX), None);
    }
}
