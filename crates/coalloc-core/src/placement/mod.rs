//! Placement: choosing a site — and, for a job with an input file, a file site — for every
//! component of a job, against the idle processors the sites have now.
//!
//! What a job asks for decides how it is fitted (seed 003 §3.2.1):
//!
//! - **ordered** jobs name the site of every component: the *ordered fit* of seed 003
//!   §4.3.3 checks each named site in job order, and when several components name one site
//!   it subtracts the earlier ones first ([`place`]);
//! - **unordered** jobs give only sizes: components are sorted by size, largest first
//!   (stable, so equal sizes keep job order), and each is fitted with the chosen [`Fit`] on
//!   the [`IdleList`] — the *modified* worst-fit and best-fit of seed 003 §4.3.3 with marks,
//!   plain first-fit (seed 003 §3.2.1), the plain Worst Fit of seed 001 §2.2, or
//!   Close-to-Files (seed 000 §2.6, below);
//! - **total** jobs are one component on one site, fitted like an unordered job;
//! - **flexible** jobs give a total that is split over sites by cluster filling or load
//!   balancing (seed 003 §3.2.1, [`FlexibleFit`]), never into a piece smaller than the job's
//!   `min_component`.
//!
//! # Close-to-Files
//!
//! Seed 000 §2.6: among the sites with room for a component, pick the one to which the job's
//! input file can be transferred fastest, from its best replica (§2.3's replica catalog is
//! [`Site::files`]). The estimate for site `s` is `bytes / bandwidth(r, s)` minimised over
//! the replica sites `r` ([`bandwidth`]); a replica on `s` itself costs 0. `bytes` is the
//! whole file, or with [`FileDistribution::Chunks`](crate::model::FileDistribution::Chunks)
//! the component's chunk, `size * count / total` rounded up (§2.3's two file models).
//! Estimates are whole milliseconds, rounded up ([`transfer_millis`]); the job's FTT of
//! §3.2 is the largest of them ([`Placement::transfer_time`]). Without an input file
//! Close-to-Files is the modified worst-fit. Ties in transfer time go to the earlier site.
//!
//! A bandwidth unknown between two different sites means the pair cannot transfer; a link
//! listed by either site counts both ways. Unusable sites neither run components nor serve
//! files. The other fits report the same best replica and estimate for the site they chose
//! (or no file site, when no replica can reach it).
//!
//! # Determinism
//!
//! Everything here is sans-IO and deterministic: no clock, no randomness, and every tie is
//! broken by the order of the site list (the lower site index wins), then by the lower
//! component index.

mod files;
mod flexible;
mod idle_list;
mod no_fit;

pub use files::{bandwidth, chunk_bytes, transfer_millis, FileTransfer};
pub use idle_list::IdleList;
pub use no_fit::NoFit;

use crate::model::{Component, Job, JobKind, Millis, Site};
use files::Sources;
use std::borrow::Cow;
use std::fmt;

/// One value per site, inline for up to 8 sites: the idle counts, usable flags and per-site
/// needs that placement tries and backfilling build many times a pass.
pub type PerSite<T> = smallvec::SmallVec<[T; 8]>;

/// A dry-run placement, `(site, processors)` per component ([`place_sites`]), inline for up
/// to 4 components.
pub type SitesOf = smallvec::SmallVec<[(usize, u32); 4]>;

/// How an unordered (or total) job's components are fitted to sites.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum Fit {
    /// Seed 003 §4.3.3's modified worst-fit (the DCS default): the most idle site, spreading
    /// a job's components over unmarked sites first.
    #[default]
    Worst,
    /// Seed 003 §4.3.3's modified best-fit: as [`Fit::Worst`] with the least idle site that
    /// fits.
    Best,
    /// Seed 003 §3.2.1's first-fit: the first site in list order with room.
    First,
    /// Seed 001 §2.2's Worst Fit: always the site with the most idle processors, several
    /// components of one job on one site allowed, no marks.
    WorstPlain,
    /// Seed 000 §2.6's Close-to-Files: the site with room with the shortest estimated
    /// transfer of the input file.
    CloseToFiles,
}

impl Fit {
    /// Every fit, in the order of [`Fit::NAMES`].
    pub const ALL: [Fit; 5] = [
        Fit::Worst,
        Fit::Best,
        Fit::First,
        Fit::WorstPlain,
        Fit::CloseToFiles,
    ];

    /// The names [`Fit::from_name`] accepts.
    pub const NAMES: &'static [&'static str] = &["worst", "best", "first", "worst-plain", "ctf"];

    pub fn name(self) -> &'static str {
        match self {
            Fit::Worst => "worst",
            Fit::Best => "best",
            Fit::First => "first",
            Fit::WorstPlain => "worst-plain",
            Fit::CloseToFiles => "ctf",
        }
    }

    /// Parse a name (case-insensitive).
    pub fn from_name(s: &str) -> Result<Fit, String> {
        let lower = s.to_ascii_lowercase();
        Fit::ALL
            .into_iter()
            .find(|f| f.name() == lower)
            .ok_or_else(|| {
                format!(
                    "unknown fit `{s}` (expected one of: {})",
                    Fit::NAMES.join(", ")
                )
            })
    }
}

impl fmt::Display for Fit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a flexible job's total is split over sites (seed 003 §3.2.1). Pieces go only to usable
/// sites with at least `min_component` idle, at most one piece per site; the load of a site
/// is its busy processors. Both find a split whenever one exists: when the `total /
/// min_component` sites with the most idle hold the total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum FlexibleFit {
    /// Least-loaded site first, each filled completely until the total is met: as few sites
    /// as possible, so as little inter-cluster communication as possible. A site is skipped
    /// when taking it would need too many pieces of at least `min_component`; a last piece
    /// below `min_component` takes processors back from the pieces before it.
    #[default]
    ClusterFilling,
    /// Pieces chosen so that the sites' loads afterwards are as equal as possible (water
    /// filling: every site with a piece ends at the same load, up to one processor, unless it
    /// fills up below that load). When
    /// that would make a piece below `min_component`, the split is the one whose most loaded
    /// site is least loaded among splits into pieces of at least `min_component`.
    LoadBalancing,
}

impl FlexibleFit {
    pub const ALL: [FlexibleFit; 2] = [FlexibleFit::ClusterFilling, FlexibleFit::LoadBalancing];

    /// The names [`FlexibleFit::from_name`] accepts.
    pub const NAMES: &'static [&'static str] = &["cluster-filling", "load-balancing"];

    pub fn name(self) -> &'static str {
        match self {
            FlexibleFit::ClusterFilling => "cluster-filling",
            FlexibleFit::LoadBalancing => "load-balancing",
        }
    }

    /// Parse a name (case-insensitive).
    pub fn from_name(s: &str) -> Result<FlexibleFit, String> {
        let lower = s.to_ascii_lowercase();
        FlexibleFit::ALL
            .into_iter()
            .find(|f| f.name() == lower)
            .ok_or_else(|| {
                format!(
                    "unknown flexible split `{s}` (expected one of: {})",
                    FlexibleFit::NAMES.join(", ")
                )
            })
    }
}

impl fmt::Display for FlexibleFit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The sites as placement sees them: the site list, idle processors per site now, and
/// whether each site may be used (a site marked unusable after errors, seed 000 §3.4, takes
/// no components and serves no files).
///
/// A live driver fills the idle counts and usable flags from the resource monitor (seed
/// 003 §4.3.2's idle-list); [`SiteView::borrowed`] reads them from the caller's vectors, so a
/// dry run costs no copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteView<'a> {
    sites: &'a [Site],
    idle: Cow<'a, [u32]>,
    usable: Cow<'a, [bool]>,
}

impl<'a> SiteView<'a> {
    /// Every site usable, idle as the site list says ([`Site::idle`], or all its processors
    /// when it does not say): the view of a dry run.
    pub fn from_sites(sites: &'a [Site]) -> SiteView<'a> {
        SiteView {
            sites,
            idle: sites
                .iter()
                .map(|s| s.idle.unwrap_or(s.processors))
                .collect(),
            usable: Cow::Owned(vec![true; sites.len()]),
        }
    }

    /// A view with the given idle counts and usable flags, one per site (a live driver's
    /// resource monitor state).
    ///
    /// # Panics
    ///
    /// When `idle` or `usable` is not as long as `sites`.
    pub fn new(sites: &'a [Site], idle: Vec<u32>, usable: Vec<bool>) -> SiteView<'a> {
        SiteView::of(sites, Cow::Owned(idle), Cow::Owned(usable))
    }

    /// [`SiteView::new`] on the caller's vectors, without copying them.
    ///
    /// # Panics
    ///
    /// When `idle` or `usable` is not as long as `sites`.
    pub fn borrowed(sites: &'a [Site], idle: &'a [u32], usable: &'a [bool]) -> SiteView<'a> {
        SiteView::of(sites, Cow::Borrowed(idle), Cow::Borrowed(usable))
    }

    fn of(sites: &'a [Site], idle: Cow<'a, [u32]>, usable: Cow<'a, [bool]>) -> SiteView<'a> {
        assert_eq!(idle.len(), sites.len(), "one idle count per site");
        assert_eq!(usable.len(), sites.len(), "one usable flag per site");
        SiteView {
            sites,
            idle,
            usable,
        }
    }

    pub fn sites(&self) -> &'a [Site] {
        self.sites
    }

    /// Idle processors per site, in site-list order.
    pub fn idle(&self) -> &[u32] {
        &self.idle
    }

    /// Usable flags per site, in site-list order.
    pub fn usable(&self) -> &[bool] {
        &self.usable
    }

    pub fn len(&self) -> usize {
        self.sites.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    /// The index of the site called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.sites.iter().position(|s| s.name == name)
    }

    /// Busy processors of site `i`: its processors minus its idle ones (seed 003 §3.2.1's
    /// load).
    pub fn load(&self, i: usize) -> u32 {
        self.sites[i].processors.saturating_sub(self.idle[i])
    }

    pub fn set_idle(&mut self, i: usize, idle: u32) {
        self.idle.to_mut()[i] = idle;
    }

    pub fn set_usable(&mut self, i: usize, usable: bool) {
        self.usable.to_mut()[i] = usable;
    }
}

/// Where one component (or one piece of a flexible job) goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlacedComponent {
    /// Its index in the job (for a flexible job's pieces: 0, the template).
    pub component: usize,
    /// Its label in the job, if it has one.
    pub label: Option<String>,
    /// Processors.
    pub count: u32,
    /// The site's index in the site list.
    pub site: usize,
    pub site_name: String,
    /// Where its input file comes from and how long that takes; `None` when the job has no
    /// input file, or (for fits other than Close-to-Files) when no replica can reach the site.
    pub file: Option<FileTransfer>,
}

/// A successful placement.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Placement {
    /// One entry per component of the job, in job order (`components[i].component == i`);
    /// for a flexible job one entry per piece, in the order the split chose them.
    pub components: Vec<PlacedComponent>,
    /// Idle processors of every site once the job is placed, in site-list order.
    pub idle_after: Vec<u32>,
}

impl Placement {
    /// The job's estimated File Transfer Time (seed 000 §3.2): the largest of its
    /// components' estimates, `None` when no component transfers a file.
    pub fn transfer_time(&self) -> Option<Millis> {
        self.components
            .iter()
            .filter_map(|c| c.file.as_ref().map(|f| f.estimate))
            .max()
    }

    /// The job as it will be submitted: an ordered job whose components name their chosen
    /// sites (seed 003 §4.3.4's "complete form" of a request). A flexible job's pieces copy
    /// the template component with their own count; when the template has a label and there
    /// are several pieces, piece `k` is labelled `label-k` so labels stay unique.
    pub fn to_ordered_job(&self, job: &Job) -> Job {
        let split = job.kind == JobKind::Flexible && self.components.len() > 1;
        let components = self
            .components
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let mut c: Component = job.components.get(p.component).cloned().unwrap_or_default();
                c.count = p.count;
                c.site = Some(p.site_name.as_str().into());
                if split {
                    c.details_mut().label = c.label().map(|l| format!("{l}-{k}"));
                }
                c
            })
            .collect();
        let mut job = job.clone();
        job.kind = JobKind::Ordered;
        job.components = components;
        job.set_flexible(None);
        job
    }
}

/// Place `job` on the sites of `view`.
///
/// `fit` is used for unordered and total jobs, `flexible` for flexible jobs; ordered jobs use
/// the ordered fit of seed 003 §4.3.3. On success every component has a site with room for
/// it; on failure [`NoFit`] says which component did not fit and why, in words.
pub fn place(
    job: &Job,
    view: &SiteView,
    fit: Fit,
    flexible: FlexibleFit,
) -> Result<Placement, NoFit> {
    let ctf = fit == Fit::CloseToFiles && matches!(job.kind, JobKind::Unordered | JobKind::Total);
    let sources = Sources::new(job, view, ctf);
    let mut list = IdleList::new(view);
    let slots = slots(job, view, fit, flexible, &sources, &mut list)?;
    let total = match job.flexible() {
        Some(f) if job.kind == JobKind::Flexible => u64::from(f.total),
        _ => job.total_processors(),
    };
    let components = slots
        .into_iter()
        .map(|(i, count, site)| PlacedComponent {
            component: i,
            label: job.components[i].label().map(str::to_owned),
            count,
            site,
            site_name: view.sites[site].name.clone(),
            file: sources.transfer(view, site, count, total),
        })
        .collect();
    Ok(Placement {
        components,
        idle_after: list.into_idle(),
    })
}

/// Another source for a transfer that failed (seed 000 §2.5): the usable replica site,
/// none of `tried`, that can send `bytes` of the job's input file to `site` fastest. `None`
/// when every other replica is unusable, already tried, or cannot reach `site`, or when the
/// file is already on `site` (nothing to send).
pub fn other_source(
    job: &Job,
    view: &SiteView,
    site: usize,
    bytes: u64,
    tried: &[usize],
) -> Option<FileTransfer> {
    Sources::new(job, view, false)
        .without(tried)
        .best_for(view, site, bytes)
        .filter(|f| f.site != site)
}

/// Where [`place`] would put each component, as `(site, processors)` in [`Placement`]'s
/// order, without naming sites or routing files: the dry run of a policy that only needs
/// the processors per site. Same result as `place` whenever `place` succeeds.
pub fn place_sites(
    job: &Job,
    view: &SiteView,
    fit: Fit,
    flexible: FlexibleFit,
) -> Result<SitesOf, NoFit> {
    let ctf = fit == Fit::CloseToFiles && matches!(job.kind, JobKind::Unordered | JobKind::Total);
    let sources = Sources::new(job, view, ctf);
    // One component without a file: the fit's choice on a fresh idle-list, read-only.
    let single =
        matches!(job.kind, JobKind::Unordered | JobKind::Total) && sources.file().is_none();
    if let ([c], true) = (job.components.as_slice(), single) {
        if let Some(site) = IdleList::first_fit_of(view, c.count, fit) {
            return Ok(smallvec::smallvec![(site, c.count)]);
        }
    }
    let mut list = IdleList::new(view);
    let slots = slots(job, view, fit, flexible, &sources, &mut list)?;
    Ok(slots.into_iter().map(|(_, n, site)| (site, n)).collect())
}

/// `(component, processors, site)` per placed component or piece, taken from `list`.
fn slots(
    job: &Job,
    view: &SiteView,
    fit: Fit,
    flexible: FlexibleFit,
    sources: &Sources,
    list: &mut IdleList,
) -> Result<Vec<(usize, u32, usize)>, NoFit> {
    if job.components.is_empty() {
        return Err(NoFit::NoComponents);
    }
    Ok(match job.kind {
        JobKind::Ordered => ordered(job, view, list)?,
        JobKind::Unordered | JobKind::Total => unordered(job, view, fit, sources, list)?,
        JobKind::Flexible => {
            let (total, min) = match job.flexible() {
                Some(f) => (f.total, f.min_component.unwrap_or(1)),
                None => (job.components[0].count, 1),
            };
            let pieces = flexible::split(total, min, view, flexible)
                .map_err(|e| e.into_no_fit(job.components[0].label(), total, min))?;
            for &(site, count) in &pieces {
                list.take(site, count);
            }
            pieces.into_iter().map(|(s, n)| (0, n, s)).collect()
        }
    })
}

/// Seed 003 §4.3.3, "Fitting an Ordered Job": every component on the site it names, if that
/// site has room once the job's earlier components on it are subtracted.
fn ordered(
    job: &Job,
    view: &SiteView,
    list: &mut IdleList,
) -> Result<Vec<(usize, u32, usize)>, NoFit> {
    let mut out = Vec::with_capacity(job.components.len());
    for (i, c) in job.components.iter().enumerate() {
        let label = || c.label().map(str::to_owned);
        let Some(name) = c.site.as_deref() else {
            return Err(NoFit::NoSiteNamed {
                component: i,
                label: label(),
            });
        };
        let Some(site) = view.index_of(name) else {
            return Err(NoFit::UnknownSite {
                component: i,
                label: label(),
                site: name.to_owned(),
            });
        };
        if !view.usable[site] {
            return Err(NoFit::UnusableSite {
                component: i,
                label: label(),
                site: name.to_owned(),
            });
        }
        let left = list.idle()[site];
        if left < c.count {
            return Err(NoFit::SiteFull {
                component: i,
                label: label(),
                site: name.to_owned(),
                needs: c.count,
                idle: left,
                idle_before: view.idle[site],
            });
        }
        list.take(site, c.count);
        out.push((i, c.count, site));
    }
    Ok(out)
}

/// Seed 003 §3.2.1 step 2: components sorted by size, largest first, each fitted in turn.
fn unordered(
    job: &Job,
    view: &SiteView,
    fit: Fit,
    sources: &Sources,
    list: &mut IdleList,
) -> Result<Vec<(usize, u32, usize)>, NoFit> {
    // `(component, processors, site)` in job order; the sites are filled in below.
    let mut out: Vec<(usize, u32, usize)> = job
        .components
        .iter()
        .enumerate()
        .map(|(i, c)| (i, c.count, 0))
        .collect();
    let mut order: Vec<usize> = (0..out.len()).collect();
    // Stable: equal sizes keep job order.
    order.sort_by(|&a, &b| job.components[b].count.cmp(&job.components[a].count));
    for (placed, &i) in order.iter().enumerate() {
        let c = &job.components[i];
        let site = match (fit, sources.file()) {
            (Fit::CloseToFiles, Some(file)) => {
                let best = sources.closest(view, list, c.count);
                match best {
                    Some(site) => {
                        list.take(site, c.count);
                        Some(site)
                    }
                    None if list.most_idle().is_some_and(|m| m >= c.count) => {
                        return Err(if sources.has_replica() {
                            NoFit::FileUnreachable {
                                component: i,
                                label: c.label().map(str::to_owned),
                                needs: c.count,
                                file: file.name.clone(),
                            }
                        } else {
                            NoFit::NoReplica {
                                component: i,
                                label: c.label().map(str::to_owned),
                                file: file.name.clone(),
                            }
                        })
                    }
                    None => None,
                }
            }
            _ => list.fit(c.count, fit),
        };
        match site {
            Some(s) => out[i].2 = s,
            None => {
                return Err(NoFit::NoRoom {
                    component: i,
                    label: c.label().map(str::to_owned),
                    needs: c.count,
                    most_idle: list.most_idle(),
                    placed_before: placed,
                })
            }
        }
    }
    Ok(out)
}
