//! The server's Prometheus metrics, served at `/metrics` in the Prometheus text exposition
//! format (0.0.4) by prometheus-client. Names follow Prometheus' conventions: a `coalloc_`
//! prefix, base units (seconds, dollars), `_total` on counters, and labels for the
//! dimensions (`state`, `class`, `site`).
//!
//! Events are counted where they happen (the co-allocation latency when a barrier is
//! released, each journal commit, each transfer); what is a state (jobs by state, the queue,
//! each site's processors, cloud VMs and cost) and the tries the scheduling core counts per
//! job are read from the driver just before each scrape (`Driver::refresh_metrics`).

use prometheus_client::encoding::prometheus_text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// One label: its name and value.
pub type Labels = Vec<(&'static str, String)>;

/// A gauge of floating-point values.
pub type FloatGauge = Gauge<f64, AtomicU64>;

/// Every metric, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    pub jobs: Family<Labels, Gauge>,
    pub queued: Family<Labels, Gauge>,
    pub coallocation_latency: Histogram,
    pub placement_tries: Counter,
    pub placement_failures: Counter,
    pub claiming_tries: Counter,
    pub claiming_failures: Counter,
    pub aborts: Family<Labels, Counter>,
    pub site_processors: Family<Labels, Gauge>,
    pub site_idle: Family<Labels, Gauge>,
    pub site_coalloc: Family<Labels, Gauge>,
    pub site_other: Family<Labels, Gauge>,
    pub site_usable: Family<Labels, Gauge>,
    pub site_healthy: Family<Labels, Gauge>,
    pub journal_commit: Histogram,
    pub transfers: Counter,
    /// Advance reservations (issue 31) by outcome ([`RESERVATION_OUTCOMES`]).
    pub reservations: Family<Labels, Counter>,
    pub cloud_vms: Family<Labels, Gauge>,
    pub cloud_cost: Family<Labels, FloatGauge>,
    pub cloud_vm_hours: Family<Labels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

/// The abort classes of `coalloc_aborts_total` (seed 000 §3.4, seed 003 §4.3.4): a start
/// aborted before commit, a failure after it, a claiming try that did not claim every
/// component, a kill at a runtime limit, a preemption.
pub const ABORT_CLASSES: [&str; 5] = [
    "before_commit",
    "after_commit",
    "claiming",
    "runtime_limit",
    "preempted",
];

/// The outcomes of `coalloc_reservations_total`: a reservation a site made, one a
/// component was started into, one deleted before its job ended (a roll back).
pub const RESERVATION_OUTCOMES: [&str; 3] = ["made", "honoured", "rolled_back"];

/// The job states of `coalloc_jobs`, as the API names them.
pub const JOB_STATES: [&str; 6] = [
    "queued", "claiming", "starting", "running", "finished", "failed",
];

impl Metrics {
    pub fn new() -> Metrics {
        let mut r = Registry::with_prefix("coalloc");
        let m = Metrics {
            jobs: Family::default(),
            queued: Family::default(),
            // 10 ms to about 87 min: a co-allocation is tens of milliseconds on idle
            // sites, and as long as the queue wait on busy ones.
            coallocation_latency: Histogram::new(exponential_buckets(0.01, 2.0, 20)),
            placement_tries: Counter::default(),
            placement_failures: Counter::default(),
            claiming_tries: Counter::default(),
            claiming_failures: Counter::default(),
            aborts: Family::default(),
            site_processors: Family::default(),
            site_idle: Family::default(),
            site_coalloc: Family::default(),
            site_other: Family::default(),
            site_usable: Family::default(),
            site_healthy: Family::default(),
            // 50 µs to about 1.6 s.
            journal_commit: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            transfers: Counter::default(),
            reservations: Family::default(),
            cloud_vms: Family::default(),
            cloud_cost: Family::default(),
            cloud_vm_hours: Family::default(),
            registry: Registry::default(),
        };
        r.register("jobs", "Jobs by state", m.jobs.clone());
        r.register(
            "queued_jobs",
            "Jobs waiting in the scheduler's queues, by priority (KOALA's high and low queues)",
            m.queued.clone(),
        );
        r.register(
            "coallocation_latency_seconds",
            "Time from a job's submission to the release of its start barrier",
            m.coallocation_latency.clone(),
        );
        r.register(
            "placement_tries",
            "Placement tries of every job, successful or not",
            m.placement_tries.clone(),
        );
        r.register(
            "placement_failures",
            "Placement tries that found no fit",
            m.placement_failures.clone(),
        );
        r.register(
            "claiming_tries",
            "Claiming tries (KOALA's ICP)",
            m.claiming_tries.clone(),
        );
        r.register(
            "claiming_failures",
            "Claiming tries that did not claim every component",
            m.claiming_failures.clone(),
        );
        r.register(
            "aborts",
            "Runs of jobs stopped, by class: before_commit, after_commit, claiming, runtime_limit, preempted",
            m.aborts.clone(),
        );
        r.register(
            "site_processors",
            "Processors of each site",
            m.site_processors.clone(),
        );
        r.register(
            "site_idle_processors",
            "Idle processors of each site",
            m.site_idle.clone(),
        );
        r.register(
            "site_coalloc_processors",
            "Processors of each site held by coalloc's components",
            m.site_coalloc.clone(),
        );
        r.register(
            "site_other_processors",
            "Processors of each site held by other users",
            m.site_other.clone(),
        );
        r.register(
            "site_usable",
            "1 when the scheduler may place components on the site",
            m.site_usable.clone(),
        );
        r.register(
            "site_healthy",
            "1 when the site's resource manager answered its last poll",
            m.site_healthy.clone(),
        );
        r.register(
            "journal_commit_seconds",
            "Time to commit one turn's journal entries",
            m.journal_commit.clone(),
        );
        r.register(
            "transfers",
            "Input file transfers started",
            m.transfers.clone(),
        );
        r.register(
            "reservations",
            "Advance reservations at sites (issue 31), by outcome: made, honoured (its job's \
             barrier was released with the component started into it), rolled_back (deleted \
             before that)",
            m.reservations.clone(),
        );
        r.register(
            "cloud_vms",
            "Leased VMs of each cloud site",
            m.cloud_vms.clone(),
        );
        r.register(
            "cloud_cost_dollars",
            "What each cloud site's VMs have cost so far",
            m.cloud_cost.clone(),
        );
        r.register(
            "cloud_vm_hours",
            "VM-hours each cloud site has billed so far",
            m.cloud_vm_hours.clone(),
        );
        Metrics { registry: r, ..m }
    }

    /// The exposition text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String does not fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// Raise a counter to `total` (a count the core keeps; it only grows).
pub fn raise_to(c: &Counter, total: u64) {
    c.inc_by(total.saturating_sub(c.get()));
}

/// A one-label set.
pub fn label(name: &'static str, value: &str) -> Labels {
    vec![(name, value.to_string())]
}

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_conventions() {
        let m = Metrics::new();
        m.coallocation_latency.observe(0.03);
        m.site_idle.get_or_create(&label("site", "alpha")).set(12);
        raise_to(&m.placement_tries, 5);
        raise_to(&m.placement_tries, 3);
        let text = m.encode();
        assert!(
            text.contains("# TYPE coalloc_coallocation_latency_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains("coalloc_coallocation_latency_seconds_bucket{le=\"0.04\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("coalloc_site_idle_processors{site=\"alpha\"} 12"),
            "{text}"
        );
        assert!(text.contains("coalloc_placement_tries_total 5"), "{text}");
    }
}
