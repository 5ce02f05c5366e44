//! A run's state before its first event ([`Sim::new`]): the parameters checked, the
//! simulated sites, clouds and tables made, the first events in the heap.

use super::feed::{FedJobs, Feed};
use super::site_set::SiteSet;
use super::{outcome_of, CloudUsage, Ended, JobOutcome, Sim, SimError};
use crate::engine::params::{Jobs, SimParams};
use crate::engine::site::{SimSite, Sites};
use crate::workload::{stream_of, Purpose};
use coalloc_core::model::{Site, Time};
use coalloc_core::paged::Paged;
use coalloc_core::provisioning::Provisioning;
use coalloc_core::scheduler::{Event, Scheduler, SchedulerConfig};
use std::collections::{BTreeMap, BinaryHeap};

impl<'a> Sim<'a> {
    /// A run's state before its first event; `feed` for [`simulate_fed`].
    pub(super) fn new(
        sites: Vec<Site>,
        config: SchedulerConfig,
        workload: Jobs<'a>,
        params: &'a SimParams,
        feed: Option<FedJobs>,
    ) -> Result<Sim<'a>, SimError> {
        if workload.local().len() > sites.len() {
            return Err(SimError::LocalSite(workload.local().len() - 1, sites.len()));
        }
        for (name, p) in [
            ("the start failure probability", params.failures.start),
            ("the transfer failure probability", params.failures.transfer),
            ("the lease failure probability", params.failures.lease),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(SimError::Probability(name));
            }
        }
        for (k, o) in params.failures.outages.iter().enumerate() {
            if o.site >= sites.len() {
                return Err(SimError::OutageSite(k + 1, o.site));
            }
            if o.to < o.from {
                return Err(SimError::OutageWindow(k + 1));
            }
        }
        for (k, o) in params.failures.link_losses.iter().enumerate() {
            if o.site >= sites.len() {
                return Err(SimError::LinkLossSite(k + 1, o.site));
            }
            if o.to < o.from || o.grace < 0 {
                return Err(SimError::LinkLossWindow(k + 1));
            }
        }
        let last_arrival = (0..workload.len())
            .filter_map(|i| workload.submit(i))
            .chain(workload.local().iter().flatten().map(|l| l.submit))
            .max()
            .unwrap_or(0);
        // Fed jobs: the window ends at the last arrival once the reader is done (a run never
        // gets past the last arrival before it has heard the reader is done, so no reading
        // before then is clipped).
        let window_end = match (params.window_end, &feed) {
            (Some(end), _) => end,
            (None, Some(_)) => Time::MAX,
            (None, None) => last_arrival,
        };
        // A provisioned cloud starts with no VMs; the scheduler leases them.
        let provisioned = matches!(config.provisioning, Provisioning::OnDemand(_));
        let cloud_of = |s: &Site| s.cloud.clone().filter(|_| provisioned);
        let start_size = |s: &Site| {
            if cloud_of(s).is_some() {
                0
            } else {
                s.processors
            }
        };
        let sim_sites: Vec<SimSite> = sites
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let locals = workload.local().get(i).cloned().unwrap_or_default();
                SimSite::new(start_size(s), locals, window_end)
            })
            .collect();
        let reported = sites.iter().map(|s| (start_size(s), true)).collect();
        let vm_processors = sites
            .iter()
            .map(|s| cloud_of(s).map_or(0, |c| c.vm_processors))
            .collect();
        let lease_latency = sites
            .iter()
            .map(|s| cloud_of(s).map_or(0, |c| c.lease_latency))
            .collect();
        let price = sites
            .iter()
            .map(|s| cloud_of(s).map_or(0, |c| c.price_micros_per_vm_hour))
            .collect();
        let configured = sites.iter().map(|s| s.processors).collect();
        let cloud_usage = vec![CloudUsage::default(); sites.len()];
        let running_vms = vec![0; sites.len()];
        let link_up_at = vec![None; sites.len()];
        let seed = params.seed;
        let outcomes: Vec<JobOutcome> = (0..workload.len())
            .map(|i| outcome_of(&workload, i))
            .collect();
        let mut sim = Sim {
            site_names: sites.iter().map(|s| s.name.clone()).collect(),
            reserve_ahead: sites
                .iter()
                .map(coalloc_core::scheduler::reserve::reserve_ahead)
                .collect(),
            bandwidth: sites.iter().map(|s| s.bandwidth.clone()).collect(),
            // The outcomes keep each ended job's record; the core need not.
            core: Scheduler::new(
                SchedulerConfig {
                    forget_ended: true,
                    ..config
                },
                sites,
            ),
            params,
            take_jobs: config.max_queued.is_none(),
            work: workload,
            sites: Sites::new(sim_sites),
            heap: BinaryHeap::new(),
            periodic: 0,
            seq: 0,
            now: 0,
            launches: Paged::default(),
            by_job: Paged::default(),
            deferred: BTreeMap::new(),
            window_of: BTreeMap::new(),
            abort_reasons: BTreeMap::new(),
            aborts_dealt: BTreeMap::new(),
            index_of: Vec::with_capacity(outcomes.len()),
            arrivals: Vec::new(),
            next_arrival: 0,
            ends: if params.keep_records {
                Vec::new()
            } else {
                vec![Ended::NOT; outcomes.len()]
            },
            outcomes,
            fates: BTreeMap::new(),
            follow: Vec::new(),
            spare: Vec::new(),
            cancels_taken: Vec::new(),
            replies: Vec::new(),
            dirty: SiteSet::default(),
            reported,
            link_up_at,
            starts: stream_of(seed, Purpose::Failures, 0),
            crashes: stream_of(seed, Purpose::Failures, 1),
            transfers: stream_of(seed, Purpose::Failures, 2),
            samples: Vec::new(),
            due: Vec::new(),
            held: std::collections::VecDeque::new(),
            vm_processors,
            lease_latency,
            price,
            configured,
            vms: BTreeMap::new(),
            running_vms,
            cloud_usage,
            leases: stream_of(seed, Purpose::Failures, 3),
            last_arrival,
            window_end,
            feed: feed.map(Feed::new),
        };
        sim.seed_events();
        if sim.vm_processors.iter().any(|&p| p > 0) {
            // Provisioned clouds lease their minimum before anything arrives.
            sim.core.handle(0, Event::Tick).ok();
            sim.quiesce();
        }
        Ok(sim)
    }
}
