//! [`Arrivals`](super::Arrivals)' index from a job's number to its arrival sequence, in pages
//! that exist only while one of their jobs is queued (issue 23, item 2: history must not
//! weigh on memory). A dense vector over every job number ever given cost 8 bytes per job
//! ever submitted, in memory and, as ten-byte "not queued" marks, in every snapshot: 44 MB
//! of each after 5.5 million jobs, 4.5 million of them long gone. Here the cost is one
//! pointer per [`PAGE`] job numbers, plus a page for each stretch of [`PAGE`] numbers that
//! holds a queued job: never more than the dense vector over the same numbers. Not saved in
//! snapshots: rebuilt from the queue.

use crate::scheduler::JobId;

/// Job numbers per page.
const PAGE: usize = 1024;

/// A page: the sequence of each of its jobs (`None`: not queued), and how many are queued.
#[derive(Debug)]
struct Page {
    seq: Box<[Option<u64>; PAGE]>,
    queued: u32,
}

/// Job number → arrival sequence, for queued jobs.
#[derive(Debug, Default)]
pub struct SeqIndex {
    pages: Vec<Option<Page>>,
}

fn split(id: JobId) -> Option<(usize, usize)> {
    let id = usize::try_from(id).ok()?;
    Some((id / PAGE, id % PAGE))
}

impl SeqIndex {
    /// Queued job `id`'s sequence.
    pub fn get(&self, id: JobId) -> Option<u64> {
        let (p, i) = split(id)?;
        self.pages.get(p)?.as_ref()?.seq[i]
    }

    /// Job `id` is queued with sequence `seq` (or, `None`, no longer queued).
    pub fn set(&mut self, id: JobId, seq: Option<u64>) {
        let Some((p, i)) = split(id) else {
            return;
        };
        if self.pages.len() <= p {
            if seq.is_none() {
                return;
            }
            self.pages.resize_with(p + 1, || None);
        }
        let slot = &mut self.pages[p];
        let page = match slot {
            Some(page) => page,
            None if seq.is_none() => return,
            None => slot.insert(Page {
                seq: Box::new([None; PAGE]),
                queued: 0,
            }),
        };
        match (page.seq[i].is_some(), seq.is_some()) {
            (false, true) => page.queued += 1,
            (true, false) => page.queued -= 1,
            _ => {}
        }
        page.seq[i] = seq;
        if page.queued == 0 {
            *slot = None;
            // Trailing empty pages go too, so that the page table ends at the newest
            // queued job.
            while matches!(self.pages.last(), Some(None)) {
                self.pages.pop();
            }
        }
    }

    /// Room in the page table for job numbers up to `jobs`.
    pub fn reserve(&mut self, jobs: usize) {
        let want = jobs / PAGE + 1;
        self.pages.reserve(want.saturating_sub(self.pages.len()));
    }

    /// Pages held (tests).
    #[cfg(test)]
    fn pages(&self) -> usize {
        self.pages.iter().flatten().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_index_agrees_with_a_map_and_frees_the_pages_it_no_longer_needs() {
        let mut ix = SeqIndex::default();
        let mut map = BTreeMap::new();
        let mut x: u64 = 12345;
        for step in 0..200_000u64 {
            // A small deterministic generator: ids cluster, as job numbers do.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = (step / 4) + x % 3000;
            if x.is_multiple_of(3) {
                ix.set(id, None);
                map.remove(&id);
            } else {
                ix.set(id, Some(step));
                map.insert(id, step);
            }
        }
        for id in 0..60_000 {
            assert_eq!(ix.get(id), map.get(&id).copied(), "job {id}");
        }
        let pages: std::collections::BTreeSet<_> =
            map.keys().map(|&id| id as usize / PAGE).collect();
        assert_eq!(ix.pages(), pages.len());
        for id in map.keys().copied().collect::<Vec<_>>() {
            ix.set(id, None);
        }
        assert_eq!(ix.pages(), 0);
        assert!(ix.pages.is_empty());
        assert_eq!(ix.get(u64::MAX), None);
        ix.set(u64::MAX, None);
    }
}
