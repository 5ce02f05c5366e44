//! The replica catalog: seed 000 §2.3's replica manager, which "maps the logical file names
//! specified by jobs onto their physical location(s)". A logical name has at most one replica
//! per site: its path there, size and BLAKE3 checksum.
//!
//! Replicas come three ways: declared in the site configuration (`files = [...]`, a name
//! only: coalloc cannot send such a file, only run next to it), registered by an operator
//! (`coalloc file register`), or made by a transfer (seed 000 §2.5) — a *cache*. Every
//! change is a journal entry (`Entry::ReplicaAdded` / `ReplicaRemoved`), replayed into this
//! catalog and into the core (`Event::Replica`), which Close-to-Files reads.
//!
//! Eviction rule (per site, [`Catalog::make_room`]): transfer-made replicas of a site hold at
//! most the configured `cache_limit` bytes together. To make room for a new one, cached
//! replicas are evicted least recently used first (used = made, or read by a started
//! component); registered and static replicas are never evicted, nor a cached one a live job
//! still needs (the caller's pinned names). When that frees too little the transfer is
//! refused ("no room").

use coalloc_core::model::{Site, Time};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// How a replica came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Declared in the site configuration: a name, no path.
    Static,
    /// Registered by an operator.
    Registered,
    /// Made by a transfer: evictable.
    Cached,
}

/// One replica of a logical file on one site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    /// The file's path on the site (`None` for a static replica).
    pub path: Option<String>,
    pub size: u64,
    /// BLAKE3 of the content, hex (`None` for a static replica).
    pub blake3: Option<String>,
    pub origin: Origin,
    /// Last made or read, for eviction.
    pub used: Time,
}

/// Every replica, by logical name then site index.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Catalog {
    files: BTreeMap<String, BTreeMap<usize, Replica>>,
}

/// A cache that cannot take a file: what it holds that may not go, and the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no room: the site's file cache holds at most {limit} bytes, {kept} of them in files still needed, and the file has {size}")]
pub struct NoRoom {
    pub limit: u64,
    pub kept: u64,
    pub size: u64,
}

impl Catalog {
    /// The static replicas of the site configuration.
    pub fn from_sites(sites: &[Site]) -> Catalog {
        let mut c = Catalog::default();
        for (i, s) in sites.iter().enumerate() {
            for f in &s.files {
                c.insert(
                    f,
                    i,
                    Replica {
                        path: None,
                        size: 0,
                        blake3: None,
                        origin: Origin::Static,
                        used: 0,
                    },
                );
            }
        }
        c
    }

    /// Add or replace the replica of `name` on `site`; the one replaced, if any.
    pub fn insert(&mut self, name: &str, site: usize, r: Replica) -> Option<Replica> {
        self.files
            .entry(name.to_owned())
            .or_default()
            .insert(site, r)
    }

    /// Remove the replica of `name` on `site`.
    pub fn remove(&mut self, name: &str, site: usize) -> Option<Replica> {
        let sites = self.files.get_mut(name)?;
        let r = sites.remove(&site);
        if sites.is_empty() {
            self.files.remove(name);
        }
        r
    }

    pub fn get(&self, name: &str, site: usize) -> Option<&Replica> {
        self.files.get(name)?.get(&site)
    }

    /// The sites holding `name`.
    pub fn sites_of(&self, name: &str) -> Vec<usize> {
        self.files
            .get(name)
            .map(|s| s.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Mark a replica used now.
    pub fn touch(&mut self, name: &str, site: usize, now: Time) {
        if let Some(r) = self.files.get_mut(name).and_then(|s| s.get_mut(&site)) {
            r.used = r.used.max(now);
        }
    }

    /// Every replica (of `name` only, when given), by name then site.
    pub fn list<'a>(
        &'a self,
        name: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a str, usize, &'a Replica)> + 'a {
        self.files
            .iter()
            .filter(move |(n, _)| name.is_none_or(|x| x == n.as_str()))
            .flat_map(|(n, s)| s.iter().map(move |(i, r)| (n.as_str(), *i, r)))
    }

    /// Bytes of transfer-made replicas on `site`.
    pub fn cached_bytes(&self, site: usize) -> u64 {
        self.list(None)
            .filter(|(_, s, r)| *s == site && r.origin == Origin::Cached)
            .map(|(_, _, r)| r.size)
            .sum()
    }

    /// The cached replicas to evict from `site` so that `size` more bytes fit under
    /// `limit`, least recently used first, never a `pinned` name (see the module's rule).
    pub fn make_room(
        &self,
        site: usize,
        size: u64,
        limit: u64,
        pinned: &BTreeSet<String>,
    ) -> Result<Vec<String>, NoRoom> {
        let mut cached: Vec<(&str, &Replica)> = self
            .list(None)
            .filter(|(_, s, r)| *s == site && r.origin == Origin::Cached)
            .map(|(n, _, r)| (n, r))
            .collect();
        let mut held: u64 = cached.iter().map(|(_, r)| r.size).sum();
        cached.sort_by_key(|(n, r)| (r.used, *n));
        let mut out = Vec::new();
        for (n, r) in cached {
            if held.saturating_add(size) <= limit {
                break;
            }
            if !pinned.contains(n) {
                held -= r.size;
                out.push(n.to_owned());
            }
        }
        if held.saturating_add(size) > limit {
            return Err(NoRoom {
                limit,
                kept: held,
                size,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(size: u64, used: Time) -> Replica {
        Replica {
            path: Some(format!("/c/{size}")),
            size,
            blake3: Some("00".into()),
            origin: Origin::Cached,
            used,
        }
    }

    #[test]
    fn static_replicas_come_from_the_site_configuration() {
        let mut sites = vec![Site::cluster("a", 1), Site::cluster("b", 1)];
        sites[1].files = vec!["grid.dat".into()];
        let c = Catalog::from_sites(&sites);
        assert_eq!(c.sites_of("grid.dat"), [1]);
        assert_eq!(c.get("grid.dat", 1).unwrap().origin, Origin::Static);
        assert!(c.get("grid.dat", 0).is_none());
    }

    #[test]
    fn eviction_is_least_recently_used_among_unpinned_cached_replicas() {
        let mut c = Catalog::default();
        c.insert("old", 0, cached(40, 1));
        c.insert("mid", 0, cached(30, 2));
        c.insert("new", 0, cached(20, 3));
        c.insert("other-site", 1, cached(500, 0));
        let mut registered = cached(1000, 0);
        registered.origin = Origin::Registered;
        c.insert("mine", 0, registered);
        assert_eq!(c.cached_bytes(0), 90);
        // 100 bytes of room: 90 held + 25 > 100, so the oldest goes.
        assert_eq!(c.make_room(0, 25, 100, &BTreeSet::new()).unwrap(), ["old"]);
        // The oldest is pinned (a live job reads it): the next oldest go instead.
        let pinned: BTreeSet<String> = ["old".to_string()].into();
        assert_eq!(c.make_room(0, 25, 100, &pinned).unwrap(), ["mid"]);
        assert_eq!(
            c.make_room(0, 10, 100, &pinned).unwrap(),
            Vec::<String>::new()
        );
        // Too big even with everything unpinned gone.
        assert_eq!(
            c.make_room(0, 70, 100, &pinned),
            Err(NoRoom {
                limit: 100,
                kept: 40,
                size: 70
            })
        );
        c.touch("old", 0, 9);
        assert_eq!(c.make_room(0, 25, 100, &BTreeSet::new()).unwrap(), ["mid"]);
        assert_eq!(c.remove("old", 0).unwrap().size, 40);
        assert_eq!(c.list(Some("old")).count(), 0);
    }
}
