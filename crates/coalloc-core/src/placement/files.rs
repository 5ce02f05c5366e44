//! File sites and transfer estimates for Close-to-Files (seed 000 §2.6) and the FTT of
//! seed 000 §3.2, over the replica catalog and the two file models of seed 000 §2.3.

use super::{IdleList, SiteView};
use crate::model::{FileDistribution, InputFile, Job, Millis, Site};

/// Where a component's input comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileTransfer {
    /// The file site: the replica's site index (the component's own site for a local
    /// replica).
    pub site: usize,
    pub site_name: String,
    /// Bytes the component needs: the whole file, or its chunk ([`chunk_bytes`]).
    pub bytes: u64,
    /// Estimated transfer time, whole milliseconds rounded up (0 for a local replica).
    pub estimate: Millis,
}

/// Bytes per second from site `from` to site `to`: `from`'s `bandwidth` entry for `to`, or
/// when it has none, `to`'s entry for `from` (a link listed once counts both ways). `None`
/// when neither lists the other, or the bandwidth is 0: the pair cannot transfer. `None` for
/// `from == to` too, which needs no transfer.
pub fn bandwidth(sites: &[Site], from: usize, to: usize) -> Option<u64> {
    if from == to {
        return None;
    }
    let (a, b) = (&sites[from], &sites[to]);
    a.bandwidth
        .get(&b.name)
        .or_else(|| b.bandwidth.get(&a.name))
        .copied()
        .filter(|bps| *bps > 0)
}

/// `bytes` at `bytes_per_second`, in milliseconds rounded up (saturating).
///
/// # Panics
///
/// When `bytes_per_second` is 0.
pub fn transfer_millis(bytes: u64, bytes_per_second: u64) -> Millis {
    assert!(bytes_per_second > 0, "a transfer needs a bandwidth above 0");
    let ms = (u128::from(bytes) * 1000).div_ceil(u128::from(bytes_per_second));
    Millis::try_from(ms).unwrap_or(Millis::MAX)
}

/// The bytes of a component of `count` processors in a job of `total` processors reading a
/// file of `size` bytes (seed 000 §2.3): the whole file, or with chunks its share
/// `size * count / total`, rounded up.
pub fn chunk_bytes(file: &InputFile, count: u32, total: u64) -> u64 {
    match file.distribution {
        FileDistribution::Whole => file.size,
        FileDistribution::Chunks if total == 0 => file.size,
        FileDistribution::Chunks => {
            let b = (u128::from(file.size) * u128::from(count)).div_ceil(u128::from(total));
            u64::try_from(b).unwrap_or(u64::MAX)
        }
    }
}

/// The best replica for one site: its index, and `None` for a local replica or the
/// bandwidth from it.
type Source = (usize, Option<u64>);

/// The job's input file and the usable sites holding a replica of it.
pub(super) struct Sources<'j> {
    file: Option<&'j InputFile>,
    replicas: Vec<usize>,
    /// The best source of every site, for Close-to-Files (empty otherwise).
    cache: Vec<Option<Source>>,
}

impl<'j> Sources<'j> {
    /// `for_every_site`: compute every site's best replica at once (Close-to-Files looks at
    /// all of them for every component).
    pub(super) fn new(job: &'j Job, view: &SiteView, for_every_site: bool) -> Sources<'j> {
        let Some(file) = job.extra().input_file.as_ref() else {
            return Sources {
                file: None,
                replicas: Vec::new(),
                cache: Vec::new(),
            };
        };
        let replicas: Vec<usize> = (0..view.len())
            .filter(|&i| view.usable()[i] && view.sites()[i].files.contains(&file.name))
            .collect();
        let mut s = Sources {
            file: Some(file),
            replicas,
            cache: Vec::new(),
        };
        if for_every_site && !s.replicas.is_empty() {
            s.cache = (0..view.len()).map(|i| s.compute(view, i)).collect();
        }
        s
    }

    pub(super) fn file(&self) -> Option<&'j InputFile> {
        self.file
    }

    pub(super) fn has_replica(&self) -> bool {
        !self.replicas.is_empty()
    }

    /// The replica site that can send the file to `site` fastest: a local replica, else the
    /// highest bandwidth (ties: the lower index).
    fn compute(&self, view: &SiteView, site: usize) -> Option<Source> {
        if self.replicas.binary_search(&site).is_ok() {
            return Some((site, None));
        }
        let mut best: Option<(usize, u64)> = None;
        for &r in &self.replicas {
            if let Some(bps) = bandwidth(view.sites(), r, site) {
                let better = match best {
                    None => true,
                    Some((_, b)) => bps > b,
                };
                if better {
                    best = Some((r, bps));
                }
            }
        }
        best.map(|(r, bps)| (r, Some(bps)))
    }

    /// The same replicas but those on `sites` (file sites that already failed to deliver).
    pub(super) fn without(mut self, sites: &[usize]) -> Sources<'j> {
        self.replicas.retain(|r| !sites.contains(r));
        self.cache.clear();
        self
    }

    fn source(&self, view: &SiteView, site: usize) -> Option<Source> {
        if self.replicas.is_empty() {
            None
        } else if self.cache.is_empty() {
            self.compute(view, site)
        } else {
            self.cache[site]
        }
    }

    /// The transfer for a component of `count` processors on `site`, if the job has a file
    /// and a replica can reach the site.
    pub(super) fn transfer(
        &self,
        view: &SiteView,
        site: usize,
        count: u32,
        total: u64,
    ) -> Option<FileTransfer> {
        let file = self.file?;
        self.best_for(view, site, chunk_bytes(file, count, total))
    }

    /// The replica site that can send `bytes` of the file to `site` fastest, and its
    /// estimate (seed 000 §2.6's "minimal delay"); `None` when no replica can reach it.
    pub(super) fn best_for(
        &self,
        view: &SiteView,
        site: usize,
        bytes: u64,
    ) -> Option<FileTransfer> {
        self.file?;
        let (from, bps) = self.source(view, site)?;
        Some(FileTransfer {
            site: from,
            site_name: view.sites()[from].name.clone(),
            bytes,
            estimate: bps.map_or(0, |b| transfer_millis(bytes, b)),
        })
    }

    /// Close-to-Files: the usable site with room for `count` whose best replica is closest
    /// (local first, then the highest bandwidth, which for a component's fixed number of
    /// bytes is the shortest time; ties: the lower index). `None` when no site with room can
    /// receive the file.
    pub(super) fn closest(&self, view: &SiteView, list: &IdleList, count: u32) -> Option<usize> {
        let mut best: Option<(usize, Option<u64>)> = None;
        for site in 0..view.len() {
            if !list.has_room(site, count) {
                continue;
            }
            let Some((_, bps)) = self.source(view, site) else {
                continue;
            };
            let better = match (best, bps) {
                (None, _) => true,
                (Some((_, None)), _) => false,
                (Some((_, Some(_))), None) => true,
                (Some((_, Some(b))), Some(n)) => n > b,
            };
            if better {
                best = Some((site, bps));
                if bps.is_none() {
                    break;
                }
            }
        }
        best.map(|b| b.0)
    }
}
