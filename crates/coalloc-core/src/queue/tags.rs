//! KOALA-C's TAGS policies for several sets of sites (seed 004 §IV-B, §IV-C): TAGS-chain and
//! TAGS-sets, adaptations of the TAGS task assignment policy.
//!
//! Both keep a FIFO queue per *level* — a site of a chain (TAGS-chain) or a set of sites
//! (TAGS-sets) — and give each level a runtime limit that increases from level to level, the
//! last level having none. A job that reaches its level's limit is killed and "appended to
//! the queue of" the next level, where "it will start from scratch again" (§IV-B). The kill
//! itself is the scheduler's: it asks [`QueuePolicy::runtime_limit`] once at every commit,
//! kills the job at commit + limit (the job's start, its barrier release), counts it in
//! [`JobRecord::limit_kills`](crate::scheduler::api::JobRecord::limit_kills) and pushes it
//! again. The policy tells a limit kill from any other return by that counter: a job whose
//! `limit_kills` grew since it started moves to the next level; a job back after an abort
//! before commit or a failure after it returns to the tail of the level it ran from. The
//! returning job is appended behind every job already queued there.
//!
//! # TAGS-chain (§IV-B)
//!
//! `K` chains of `L` sites each, "each identical in structure" ([`TagsChainParams`]): the
//! `L - 1` runtime limits are shared by the chains (position `i` of every chain has limit
//! `i`), and no site is in two places. At submission a job is dispatched to a chain
//! round-robin (first job to chain 1) or uniformly at random ([`ChainDispatch`], with the
//! seeded [`SplitMix64`]; a draw `x` picks chain `x * K >> 64`, so there is no modulo bias
//! worth the name), and joins the queue of that chain's first site; it keeps its chain for
//! life. Within a site, jobs are served FCFS: the head only, and that site's queue waits
//! while its head does not fit. A pass scans the first sites of all chains (chain order),
//! then all second sites, and so on.
//!
//! # TAGS-sets (§IV-C)
//!
//! Decreasing sets of sites ([`TagsSetsParams`]): set 1 is the complete system and each next
//! set a proper subset of the one before, each with a runtime limit (the last has none).
//! Arriving jobs join set 1's queue. Within a set, jobs are served with FF (§IV-A): the head
//! goes to the first site of the set, in site-list order, in which it fits, and the set's
//! queue waits while its head does not fit. A pass scans the queues "in increasing order,
//! starting at the queue of set 1", so a job just killed in set 1 lets set 1's jobs go first
//! even when it will restart on the same site.
//!
//! # Both
//!
//! Starts use the placement module restricted to the level's sites with [`Fit::First`], so
//! multi-component and flexible jobs work too, all of their components inside the level. A
//! job that can never fit its level's sites (too large, or an ordered job naming another
//! site) would wait there for ever, and every job behind it with it: submission refuses one
//! that cannot fit where new jobs enter ([`QueuePolicy::entry_sites`]), and a job killed at a
//! limit skips the later levels that could never hold it, or fails, with the reason, when
//! none could.
//! [`TagsChainParams::check_sites`] and [`TagsSetsParams::check_sites`] check the site
//! indexes against the site list (the core builds policies without it). An invalid
//! configuration that reaches [`Tags::misconfigured`] fails every job with the reason
//! instead of panicking. The optional period is that of [`super::koala_c`], and so is the
//! skipping of passes that cannot change anything: a pass ends with the head of every
//! level's queue blocked, so until a site gains processors or becomes usable or a job
//! enters or leaves a queue, passes are skipped and the policy is
//! [`QueuePolicy::blocked`].
//!
//! Error messages number chains and sets from 1, as the seed does, and sites by their
//! [`SiteId`] index.

use super::koala_c::{Period, Stall};
use super::{sites_now, PassCtx, QueuePolicy, StartOptions};
use crate::model::{Job, Millis, Time};
use crate::placement::Fit;
use crate::scheduler::api::{JobId, SiteId};
use std::collections::{BTreeMap, BTreeSet};

/// How TAGS-chain picks a chain for a new job (seed 004 §IV-B: "uniformly random (RND), or
/// in round-robin fashion (RR)").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum ChainDispatch {
    #[default]
    RoundRobin,
    /// Uniformly at random, from [`SplitMix64`] seeded with `seed`.
    Random { seed: u64 },
}

/// TAGS-chain's configuration (seed 004 §IV-B).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct TagsChainParams {
    /// The chains, each its sites in order (first site = lowest limit). Every chain has as
    /// many sites, and no site appears twice.
    pub chains: Vec<Vec<SiteId>>,
    /// Runtime limits of the first `L - 1` positions of every chain, increasing; the last
    /// position has none.
    pub limits: Vec<Millis>,
    pub dispatch: ChainDispatch,
    /// Schedule only at multiples of this period; see [`super::koala_c`].
    pub period: Option<Millis>,
}

impl TagsChainParams {
    /// Check the structure: at least one chain, equal lengths, no site twice, one limit
    /// fewer than sites per chain, limits positive and increasing.
    pub fn validate(&self) -> Result<(), String> {
        let Some(first) = self.chains.first() else {
            return Err("tags-chain needs at least one chain of sites".to_owned());
        };
        let len = first.len();
        let mut seen = BTreeSet::new();
        for (i, chain) in self.chains.iter().enumerate() {
            if chain.is_empty() {
                return Err(format!("chain {} has no sites", i + 1));
            }
            if chain.len() != len {
                return Err(format!(
                    "every chain needs as many sites: chain 1 has {len}, chain {} has {}",
                    i + 1,
                    chain.len()
                ));
            }
            for &s in chain {
                if !seen.insert(s) {
                    return Err(format!("site {s} appears more than once in the chains"));
                }
            }
        }
        check_limits(&self.limits, len, &format!("a chain of {len} sites"))
    }

    /// Check the site indexes against a site list of `sites` sites.
    pub fn check_sites(&self, sites: usize) -> Result<(), String> {
        self.validate()?;
        match self.chains.iter().flatten().find(|&&s| s >= sites) {
            Some(s) => Err(format!(
                "site index {s} is out of range: there are {sites} sites"
            )),
            None => Ok(()),
        }
    }
}

/// TAGS-sets' configuration (seed 004 §IV-C).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct TagsSetsParams {
    /// The sets of sites: the first is every site, each next a proper, non-empty subset of
    /// the one before. Order within a set does not matter (FF uses site-list order).
    pub sets: Vec<Vec<SiteId>>,
    /// Runtime limits of all sets but the last, increasing; the last has none.
    pub limits: Vec<Millis>,
    /// Schedule only at multiples of this period; see [`super::koala_c`].
    pub period: Option<Millis>,
}

impl TagsSetsParams {
    /// Check the structure: at least one non-empty set, each next a proper non-empty subset
    /// of the one before, no site twice in a set, one limit fewer than sets, limits
    /// positive and increasing.
    pub fn validate(&self) -> Result<(), String> {
        if self.sets.is_empty() {
            return Err("tags-sets needs at least one set of sites".to_owned());
        }
        let mut previous: Option<BTreeSet<SiteId>> = None;
        for (i, set) in self.sets.iter().enumerate() {
            if set.is_empty() {
                return Err(format!("set {} has no sites", i + 1));
            }
            let unique: BTreeSet<SiteId> = set.iter().copied().collect();
            if unique.len() != set.len() {
                return Err(format!("set {} names a site more than once", i + 1));
            }
            if let Some(prev) = &previous {
                if !unique.is_subset(prev) || unique.len() == prev.len() {
                    return Err(format!(
                        "set {} must be a proper subset of set {} (seed 004 §IV-C: decreasing \
                         sets)",
                        i + 1,
                        i
                    ));
                }
            }
            previous = Some(unique);
        }
        let n = self.sets.len();
        check_limits(&self.limits, n, &format!("tags-sets with {n} sets"))
    }

    /// Check the site indexes against a site list of `sites` sites: set 1 must be exactly
    /// every site (seed 004 §IV-C: "set 1 consisting of the complete system").
    pub fn check_sites(&self, sites: usize) -> Result<(), String> {
        self.validate()?;
        let first: BTreeSet<SiteId> = self.sets[0].iter().copied().collect();
        let all: BTreeSet<SiteId> = (0..sites).collect();
        if let Some(s) = first.iter().find(|&&s| s >= sites) {
            return Err(format!(
                "site index {s} is out of range: there are {sites} sites"
            ));
        }
        if first != all {
            return Err(format!(
                "set 1 must hold every site (seed 004 §IV-C); it lacks site {}",
                all.difference(&first).next().copied().unwrap_or(0)
            ));
        }
        Ok(())
    }
}

/// `limits` for `levels` levels (`what`, for the message): `levels - 1` of them, positive,
/// strictly increasing.
fn check_limits(limits: &[Millis], levels: usize, what: &str) -> Result<(), String> {
    if limits.len() + 1 != levels {
        return Err(format!(
            "{what} needs {} runtime limits (the last has none), not {}",
            levels - 1,
            limits.len()
        ));
    }
    if let Some(l) = limits.iter().find(|&&l| l <= 0) {
        return Err(format!("runtime limits must be positive, not {l} ms"));
    }
    if let Some(w) = limits.windows(2).find(|w| w[1] <= w[0]) {
        return Err(format!(
            "runtime limits must increase: {} ms is followed by {} ms",
            w[0], w[1]
        ));
    }
    Ok(())
}

/// The SplitMix64 generator (Steele, Lea and Flood; the seeding generator of the xoshiro
/// family): tiny, deterministic, and good enough to spread jobs over chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (multiply-shift: `next * n >> 64`); 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// One level: a site of a chain, or a set of sites.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Level {
    sites: Vec<SiteId>,
    limit: Option<Millis>,
    /// Where a job killed at `limit` goes.
    next: Option<usize>,
    /// Arrival sequence → job.
    queue: BTreeMap<u64, JobId>,
}

impl Level {
    /// Its sites by index, as the module's messages name them: "1, 2".
    fn names(&self) -> String {
        let names: Vec<String> = self.sites.iter().map(ToString::to_string).collect();
        names.join(", ")
    }
}

/// Where a job the policy knows is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum Where {
    Queued {
        level: usize,
        seq: u64,
    },
    /// Started from `level` when its `limit_kills` was `kills`.
    Started {
        level: usize,
        kills: u32,
    },
    /// Pushed back after a start; the next pass decides its level.
    Returned {
        level: usize,
        kills: u32,
        seq: u64,
    },
}

#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
enum Dispatch {
    RoundRobin { next: usize },
    Random(SplitMix64),
}

/// TAGS-chain and TAGS-sets; see the module documentation.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Tags {
    #[serde(deserialize_with = "saved_name")]
    name: PolicyName,
    levels: Vec<Level>,
    /// The levels in the order a pass scans them.
    scan: Vec<usize>,
    /// The levels new jobs may join (chain heads; set 1).
    entries: Vec<usize>,
    dispatch: Dispatch,
    jobs: BTreeMap<JobId, Where>,
    /// The jobs that are [`Where::Started`] in `jobs`.
    started: BTreeSet<JobId>,
    /// Returned jobs by push sequence.
    returned: BTreeMap<u64, JobId>,
    next_seq: u64,
    period: Period,
    stall: Stall,
    /// Why the configuration is invalid, if it is.
    misconfigured: Option<String>,
    /// [`PassCtx::unfinished_ends`] when `started` was last checked for jobs that ended: a
    /// job that finished was taken out by [`QueuePolicy::finished`] before the pass, so none
    /// other ended while it is the same, and a pass need not look again. Not saved: a
    /// restored policy looks.
    #[serde(skip)]
    swept: Option<u64>,
    /// Each level's start options (its sites allowed, first fit), for this many sites: made
    /// once, not at every pass. Not saved.
    #[serde(skip)]
    options: (usize, Vec<StartOptions>),
}

/// A policy's name (an alias, so that serde does not take the field for a borrow).
type PolicyName = &'static str;

/// A snapshot's policy name (`queue::saved`), as the `&'static str` a policy's name is.
fn saved_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    let name = <String as serde::Deserialize>::deserialize(d)?;
    ["tags-chain", "tags-sets"]
        .into_iter()
        .find(|n| *n == name)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown TAGS policy {name}")))
}

impl Tags {
    /// TAGS-chain (seed 004 §IV-B); fails when [`TagsChainParams::validate`] does.
    pub fn chain(params: TagsChainParams) -> Result<Tags, String> {
        params.validate()?;
        let len = params.chains[0].len();
        let mut levels = Vec::new();
        for chain in &params.chains {
            let base = levels.len();
            for (i, &site) in chain.iter().enumerate() {
                levels.push(Level {
                    sites: vec![site],
                    limit: params.limits.get(i).copied(),
                    next: (i + 1 < len).then_some(base + i + 1),
                    queue: BTreeMap::new(),
                });
            }
        }
        let k = params.chains.len();
        let scan = (0..len)
            .flat_map(|i| (0..k).map(move |c| c * len + i))
            .collect();
        let dispatch = match params.dispatch {
            ChainDispatch::RoundRobin => Dispatch::RoundRobin { next: 0 },
            ChainDispatch::Random { seed } => Dispatch::Random(SplitMix64::new(seed)),
        };
        Ok(Tags::with_levels(
            "tags-chain",
            levels,
            scan,
            (0..k).map(|c| c * len).collect(),
            dispatch,
            params.period,
        ))
    }

    /// TAGS-sets (seed 004 §IV-C); fails when [`TagsSetsParams::validate`] does.
    pub fn sets(params: TagsSetsParams) -> Result<Tags, String> {
        params.validate()?;
        let n = params.sets.len();
        let levels = params
            .sets
            .iter()
            .enumerate()
            .map(|(i, set)| {
                let mut sites = set.clone();
                sites.sort_unstable();
                Level {
                    sites,
                    limit: params.limits.get(i).copied(),
                    next: (i + 1 < n).then_some(i + 1),
                    queue: BTreeMap::new(),
                }
            })
            .collect();
        Ok(Tags::with_levels(
            "tags-sets",
            levels,
            (0..n).collect(),
            vec![0],
            Dispatch::RoundRobin { next: 0 },
            params.period,
        ))
    }

    /// A policy that fails every job it is given with `reason` (what
    /// [`QueueConfig::build`](crate::scheduler::QueueConfig::build) makes of invalid
    /// parameters, as building cannot fail).
    pub fn misconfigured(name: &'static str, reason: String) -> Tags {
        // One level that no pass scans: jobs wait there until the pass fails them.
        let level = Level {
            sites: Vec::new(),
            limit: None,
            next: None,
            queue: BTreeMap::new(),
        };
        let mut t = Tags::with_levels(
            name,
            vec![level],
            Vec::new(),
            vec![0],
            Dispatch::RoundRobin { next: 0 },
            None,
        );
        t.misconfigured = Some(reason);
        t
    }

    fn with_levels(
        name: &'static str,
        levels: Vec<Level>,
        scan: Vec<usize>,
        entries: Vec<usize>,
        dispatch: Dispatch,
        period: Option<Millis>,
    ) -> Tags {
        Tags {
            name,
            levels,
            scan,
            entries,
            dispatch,
            jobs: BTreeMap::new(),
            started: BTreeSet::new(),
            returned: BTreeMap::new(),
            next_seq: 0,
            period: Period::new(period),
            stall: Stall::default(),
            misconfigured: None,
            swept: None,
            options: (0, Vec::new()),
        }
    }

    /// The level a new job joins.
    fn entry_level(&mut self) -> usize {
        let k = self.entries.len();
        if k == 0 {
            return 0;
        }
        let i = match &mut self.dispatch {
            Dispatch::RoundRobin { next } => {
                let i = *next % k;
                *next = (*next + 1) % k;
                i
            }
            Dispatch::Random(rng) => rng.below(k as u64) as usize,
        };
        self.entries[i]
    }

    fn enqueue(&mut self, id: JobId, level: usize, seq: u64) {
        if let Some(l) = self.levels.get_mut(level) {
            l.queue.insert(seq, id);
        }
        self.jobs.insert(id, Where::Queued { level, seq });
    }

    /// Put returned jobs in the queue of their level: the next one after a limit kill, or
    /// past it to the first later one whose sites could hold the job. A job too large for
    /// every later level fails, with the reason: left at its next level it would wait there
    /// for ever, and as that level serves its queue's head only, every job behind it too
    /// (a chain whose later sites are smaller; submission checks the entry levels only).
    fn resolve_returned(&mut self, ctx: &mut dyn PassCtx) {
        for (seq, id) in std::mem::take(&mut self.returned) {
            let Some(&Where::Returned { level, kills, .. }) = self.jobs.get(&id) else {
                continue;
            };
            let killed = ctx.record(id).limit_kills() > kills;
            let next = match self.levels.get(level) {
                Some(l) if killed => l.next,
                _ => None,
            };
            let Some(next) = next else {
                self.enqueue(id, level, seq);
                continue;
            };
            match self.later_level_for(id, next, ctx) {
                Some(later) => self.enqueue(id, later, seq),
                None => {
                    self.jobs.remove(&id);
                    let sites = self.sites_from(next);
                    ctx.fail(
                        id,
                        format!(
                            "killed at the runtime limit of its level (sites {}), and no later level of `{}` could ever hold it (sites {sites})",
                            self.levels[level].names(),
                            self.name
                        ),
                    );
                }
            }
        }
    }

    /// The levels from `level` on, following each one's `next`: where a job killed at
    /// `level`'s predecessor may go.
    fn levels_from(&self, level: usize) -> impl Iterator<Item = (usize, &Level)> + '_ {
        std::iter::successors(self.levels.get(level).map(|l| (level, l)), |(_, l)| {
            l.next.and_then(|k| self.levels.get(k).map(|n| (k, n)))
        })
    }

    /// The first level from `level` on whose sites could hold job `id` if they were empty.
    fn later_level_for(&self, id: JobId, level: usize, ctx: &dyn PassCtx) -> Option<usize> {
        self.levels_from(level)
            .find(|(_, l)| ctx.fits_when_empty(id, &l.sites, Some(Fit::First)))
            .map(|(k, _)| k)
    }

    /// The sites of every level from `level` on, by index.
    fn sites_from(&self, level: usize) -> String {
        let names: Vec<String> = self.levels_from(level).map(|(_, l)| l.names()).collect();
        names.join("; ")
    }
}

/// A level's start options on `n` sites: only its sites, first fit.
fn level_options(level: &Level, n: usize) -> StartOptions {
    let mut allowed = vec![false; n];
    for &s in &level.sites {
        if let Some(a) = allowed.get_mut(s) {
            *a = true;
        }
    }
    StartOptions {
        allowed: Some(allowed),
        fit: Some(Fit::First),
        ..StartOptions::default()
    }
}

impl QueuePolicy for Tags {
    fn saved(&self) -> Option<crate::queue::saved::SavedRef<'_>> {
        Some(crate::queue::saved::SavedRef::Tags(self))
    }

    fn fit(&self) -> Option<Fit> {
        Some(Fit::First)
    }

    /// A misconfigured policy has none: its jobs fail in the pass, with the reason.
    fn entry_sites(&self) -> Vec<&[SiteId]> {
        self.entries
            .iter()
            .filter_map(|&e| self.levels.get(e))
            .filter(|l| !l.sites.is_empty() && self.misconfigured.is_none())
            .map(|l| &l.sites[..])
            .collect()
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn push(&mut self, id: JobId, _job: &Job, now: Time) {
        self.stall.clear();
        self.period.on_push(now, self.is_empty());
        let seq = self.next_seq;
        self.next_seq += 1;
        match self.jobs.get(&id).copied() {
            None => {
                let level = self.entry_level();
                self.enqueue(id, level, seq);
            }
            Some(Where::Queued { level, seq: old }) => {
                if let Some(l) = self.levels.get_mut(level) {
                    l.queue.remove(&old);
                }
                self.enqueue(id, level, seq);
            }
            Some(Where::Started { level, kills }) => {
                self.started.remove(&id);
                self.jobs.insert(id, Where::Returned { level, kills, seq });
                self.returned.insert(seq, id);
            }
            Some(Where::Returned { .. }) => {}
        }
    }

    fn remove(&mut self, id: JobId) {
        self.stall.clear();
        self.started.remove(&id);
        match self.jobs.remove(&id) {
            Some(Where::Queued { level, seq }) => {
                if let Some(l) = self.levels.get_mut(level) {
                    l.queue.remove(&seq);
                }
            }
            Some(Where::Returned { seq, .. }) => {
                self.returned.remove(&seq);
            }
            Some(Where::Started { .. }) | None => {}
        }
    }

    fn len(&self) -> usize {
        self.levels.iter().map(|l| l.queue.len()).sum::<usize>() + self.returned.len()
    }

    fn pass(&mut self, ctx: &mut dyn PassCtx) {
        self.resolve_returned(ctx);
        // Forget jobs that ended while running (cancelled, failed): no call tells us.
        let version = ctx.unfinished_ends();
        if self.swept != Some(version) {
            let ended: Vec<JobId> = self
                .started
                .iter()
                .copied()
                .filter(|&id| ctx.ended(id))
                .collect();
            for id in ended {
                self.started.remove(&id);
                self.jobs.remove(&id);
            }
            self.swept = Some(version);
        }
        if let Some(reason) = self.misconfigured.clone() {
            let queued: Vec<JobId> = self.jobs.keys().copied().collect();
            for id in queued {
                self.remove(id);
                ctx.fail(
                    id,
                    format!("queue policy `{}` is misconfigured: {reason}", self.name),
                );
            }
            return;
        }
        let (now, epoch) = (ctx.now(), ctx.epoch());
        if self.is_empty() || !self.stall.begin(epoch, now, &mut self.period) {
            return;
        }
        let n = sites_now(ctx).count();
        if self.options.0 != n || self.options.1.len() != self.levels.len() {
            self.options = (n, self.levels.iter().map(|l| level_options(l, n)).collect());
        }
        for i in 0..self.scan.len() {
            let level = self.scan[i];
            let options = &self.options.1[level];
            while let Some((&seq, &id)) = self.levels[level].queue.first_key_value() {
                if !ctx.start_with(id, options) {
                    break;
                }
                self.levels[level].queue.remove(&seq);
                let kills = ctx.record(id).limit_kills();
                self.jobs.insert(id, Where::Started { level, kills });
                self.started.insert(id);
            }
        }
        if !self.is_empty() {
            self.stall.blocked_at(epoch, ctx.epoch());
        }
    }

    fn next_wakeup(&self) -> Option<Time> {
        self.period.wakeup(!self.is_empty())
    }

    fn finished(&mut self, id: JobId, _job: &Job, _runtime: Millis) {
        self.started.remove(&id);
        self.jobs.remove(&id);
    }

    fn blocked(&self) -> bool {
        self.stall.blocked()
    }

    /// Every level's queue in scan order, restricted to the level's sites; returned jobs
    /// not yet resolved count at the level they ran from.
    fn demand(&self, sites: usize) -> Option<Vec<super::Demand>> {
        let mask = |level: usize| {
            let mut allowed = vec![false; sites];
            for &s in self.levels.get(level).map_or(&[][..], |l| &l.sites[..]) {
                if let Some(a) = allowed.get_mut(s) {
                    *a = true;
                }
            }
            allowed
        };
        let mut out = Vec::with_capacity(self.len());
        for &level in &self.scan {
            let allowed = mask(level);
            for &id in self.levels[level].queue.values() {
                out.push((id, Some(allowed.clone())));
            }
        }
        for &id in self.returned.values() {
            if let Some(&Where::Returned { level, .. }) = self.jobs.get(&id) {
                out.push((id, Some(mask(level))));
            }
        }
        Some(out)
    }

    fn runtime_limit(&self, id: JobId) -> Option<Millis> {
        match self.jobs.get(&id) {
            Some(&Where::Started { level, .. }) => self.levels.get(level)?.limit,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_reference() {
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let mut r = SplitMix64::new(7);
        assert!((0..100).all(|_| r.below(3) < 3));
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn chain_levels_and_scan_order() {
        let t = Tags::chain(TagsChainParams {
            chains: vec![vec![0, 1, 2], vec![3, 4, 5]],
            limits: vec![10, 20],
            ..TagsChainParams::default()
        })
        .unwrap();
        assert_eq!(t.scan, [0, 3, 1, 4, 2, 5]);
        assert_eq!(t.entries, [0, 3]);
        assert_eq!(t.levels[4].sites, [4]);
        assert_eq!(t.levels[4].limit, Some(20));
        assert_eq!(t.levels[4].next, Some(5));
        assert_eq!((t.levels[5].limit, t.levels[5].next), (None, None));
    }
}
