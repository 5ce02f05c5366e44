//! The idle-list with marks of seed 003 §4.3.3, "Fitting an Unordered Job".
//!
//! The resource broker walks the request-list (components, largest first) and, for each,
//! picks an idle-list element:
//!
//! 1. If there are unmarked elements, take the unmarked one with the most idle processors; if
//!    it has room, mark it and subtract the component. Otherwise go to step 2.
//! 2. Take the marked element with the most idle processors that has room and subtract the
//!    component. If there is none, the job does not fit.
//!
//! After every success, if every element is marked, all marks are removed. The modified
//! best-fit is the same with the *fewest* idle processors among the elements with room.
//! Marks spread a job over as many sites as possible and only then reuse sites.
//!
//! The idle-list holds the usable sites of the [`SiteView`], including those with no idle
//! processors (seed 003 §4.3.2 lists every cluster): such a site is never marked, so while
//! it is in the list the marks are never all set and never removed — the rule as written.
//!
//! The same list serves the fits without marks: first-fit (seed 003 §3.2.1) and the plain
//! Worst Fit of seed 001 §2.2 (always the most idle site with room).

use super::{Fit, SiteView};

/// Idle processors per site with the marks of seed 003 §4.3.3; see the module text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleList {
    idle: Vec<u32>,
    usable: Vec<bool>,
    marked: Vec<bool>,
    /// Usable sites: the elements of the idle-list.
    members: usize,
    /// Usable sites not marked.
    unmarked: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Prefer {
    Most,
    Least,
    First,
}

impl IdleList {
    /// The view's idle counts, nothing marked.
    pub fn new(view: &SiteView) -> IdleList {
        let usable = view.usable().to_vec();
        let members = usable.iter().filter(|u| **u).count();
        IdleList {
            idle: view.idle().to_vec(),
            members,
            unmarked: members,
            marked: vec![false; usable.len()],
            usable,
        }
    }

    /// Idle processors per site, in site-list order.
    pub fn idle(&self) -> &[u32] {
        &self.idle
    }

    /// Marks per site, in site-list order (always false for unusable sites). Every fit keeps
    /// them; only the modified worst-fit and best-fit read them.
    pub fn marked(&self) -> &[bool] {
        &self.marked
    }

    /// The most idle processors on any usable site, `None` when no site is usable.
    pub fn most_idle(&self) -> Option<u32> {
        self.idle
            .iter()
            .zip(&self.usable)
            .filter(|(_, u)| **u)
            .map(|(i, _)| *i)
            .max()
    }

    /// Whether usable site `site` has room for `count` processors.
    pub fn has_room(&self, site: usize, count: u32) -> bool {
        self.usable[site] && self.idle[site] >= count
    }

    /// Fit one component of `count` processors: choose its site, subtract it and update the
    /// marks. `None` when no usable site has room (then nothing changes).
    ///
    /// [`Fit::CloseToFiles`] is the modified worst-fit here: the file-aware choice needs the
    /// job and is made by [`place`](super::place).
    pub fn fit(&mut self, count: u32, fit: Fit) -> Option<usize> {
        let site = match fit {
            Fit::Worst | Fit::CloseToFiles => self.modified(count, Prefer::Most),
            Fit::Best => self.modified(count, Prefer::Least),
            Fit::First => self.pick(count, None, Prefer::First),
            Fit::WorstPlain => self.pick(count, None, Prefer::Most),
        }?;
        self.take(site, count);
        Some(site)
    }

    /// The site [`IdleList::fit`] would choose on a new list of `view` (nothing marked, so
    /// the modified fits take the best unmarked site), without building the list: the first
    /// component's placement, read-only.
    pub fn first_fit_of(view: &SiteView, count: u32, fit: Fit) -> Option<usize> {
        let prefer = match fit {
            Fit::Worst | Fit::CloseToFiles | Fit::WorstPlain => Prefer::Most,
            Fit::Best => Prefer::Least,
            Fit::First => Prefer::First,
        };
        pick(view.idle(), view.usable(), |_| true, count, prefer)
    }

    /// Steps 1 and 2 of seed 003 §4.3.3.
    fn modified(&self, count: u32, prefer: Prefer) -> Option<usize> {
        let step1 = if self.unmarked > 0 {
            self.pick(count, Some(false), prefer)
        } else {
            None
        };
        step1.or_else(|| self.pick(count, Some(true), prefer))
    }

    /// The usable site with room for `count` (and the given mark, if any) that `prefer`
    /// likes best; ties go to the lower index.
    fn pick(&self, count: u32, marked: Option<bool>, prefer: Prefer) -> Option<usize> {
        let eligible = |i: usize| marked.is_none_or(|m| self.marked[i] == m);
        pick(&self.idle, &self.usable, eligible, count, prefer)
    }

    /// Put `count` processors on `site`: subtract them, mark the site, and remove every mark
    /// once all usable sites are marked (seed 003 §4.3.3).
    ///
    /// # Panics
    ///
    /// When the site has fewer than `count` idle processors.
    pub fn take(&mut self, site: usize, count: u32) {
        assert!(
            self.idle[site] >= count,
            "site {site} has {} idle processors, not {count}",
            self.idle[site]
        );
        self.idle[site] -= count;
        if self.usable[site] && !self.marked[site] {
            self.marked[site] = true;
            self.unmarked -= 1;
            if self.unmarked == 0 {
                self.marked.iter_mut().for_each(|m| *m = false);
                self.unmarked = self.members;
            }
        }
    }

    /// The idle counts, giving up the marks.
    pub fn into_idle(self) -> Vec<u32> {
        self.idle
    }
}

/// The usable site with room for `count` among the `eligible` ones that `prefer` likes best;
/// ties go to the lower index.
fn pick(
    idle: &[u32],
    usable: &[bool],
    eligible: impl Fn(usize) -> bool,
    count: u32,
    prefer: Prefer,
) -> Option<usize> {
    let mut best: Option<(usize, u32)> = None;
    for (i, &idle) in idle.iter().enumerate() {
        if !usable[i] || idle < count || !eligible(i) {
            continue;
        }
        let better = match (prefer, best) {
            (Prefer::First, _) => return Some(i),
            (_, None) => true,
            (Prefer::Most, Some((_, b))) => idle > b,
            (Prefer::Least, Some((_, b))) => idle < b,
        };
        if better {
            best = Some((i, idle));
        }
    }
    best.map(|b| b.0)
}
