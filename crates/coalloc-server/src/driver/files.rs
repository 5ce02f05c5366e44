//! The replica catalog's requests (`coalloc file register | ls | rm`) and its bookkeeping:
//! every change is a journal entry (`ReplicaAdded`, `ReplicaRemoved`) that the core hears as
//! `Event::Replica` (seed 000 §2.3) and this catalog books, on replay as live. A file on an
//! agent's site is read there by its agent for its size and checksum (unless the caller
//! gives them), as the driver's file work ([`super::work`]), before the registration is
//! journaled.

use super::Driver;
use crate::catalog::{Origin, Replica};
use crate::entry::Entry;
use crate::msg::{ApiError, Reply};
use crate::transfer::FileStat;
use crate::views::ReplicaView;

impl Driver {
    /// Book a catalog entry (after the core took it).
    pub(super) fn catalog_effect(&mut self, e: &Entry) {
        match e {
            Entry::ReplicaAdded {
                site,
                name,
                path,
                size,
                blake3,
                cached,
            } => {
                let r = Replica {
                    path: Some(path.clone()),
                    size: *size,
                    blake3: Some(blake3.clone()),
                    origin: if *cached {
                        Origin::Cached
                    } else {
                        Origin::Registered
                    },
                    used: self.now,
                };
                self.catalog.insert(name, *site, r);
            }
            Entry::ReplicaRemoved { site, name } => {
                self.catalog.remove(name, *site);
            }
            _ => {}
        }
    }

    /// Launch `launch` was taken by its site: its job's input file there counts as used
    /// now (for eviction). Booked from the journal's `Launched`, so that a restart finds the
    /// same times (the harness's restart digest found them differ when the touch was made
    /// at submission, which a replay does not carry out).
    pub(super) fn touch_input(&mut self, launch: u64) {
        let Some(l) = self.launches.get(&launch) else {
            return;
        };
        let site = l.site;
        let name = self
            .core
            .job(l.job)
            .and_then(|j| j.job.extra().input_file.as_ref().map(|f| f.name.clone()));
        if let Some(name) = name {
            self.catalog.touch(&name, site, self.now);
        }
    }

    pub(super) fn replica_view(&self, name: &str, site: usize, r: &Replica) -> ReplicaView {
        ReplicaView {
            name: name.to_owned(),
            site: self.config.sites[site].name.clone(),
            path: r.path.clone(),
            size: r.size,
            blake3: r.blake3.clone(),
            origin: match r.origin {
                Origin::Static => "static",
                Origin::Registered => "registered",
                Origin::Cached => "cached",
            }
            .into(),
        }
    }

    fn site_index(&self, site: &str) -> Result<usize, ApiError> {
        self.config
            .sites
            .iter()
            .position(|s| s.name == site)
            .ok_or_else(|| ApiError::not_found(format!("no site `{site}`")))
    }

    pub(super) fn files(&self, name: Option<&str>) -> Vec<ReplicaView> {
        self.catalog
            .list(name)
            .map(|(n, s, r)| self.replica_view(n, s, r))
            .collect()
    }

    pub(super) fn file_register(
        &mut self,
        site: String,
        name: String,
        path: String,
        stat: Option<FileStat>,
        read_here: bool,
        reply: Reply<Result<ReplicaView, ApiError>>,
    ) {
        // An agent's site: unless the caller read the file there, the agent reads it.
        let agent = self
            .site_index(&site)
            .ok()
            .filter(|&i| self.at_agent(i) && (stat.is_none() || read_here));
        if let Some(i) = agent {
            self.work.spawn(super::work::Work::Stat {
                backend: self.backends[i].clone(),
                base: self.state.root.clone(),
                site,
                name,
                path,
                reply,
            });
            return;
        }
        let r = self.register(&site, name, path, stat);
        self.reply_later(reply, r);
    }

    /// The agent read the file to register.
    pub(super) fn statted(
        &mut self,
        site: String,
        name: String,
        path: String,
        result: Result<FileStat, String>,
        reply: Reply<Result<ReplicaView, ApiError>>,
    ) {
        let r = match result {
            Ok(stat) => self.register(&site, name, path, Some(stat)),
            Err(e) => Err(ApiError::bad(format!(
                "site `{site}` cannot read `{path}`: {e}"
            ))),
        };
        self.reply_later(reply, r);
    }

    fn register(
        &mut self,
        site: &str,
        name: String,
        path: String,
        stat: Option<FileStat>,
    ) -> Result<ReplicaView, ApiError> {
        let i = self.site_index(site)?;
        if name.trim().is_empty() || name.contains(['/', '\0']) || name.starts_with('.') {
            return Err(ApiError::bad(format!(
                "`{name}` is not a logical file name (no `/`, not empty, not starting with `.`)"
            )));
        }
        let Some(stat) = stat else {
            return Err(ApiError::bad(format!(
                "`{path}` cannot be read on the server"
            )));
        };
        let blake3 = stat.blake3.to_ascii_lowercase();
        if blake3.len() != 64 || !blake3.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ApiError::bad("blake3 must be 64 hexadecimal digits"));
        }
        let e = Entry::ReplicaAdded {
            site: i,
            name: name.clone(),
            path,
            size: stat.size,
            blake3,
            cached: false,
        };
        self.apply(e).map_err(|e| ApiError::bad(e.to_string()))?;
        let r = self.catalog.get(&name, i).expect("just added");
        Ok(self.replica_view(&name, i, r))
    }

    pub(super) fn file_remove(
        &mut self,
        name: &str,
        site: Option<&str>,
    ) -> Result<Vec<ReplicaView>, ApiError> {
        let only = site.map(|s| self.site_index(s)).transpose()?;
        let gone: Vec<(usize, ReplicaView)> = self
            .catalog
            .list(Some(name))
            .filter(|(_, s, _)| only.is_none_or(|o| o == *s))
            .map(|(n, s, r)| (s, self.replica_view(n, s, r)))
            .collect();
        if gone.is_empty() {
            return Err(ApiError::not_found(match site {
                Some(s) => format!("no replica of `{name}` on site `{s}`"),
                None => format!("no replica of `{name}`"),
            }));
        }
        for (s, _) in &gone {
            self.apply(Entry::ReplicaRemoved {
                site: *s,
                name: name.to_owned(),
            })
            .map_err(|e| ApiError::bad(e.to_string()))?;
        }
        Ok(gone.into_iter().map(|(_, v)| v).collect())
    }
}
