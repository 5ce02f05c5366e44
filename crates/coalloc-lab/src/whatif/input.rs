//! What a what-if replays, read from a server's state directory (issue 22 item 4):
//! the jobs as submitted (the journal's `submit` entries and those its compactions kept,
//! in the native JSON spec, [`Journal::submissions`]), each
//! job's observed net run time (the result log), the sites' other users' load and their
//! outages (the surveillance log, as `coalloc report` reads it), each site's start latency
//! (zero on a local site, whose components start at once; elsewhere the median of the result
//! log's placement to barrier release over the finished jobs that ran there), and every
//! job's aborted starts (the result log's `before_commit` aborts: each of its first starts
//! in the replay has a component fail before the barrier with the same reason, and the core
//! backs off and places it again as its configuration says), and each component's own run
//! time (a component that ends before the others of its job gives its processors back
//! then: read from the site's coalloc level in the surveillance log, [`component_ends`]).
//!
//! Jobs that did not finish are replayed too, each as [`Treatment`] says: a cancelled job is
//! cancelled the same time after its submission; a job that failed after it ran fails after
//! its observed run time (as its own program's failure, the core's limits deciding about
//! retries as they did); a job that failed before it ever ran (its starts kept failing, it
//! timed out) is ended the same time after its submission. Jobs with no line in the result
//! log (still live when the server stopped) are not replayed.
//!
//! Times become milliseconds from the first journaled submission or reading (`t0`).

use super::ends::{component_ends, Comp};
use crate::report::busy;
use crate::LabError;
use coalloc_core::model::{Millis, Time};
use coalloc_server::journal::Journal;
use coalloc_server::logs::{read_lines, ResultRecord, SiteSample};
use coalloc_sim::engine::site::Local;
use coalloc_sim::engine::{Outage, Scripted, SimJob, Workload};
use std::collections::BTreeMap;
use std::path::Path;

/// A server's history, ready for the engine.
pub struct History {
    pub workload: Workload,
    pub outages: Vec<Outage>,
    /// The observed record of every replayed job, by server job number.
    pub observed: BTreeMap<u64, ResultRecord>,
    /// How each replayed job is treated, by server job number.
    pub treated: BTreeMap<u64, Treatment>,
    /// The engine's scripted fates, by index in `workload.jobs`.
    pub scripted: BTreeMap<usize, Scripted>,
    pub samples: Vec<SiteSample>,
    /// Epoch milliseconds of time 0, and the end of the logs in engine time.
    pub t0: i64,
    pub end: Time,
    /// Each site's start latency (by index in the configuration): zero for a local site,
    /// else the median of placement to barrier release over the finished jobs that ran
    /// there (over every finished job that ran on a site that is not local, when none did).
    pub site_latency: Vec<Millis>,
    /// The aborted starts (their reasons) of the jobs that had some, by index in
    /// `workload.jobs`.
    pub aborted_starts: BTreeMap<usize, Vec<String>>,
    /// Each component's own run time, for the finished jobs some of whose components ended
    /// before the others, by index in `workload.jobs`.
    pub component_runtimes: BTreeMap<usize, Vec<Millis>>,
    /// Jobs submitted that have no line in the result log (still live when the logs end):
    /// not replayed.
    pub skipped: usize,
}

/// How a job of the history is replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Treatment {
    /// It finished: it runs for its observed net run time.
    Finished,
    /// Its user cancelled it this long after its submission: so it is in the replay.
    Cancelled { after: Millis },
    /// It failed after it ran (its barrier released) for `runtime`: every run of it in the
    /// replay fails, as its own program's failure, after that long.
    FailedRunning { runtime: Millis },
    /// It failed this long after its submission without ever running: it is ended then.
    FailedBeforeRunning { after: Millis },
}

impl Treatment {
    /// The word of the output.
    pub fn name(self) -> &'static str {
        match self {
            Treatment::Finished => "finished",
            Treatment::Cancelled { .. } => "cancelled",
            Treatment::FailedRunning { .. } => "failed running",
            Treatment::FailedBeforeRunning { .. } => "failed before running",
        }
    }

    /// What the replay does with such a job, in words.
    pub fn how(self) -> String {
        let s = |ms: Millis| format!("{:.1} s", ms as f64 / 1000.0);
        match self {
            Treatment::Finished => "runs for its observed net run time".into(),
            Treatment::Cancelled { after } => {
                format!("cancelled {} after its submission, as it was", s(after))
            }
            Treatment::FailedRunning { runtime } => format!(
                "its program fails after its observed run time of {} (retries as the configuration's limits say)",
                s(runtime)
            ),
            Treatment::FailedBeforeRunning { after } => format!(
                "ended {} after its submission, when it failed without running (the replay cannot reproduce why)",
                s(after)
            ),
        }
    }

    /// Its observed result line's treatment; `None`: not replayable (no end recorded).
    pub fn of(r: &ResultRecord) -> Option<Treatment> {
        let after = r.response_ms.or_else(|| Some(r.end? - r.submit))?.max(0);
        Some(match (r.outcome.as_str(), r.reason.as_deref(), r.run_ms) {
            ("finished", _, Some(_)) => Treatment::Finished,
            ("finished", _, None) => return None,
            (_, Some("cancelled"), _) => Treatment::Cancelled { after },
            (_, _, Some(runtime)) => Treatment::FailedRunning {
                runtime: runtime.max(0),
            },
            (_, _, None) => Treatment::FailedBeforeRunning { after },
        })
    }
}

/// Read the state directory; `sites` are the site names, in the configuration's order, and
/// `local` says which are local clusters (processes on this machine), `monitor` is the
/// server's monitor interval.
pub fn read(
    dir: &Path,
    sites: &[String],
    local: &[bool],
    monitor: Millis,
) -> Result<History, LabError> {
    let results: Vec<ResultRecord> =
        read_lines(&dir.join("logs/result.jsonl")).map_err(LabError::bad)?;
    let samples: Vec<SiteSample> =
        read_lines(&dir.join("logs/surveillance.jsonl")).map_err(LabError::bad)?;
    let journal_path = dir.join("journal.sqlite");
    if !journal_path.exists() {
        return Err(LabError::bad(format!(
            "no journal at {}: run a server with this state directory first",
            journal_path.display()
        )));
    }
    let journal = Journal::open(&journal_path).map_err(|e| LabError::bad(e.to_string()))?;
    // Those a compaction moved out of the journal, then the journal's own.
    let submits = journal
        .submissions()
        .map_err(|e| LabError::bad(e.to_string()))?;
    if submits.is_empty() {
        return Err(LabError::bad(format!(
            "the journal {} holds no submitted job",
            journal_path.display()
        )));
    }
    let by_id: BTreeMap<u64, &ResultRecord> = results.iter().map(|r| (r.job, r)).collect();
    let t0 = submits
        .iter()
        .map(|s| s.0)
        .chain(samples.iter().map(|s| s.time))
        .min()
        .unwrap_or(0);
    let end = results
        .iter()
        .filter_map(|r| r.end)
        .chain(samples.iter().map(|s| s.time))
        .chain(submits.iter().map(|s| s.0))
        .max()
        .unwrap_or(t0)
        - t0;
    let mut workload = Workload::default();
    let mut observed = BTreeMap::new();
    let mut treated = BTreeMap::new();
    let mut scripted = BTreeMap::new();
    let mut aborted_starts = BTreeMap::new();
    let mut comps = Vec::new();
    let mut skipped = 0;
    for (k, (at, text)) in submits.iter().enumerate() {
        let id = k as u64 + 1;
        let Some((r, how)) = by_id.get(&id).and_then(|r| Some((r, Treatment::of(r)?))) else {
            skipped += 1;
            continue;
        };
        if r.submit != *at {
            return Err(LabError::bad(format!(
                "job {id}: the journal says it was submitted at {at}, the result log at {} (a journal and logs of different runs?)",
                r.submit
            )));
        }
        let mut job = coalloc_core::spec::native::from_json(text)
            .map_err(|e| LabError::bad(format!("journal: job {id}: {e}")))?;
        job.submit = Some(at - t0);
        // A job ended from outside runs (if it runs) until then: never past its end.
        let runtime = match how {
            Treatment::Finished | Treatment::FailedRunning { .. } => r.run_ms.unwrap_or(0),
            Treatment::Cancelled { after } | Treatment::FailedBeforeRunning { after } => {
                scripted.insert(workload.jobs.len(), Scripted::CancelAfter(after));
                after + 1
            }
        };
        if let Treatment::FailedRunning { .. } = how {
            scripted.insert(
                workload.jobs.len(),
                Scripted::FailsAtEnd("its program failed (as it did in the history)".into()),
            );
        }
        let aborts: Vec<String> = r
            .aborts
            .iter()
            .filter(|a| a.class == "before_commit")
            .map(|a| failure_reason(&a.reason).to_owned())
            .collect();
        if !aborts.is_empty() {
            aborted_starts.insert(workload.jobs.len(), aborts);
        }
        if let (Treatment::Finished, Some(placed), Some(release), Some(end)) =
            (how, r.placed, r.barrier_release, r.end)
        {
            if job.flexible().is_none() && job.components.len() == r.sites.len() {
                for (k, (c, site)) in job.components.iter().zip(&r.sites).enumerate() {
                    let Some(site) = sites.iter().position(|s| s == site) else {
                        continue;
                    };
                    comps.push(Comp {
                        job: workload.jobs.len(),
                        component: k,
                        site,
                        count: c.count,
                        placed: placed - t0,
                        release: release - t0,
                        end: end - t0,
                    });
                }
            }
        }
        workload.jobs.push(SimJob {
            tag: id as i64,
            job,
            runtime,
        });
        observed.insert(id, (*r).clone());
        treated.insert(id, how);
    }
    let index: BTreeMap<&str, usize> = sites
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i))
        .collect();
    let mut per_site: BTreeMap<usize, Vec<&SiteSample>> = BTreeMap::new();
    for s in &samples {
        let i = *index.get(s.site.as_str()).ok_or_else(|| {
            LabError::bad(format!(
                "the surveillance log names site `{}`, which the configuration lacks (give the server's own with --config)",
                s.site
            ))
        })?;
        per_site.entry(i).or_default().push(s);
    }
    workload.local = vec![Vec::new(); sites.len()];
    let mut outages = Vec::new();
    for (i, ss) in &mut per_site {
        ss.sort_by_key(|s| s.time);
        workload.local[*i] = background(ss, t0, end);
        outages.extend(down_windows(*i, ss, t0, end));
    }
    let site_latency = site_latencies(observed.values(), sites, local);
    let ends = component_ends(&comps, &per_site, t0, 2 * monitor.max(1) + 100);
    let mut component_runtimes: BTreeMap<usize, Vec<Millis>> = BTreeMap::new();
    for (c, e) in comps.iter().zip(&ends) {
        if e.is_some() {
            let n = comps.iter().filter(|o| o.job == c.job).count();
            component_runtimes
                .entry(c.job)
                .or_insert_with(|| vec![c.end - c.release; n])[c.component] =
                e.unwrap_or(c.end) - c.release;
        }
    }
    Ok(History {
        workload,
        outages,
        observed,
        treated,
        scripted,
        samples,
        t0,
        end,
        site_latency,
        aborted_starts,
        component_runtimes,
        skipped,
    })
}

/// The median of a list (the upper one of an even count); `None` when it is empty.
fn median(mut v: Vec<Millis>) -> Option<Millis> {
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

/// Each site's start latency: zero for a local site; else the median of placement to
/// barrier release over the finished jobs that ran there, or over every finished job that
/// ran on a site that is not local when none ran there, or zero when none did.
fn site_latencies<'a>(
    records: impl Iterator<Item = &'a ResultRecord> + Clone,
    sites: &[String],
    local: &[bool],
) -> Vec<Millis> {
    let latency = |r: &ResultRecord| {
        (r.outcome == "finished")
            .then(|| Some(r.barrier_release? - r.placed?))
            .flatten()
            .filter(|d| *d >= 0)
    };
    let is_local = |name: &str| {
        sites
            .iter()
            .position(|s| s == name)
            .is_some_and(|i| local.get(i).copied().unwrap_or(false))
    };
    let remote = median(
        records
            .clone()
            .filter(|r| r.sites.iter().any(|s| !is_local(s)))
            .filter_map(latency)
            .collect(),
    );
    sites
        .iter()
        .enumerate()
        .map(|(i, name)| {
            if local.get(i).copied().unwrap_or(false) {
                return 0;
            }
            median(
                records
                    .clone()
                    .filter(|r| r.sites.iter().any(|s| s == name))
                    .filter_map(latency)
                    .collect(),
            )
            .or(remote)
            .unwrap_or(0)
        })
        .collect()
}

/// The failure an aborted start's logged reason tells, without what the core added around
/// it (`component N on site `S`: ` before, `; tried again in T` after), so that the replay's
/// abort reads as the history's.
pub fn failure_reason(logged: &str) -> &str {
    let s = logged.split("; tried again in ").next().unwrap_or(logged);
    match s
        .strip_prefix("component ")
        .and_then(|t| t.split_once("`: "))
    {
        Some((_, rest)) => rest,
        None => s,
    }
}

/// A site's other users' load as local jobs: the readings' busy-by-others level, piecewise
/// constant, cut into layers. A rise of the level starts a local job of the rise's size; a
/// fall ends the most recent ones (last in, first out, splitting one if needed); whatever is
/// left runs to the end of the logs.
pub fn background(samples: &[&SiteSample], t0: i64, end: Time) -> Vec<Local> {
    let mut stack: Vec<(Time, u32)> = Vec::new();
    let mut level = 0u32;
    let mut out = Vec::new();
    let mut cut = |stack: &mut Vec<(Time, u32)>, level: &mut u32, want: u32, t: Time| {
        while *level > want {
            let Some(top) = stack.last_mut() else { break };
            let n = top.1.min(*level - want);
            if t > top.0 {
                out.push(Local {
                    submit: top.0,
                    size: n,
                    runtime: t - top.0,
                });
            }
            top.1 -= n;
            *level -= n;
            if top.1 == 0 {
                stack.pop();
            }
        }
    };
    for s in samples {
        let (t, want) = (s.time - t0, busy(s).1);
        if want > level {
            stack.push((t, want - level));
            level = want;
        } else {
            cut(&mut stack, &mut level, want, t);
        }
    }
    cut(&mut stack, &mut level, 0, end);
    out.sort_by_key(|l| l.submit);
    out
}

/// The windows in which a site's readings said it was not healthy.
fn down_windows(site: usize, samples: &[&SiteSample], t0: i64, end: Time) -> Vec<Outage> {
    let mut out = Vec::new();
    let mut from = None;
    for s in samples {
        match (s.healthy, from) {
            (false, None) => from = Some(s.time - t0),
            (true, Some(f)) => {
                out.push(Outage {
                    site,
                    from: f,
                    to: s.time - t0,
                });
                from = None;
            }
            _ => {}
        }
    }
    if let Some(f) = from {
        out.push(Outage {
            site,
            from: f,
            to: end,
        });
    }
    out
}

/// The share of site `site`'s processors coalloc held over `[0, end]` by its readings (each
/// held until the next).
pub fn observed_utilization(samples: &[SiteSample], site: &str, t0: i64, end: Time) -> f64 {
    let mut ss: Vec<&SiteSample> = samples.iter().filter(|s| s.site == site).collect();
    ss.sort_by_key(|s| s.time);
    let (mut used, mut total) = (0f64, 0f64);
    for (k, s) in ss.iter().enumerate() {
        let from = s.time - t0;
        let to = ss.get(k + 1).map_or(end, |n| n.time - t0).max(from);
        used += f64::from(busy(s).0) * (to - from) as f64;
        total = f64::from(s.total);
    }
    if total == 0.0 || end <= 0 {
        0.0
    } else {
        used / (total * end as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(time: i64, other: u32, healthy: bool) -> SiteSample {
        SiteSample {
            time,
            site: "alpha".into(),
            total: 8,
            idle: 8 - other,
            coalloc: 0,
            other,
            healthy,
        }
    }

    fn record(outcome: &str, reason: Option<&str>, run_ms: Option<i64>) -> ResultRecord {
        serde_json::from_value(serde_json::json!({
            "job": 1, "outcome": outcome, "reason": reason, "components": 1,
            "processors": 4, "submit": 1000, "end": 4500, "response_ms": 3500,
            "run_ms": run_ms, "sites": [], "placement_tries": 1, "placement_failures": 0,
            "submit_failures": 0, "completion_failures": 0,
        }))
        .unwrap()
    }

    #[test]
    fn each_ended_job_has_its_treatment() {
        let of = |o, r, u| Treatment::of(&record(o, r, u));
        assert_eq!(of("finished", None, Some(2000)), Some(Treatment::Finished));
        assert_eq!(of("finished", None, None), None);
        assert_eq!(
            of("failed", Some("cancelled"), Some(500)),
            Some(Treatment::Cancelled { after: 3500 })
        );
        assert_eq!(
            of("failed", Some("component 0: exit code 3"), Some(2000)),
            Some(Treatment::FailedRunning { runtime: 2000 })
        );
        assert_eq!(
            of("failed", Some("limit of 3 aborted starts reached"), None),
            Some(Treatment::FailedBeforeRunning { after: 3500 })
        );
    }

    #[test]
    fn the_other_users_level_becomes_layered_local_jobs() {
        let ss = [
            s(100, 3, true),
            s(200, 5, true),
            s(300, 1, true),
            s(400, 0, true),
        ];
        let refs: Vec<&SiteSample> = ss.iter().collect();
        let l = background(&refs, 100, 1000);
        let l: Vec<(Time, u32, Millis)> = l.iter().map(|l| (l.submit, l.size, l.runtime)).collect();
        // 3 from 0; 2 more from 100; at 200 the level falls to 1: the 2 end, 2 of the 3 end.
        assert_eq!(l, vec![(0, 2, 200), (0, 1, 300), (100, 2, 100)]);
    }

    #[test]
    fn observed_utilization_holds_each_reading_until_the_next() {
        let mut a = s(0, 0, true);
        a.coalloc = 4;
        a.idle = 4;
        let mut b = s(50, 0, true);
        b.idle = 8;
        // 4 of 8 processors for 50 of 100 ms.
        assert_eq!(observed_utilization(&[a, b], "alpha", 0, 100), 0.25);
        assert_eq!(observed_utilization(&[], "alpha", 0, 100), 0.0);
    }

    #[test]
    fn an_aborted_starts_reason_loses_what_the_core_added_around_it() {
        assert_eq!(
            failure_reason(
                "component 0 on site `beta`: process 0 exited with 1; tried again in 10s"
            ),
            "process 0 exited with 1"
        );
        assert_eq!(
            failure_reason("every component failed"),
            "every component failed"
        );
    }

    #[test]
    fn local_sites_start_at_once_and_others_take_their_observed_median() {
        let mut a = record("finished", None, Some(1000));
        a.sites = vec!["slurm".into()];
        a.placed = Some(1000);
        a.barrier_release = Some(4000);
        let mut b = a.clone();
        b.barrier_release = Some(2000);
        let mut c = a.clone();
        c.barrier_release = Some(9000);
        let names = ["local".to_owned(), "slurm".to_owned(), "grid".to_owned()];
        // The median of 3000, 1000, 8000 on slurm; grid saw none: the remote sites' median.
        assert_eq!(
            site_latencies([&a, &b, &c].into_iter(), &names, &[true, false, false]),
            vec![0, 3000, 3000]
        );
    }

    #[test]
    fn unhealthy_readings_are_outages() {
        let ss = [
            s(0, 0, true),
            s(10, 0, false),
            s(20, 0, false),
            s(30, 0, true),
            s(40, 0, false),
        ];
        let refs: Vec<&SiteSample> = ss.iter().collect();
        let o = down_windows(2, &refs, 0, 50);
        assert_eq!(
            o,
            vec![
                Outage {
                    site: 2,
                    from: 10,
                    to: 30
                },
                Outage {
                    site: 2,
                    from: 40,
                    to: 50
                }
            ]
        );
    }
}
