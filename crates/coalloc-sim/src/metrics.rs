//! The metrics of DESIGN.md computed from one simulated run ([`Metrics::of`]): one
//! definition, used by every experiment's CSV row.
//!
//! Times are seconds. Slowdown is response time over runtime; bounded slowdown uses a 10 s
//! bound, `max(1, response / max(runtime, 10 s))`. Per-job means are over finished jobs.
//! Loads are shares of the whole system's processor-time over the measurement window
//! [0, window end] (seed 001 §2.3): *total load* counts every busy processor (local jobs,
//! coalloc's components before and after their barrier), *global load* the processors
//! computing coalloc's jobs after the barrier, *wasted* those claimed before it. The
//! *success rate* is the share of jobs that finished, and, for jobs with a deadline, started
//! by it (seed 001's "started successfully at their deadline").

use crate::engine::{JobFate, JobOutcome, Outcome};
use coalloc_core::model::SECOND;

/// Every metric of one run.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct Metrics {
    pub jobs: usize,
    pub finished: usize,
    pub failed: usize,
    pub refused: usize,
    pub unfinished: usize,
    pub success_rate: f64,
    pub mean_wait: f64,
    pub mean_response: f64,
    pub mean_runtime: f64,
    pub mean_slowdown: f64,
    pub mean_bounded_slowdown: f64,
    /// Submission to the last successful placement (seed 000's placement time).
    pub mean_placement_time: f64,
    /// Last minus first estimated job start time (seed 000 §3.2).
    pub mean_start_delay: f64,
    pub mean_placement_tries: f64,
    pub mean_placement_failures: f64,
    pub mean_claim_tries: f64,
    pub mean_claim_failures: f64,
    pub submit_failures: u64,
    pub completion_failures: u64,
    pub preemptions: u64,
    pub limit_kills: u64,
    /// Share of finished jobs whose last run used more than one site.
    pub coallocated_share: f64,
    /// Most jobs running (after their barrier) at one time.
    pub max_concurrent: usize,
    pub local_jobs: usize,
    pub local_finished: usize,
    pub local_killed: usize,
    pub local_kill_rate: f64,
    pub mean_local_response: f64,
    pub total_load: f64,
    pub global_load: f64,
    pub local_load: f64,
    pub wasted: f64,
    /// From the first submission to the last end of a coalloc job.
    pub makespan: f64,
    /// Processor-time of coalloc's finished jobs over (processors × makespan).
    pub utilization: f64,
    /// Money spent on leased resources, dollars (cloud sites; 0 without them): VM-hours
    /// billed per started hour times each site's price (seed 004 §V-A).
    pub cost: f64,
    /// VM-hours billed on every cloud site, free or paid.
    pub vm_hours: u64,
    /// VM-hours billed on paid cloud sites (what `cost` is made of).
    pub paid_vm_hours: u64,
    /// VM leases asked for, and those that failed.
    pub leases: u64,
    pub lease_failures: u64,
    /// Processor-time reserved for coalloc's components but not used by them (a window
    /// before its component started, or after it ended early), as a share of the system's
    /// processor-time (issue 31's utilisation lost to held windows); 0 without reservations.
    pub reserved_idle: f64,
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// The most intervals `[start, end)` that overlap at one time.
fn max_concurrent(runs: impl Iterator<Item = (i64, i64)>) -> usize {
    let (mut starts, mut ends): (Vec<i64>, Vec<i64>) = runs.unzip();
    starts.sort_unstable();
    ends.sort_unstable();
    // A sweep over the starts; at equal times ends come first: a job ending as another
    // starts does not overlap it.
    let (mut ended, mut most) = (0usize, 0usize);
    for (k, &s) in starts.iter().enumerate() {
        while ended < ends.len() && ends[ended] <= s {
            ended += 1;
        }
        most = most.max((k + 1).saturating_sub(ended));
    }
    most
}

fn secs(ms: i64) -> f64 {
    ms as f64 / SECOND as f64
}

impl Metrics {
    /// The metrics of every job of `out`.
    pub fn of(out: &Outcome) -> Metrics {
        Metrics::of_jobs(out, &|_| true)
    }

    /// The metrics of the jobs of `out` that `keep` keeps (e.g. one priority, seed 000's
    /// split); the site metrics (loads, local jobs) stay the whole run's.
    pub fn of_jobs(out: &Outcome, keep: &dyn Fn(&JobOutcome) -> bool) -> Metrics {
        let jobs: Vec<_> = out.jobs.iter().filter(|j| keep(j)).collect();
        let done: Vec<_> = jobs
            .iter()
            .filter(|j| j.fate == JobFate::Finished)
            .filter_map(|j| Some((j, j.record.as_ref()?)))
            .collect();
        let count = |f: fn(&JobFate) -> bool| jobs.iter().filter(|j| f(&j.fate)).count();
        let success = done
            .iter()
            .filter(|(j, r)| match (j.deadline, r.start()) {
                (Some(d), Some(s)) => s <= d,
                _ => true,
            })
            .count();
        let resp = |r: &coalloc_core::scheduler::JobRecord| secs(r.response().unwrap_or(0));
        let run = |r: &coalloc_core::scheduler::JobRecord| secs(r.runtime().unwrap_or(0));
        let all_records = || jobs.iter().filter_map(|j| j.record.as_ref());
        let total_of = |f: fn(&coalloc_core::scheduler::JobRecord) -> u32| {
            all_records().map(|r| u64::from(f(r))).sum::<u64>()
        };
        let first = jobs.iter().map(|j| j.submit).min().unwrap_or(0);
        let last = done
            .iter()
            .filter_map(|(_, r)| r.end())
            .max()
            .unwrap_or(first);
        let makespan = (last - first).max(0);
        let processors: u64 = out.processors.iter().map(|&p| u64::from(p)).sum();
        let busy: f64 = done
            .iter()
            .map(|(j, r)| secs(r.runtime().unwrap_or(0)) * j.size as f64)
            .sum();
        let capacity = processors as f64 * out.window_end.max(0) as f64;
        let share = |x: u128| {
            if capacity > 0.0 {
                x as f64 / capacity
            } else {
                0.0
            }
        };
        let usage = out.usage.iter().fold((0u128, 0u128, 0u128), |a, u| {
            (a.0 + u.local, a.1 + u.held, a.2 + u.running)
        });
        let locals: Vec<_> = out.local.iter().flatten().collect();
        let local_submits: Vec<_> = out.local_submits.iter().flatten().collect();
        let local_done: Vec<f64> = locals
            .iter()
            .zip(&local_submits)
            .filter(|(f, _)| !f.killed)
            .filter_map(|(f, &&s)| Some(secs(f.end? - s)))
            .collect();
        let killed = locals.iter().filter(|f| f.killed).count();
        Metrics {
            jobs: jobs.len(),
            finished: done.len(),
            failed: count(|f| matches!(f, JobFate::Failed(_))),
            refused: count(|f| matches!(f, JobFate::Refused(_))),
            unfinished: count(|f| matches!(f, JobFate::Unfinished)),
            success_rate: if jobs.is_empty() {
                0.0
            } else {
                success as f64 / jobs.len() as f64
            },
            mean_wait: mean(done.iter().map(|(_, r)| secs(r.wait().unwrap_or(0)))),
            mean_response: mean(done.iter().map(|(_, r)| resp(r))),
            mean_runtime: mean(done.iter().map(|(_, r)| run(r))),
            mean_slowdown: mean(done.iter().map(|(_, r)| resp(r) / run(r).max(0.001))),
            mean_bounded_slowdown: mean(
                done.iter()
                    .map(|(_, r)| (resp(r) / run(r).max(10.0)).max(1.0)),
            ),
            mean_placement_time: mean(
                done.iter()
                    .filter_map(|(_, r)| Some(secs(r.placed()? - r.submit))),
            ),
            mean_start_delay: mean(
                done.iter()
                    .filter_map(|(_, r)| Some(secs(r.start_delay()?))),
            ),
            mean_placement_tries: mean(all_records().map(|r| f64::from(r.placement_tries))),
            mean_placement_failures: mean(all_records().map(|r| f64::from(r.placement_failures))),
            mean_claim_tries: mean(all_records().map(|r| f64::from(r.claim_tries()))),
            mean_claim_failures: mean(all_records().map(|r| f64::from(r.claim_failures()))),
            submit_failures: total_of(|r| r.submit_failures()),
            completion_failures: total_of(|r| r.completion_failures()),
            preemptions: total_of(|r| r.preemptions()),
            limit_kills: total_of(|r| r.limit_kills()),
            coallocated_share: mean(done.iter().map(|(_, r)| {
                let mut s = r.sites().to_vec();
                s.sort_unstable();
                s.dedup();
                if s.len() > 1 {
                    1.0
                } else {
                    0.0
                }
            })),
            max_concurrent: max_concurrent(
                done.iter()
                    .filter_map(|(_, r)| Some((r.start()?, r.end()?))),
            ),
            local_jobs: locals.len(),
            local_finished: local_done.len(),
            local_killed: killed,
            local_kill_rate: if locals.is_empty() {
                0.0
            } else {
                killed as f64 / locals.len() as f64
            },
            mean_local_response: mean(local_done.iter().copied()),
            total_load: share(usage.0 + usage.1 + usage.2),
            global_load: share(usage.2),
            local_load: share(usage.0),
            wasted: share(usage.1),
            makespan: secs(makespan),
            utilization: if makespan > 0 && processors > 0 {
                busy / (processors as f64 * secs(makespan))
            } else {
                0.0
            },
            cost: out.clouds.iter().map(|c| c.bill.cost_micros).sum::<u64>() as f64 / 1e6,
            vm_hours: out.clouds.iter().map(|c| c.bill.vm_hours).sum(),
            paid_vm_hours: out
                .clouds
                .iter()
                .filter(|c| c.bill.cost_micros > 0)
                .map(|c| c.bill.vm_hours)
                .sum(),
            leases: out.clouds.iter().map(|c| c.leases).sum(),
            lease_failures: out.clouds.iter().map(|c| c.lease_failures).sum(),
            reserved_idle: share(out.usage.iter().map(|u| u.reserved).sum()),
        }
    }

    /// Column names and values, in declaration order, for a CSV row.
    pub fn columns(&self) -> Vec<(String, String)> {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(map)) => {
                map.into_iter().map(|(k, v)| (k, v.to_string())).collect()
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::max_concurrent;

    #[test]
    fn concurrency_counts_overlaps_and_not_touching_runs() {
        assert_eq!(max_concurrent([(0, 10), (10, 20)].into_iter()), 1);
        assert_eq!(max_concurrent([(0, 10), (5, 20), (6, 7)].into_iter()), 3);
        assert_eq!(max_concurrent(std::iter::empty()), 0);
    }
}
