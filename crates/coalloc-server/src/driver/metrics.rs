//! The driver's side of the Prometheus metrics ([`crate::metrics`]): the co-allocation
//! latency of each job whose barrier is released, and, before each scrape, the metrics that
//! are states (jobs by state, the queue, sites, clouds) and the counts of tries and aborts
//! the scheduling core keeps in its job records (seed 000 §5, seed 003 A.5).

use super::view::job_state_name;
use super::Driver;
use crate::metrics::{label, raise_to, ABORT_CLASSES, JOB_STATES};
use coalloc_core::model::Priority;
use coalloc_core::scheduler::jobs::Phase;

impl Driver {
    /// A job's barrier was released: its co-allocation latency (submit to release).
    pub(crate) fn observe_commit(&self, job: u64) {
        if self.replaying {
            return;
        }
        if let Some(j) = self.core.job(job) {
            let release = j.record.barrier_release().unwrap_or(self.now);
            let ms = (release - j.record.submit).max(0);
            self.metrics
                .coallocation_latency
                .observe(ms as f64 / 1000.0);
        }
    }

    /// Bring the state metrics up to date.
    pub(crate) fn refresh_metrics(&self) {
        let m = &self.metrics;
        let mut states = [0i64; JOB_STATES.len()];
        let mut queued = [0i64; 2];
        let mut tries = [0u64; 4];
        let mut aborts = [0u64; ABORT_CLASSES.len()];
        for j in self.core.jobs() {
            let name = job_state_name(self.failed.contains(&j.id), j.phase);
            if let Some(i) = JOB_STATES.iter().position(|s| *s == name) {
                states[i] += 1;
            }
            if j.phase == Phase::Queued {
                queued[usize::from(j.job.priority == Priority::High)] += 1;
            }
            let r = &j.record;
            for (t, v) in tries.iter_mut().zip([
                r.placement_tries,
                r.placement_failures,
                r.claim_tries(),
                r.claim_failures(),
            ]) {
                *t += u64::from(v);
            }
            for (a, v) in aborts.iter_mut().zip([
                r.submit_failures(),
                r.completion_failures(),
                r.claim_failures(),
                r.limit_kills(),
                r.preemptions(),
            ]) {
                *a += u64::from(v);
            }
        }
        for (name, n) in JOB_STATES.iter().zip(states) {
            m.jobs.get_or_create(&label("state", name)).set(n);
        }
        for (name, n) in ["low", "high"].iter().zip(queued) {
            m.queued.get_or_create(&label("priority", name)).set(n);
        }
        raise_to(&m.placement_tries, tries[0]);
        raise_to(&m.placement_failures, tries[1]);
        raise_to(&m.claiming_tries, tries[2]);
        raise_to(&m.claiming_failures, tries[3]);
        for (class, n) in ABORT_CLASSES.iter().zip(aborts) {
            raise_to(&m.aborts.get_or_create(&label("class", class)), n);
        }
        for i in 0..self.config.sites.len() {
            let s = self.site_sample(i);
            let l = label("site", &s.site);
            m.site_processors.get_or_create(&l).set(i64::from(s.total));
            m.site_idle.get_or_create(&l).set(i64::from(s.idle));
            m.site_coalloc.get_or_create(&l).set(i64::from(s.coalloc));
            m.site_other.get_or_create(&l).set(i64::from(s.other));
            let usable = self.core.site_state(i).is_some_and(|c| c.usable());
            m.site_usable.get_or_create(&l).set(i64::from(usable));
            m.site_healthy.get_or_create(&l).set(i64::from(s.healthy));
            if let Some(c) = self.core.cloud(i) {
                let bill = c.bill_until(self.now);
                m.cloud_vms.get_or_create(&l).set(i64::from(c.live()));
                m.cloud_cost.get_or_create(&l).set(bill.dollars());
                m.cloud_vm_hours.get_or_create(&l).set(bill.vm_hours as i64);
            }
        }
    }
}
