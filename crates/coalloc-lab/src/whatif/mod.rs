//! A what-if replay: the server's own history replayed on the simulation engine under another
//! scheduler configuration (issue 22 item 4; DESIGN.md's "how would last week have gone under
//! TAGS-sets?"), compared with what happened: wait, response, slowdown, placement tries,
//! coalloc's utilization of each site, per job and in the mean, with plots of both
//! (`coalloc whatif`, which prints the comparison).
//!
//! What is replayed and what is approximated is in [`input`] (each component's own end in
//! [`ends`]); how the configuration is made, in [`config`]. With the server's own configuration the replay reproduces what
//! happened within [`TOLERANCE_MS`] plus [`TOLERANCE_SHARE`] of each job's observed response,
//! a job that waited at its site after placement included (its observed start-up replayed).

pub mod config;
pub mod ends;
pub mod input;

use crate::plot::Series;
use crate::report::{chart, draw};
use crate::LabError;
use coalloc_core::model::Millis;
use coalloc_core::SpecError;
use coalloc_sim::engine::{simulate, Failures, JobFate, Outcome, SimParams};
use config::{load, Overrides};
use input::{observed_utilization, read, History, Treatment};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The reproduction check's tolerance: a replayed wait or response may differ from the
/// observed one by this much ...
pub const TOLERANCE_MS: i64 = 1_000;
/// ... plus this share of the observed response.
pub const TOLERANCE_SHARE: f64 = 0.1;

/// One side's per-job figures, in seconds.
#[derive(Clone, Copy, Default)]
struct Fig {
    wait: Option<f64>,
    response: Option<f64>,
    slowdown: Option<f64>,
    tries: u32,
}

fn fig(wait: Option<i64>, response: Option<i64>, run: Option<i64>, tries: u32) -> Fig {
    let s = |ms: i64| ms as f64 / 1000.0;
    Fig {
        wait: wait.map(s),
        response: response.map(s),
        slowdown: response.zip(run).map(|(r, u)| s(r) / s(u).max(0.001)),
        tries,
    }
}

fn mean(v: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = v.flatten().collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The replay reproduced a job: its wait and response within the tolerance (a job that never
/// started must not have started in the replay either), and its fate the same.
fn within(obs: Fig, sim: Fig, how: Treatment, fate: &JobFate) -> bool {
    let tol = TOLERANCE_MS as f64 / 1000.0 + TOLERANCE_SHARE * obs.response.unwrap_or(0.0);
    let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= tol,
        (None, None) => !matches!(how, Treatment::Finished),
        _ => false,
    };
    let same_fate = match (how, fate) {
        (Treatment::Finished, JobFate::Finished) => true,
        (Treatment::Finished, _) | (_, JobFate::Finished) => false,
        (
            Treatment::FailedRunning { .. } | Treatment::FailedBeforeRunning { .. },
            JobFate::Failed(_),
        ) => true,
        (_, JobFate::Failed(m)) => m == "cancelled",
        _ => false,
    };
    same_fate && close(obs.wait, sim.wait) && close(obs.response, sim.response)
}

/// The configuration a replay of the state directory `dir` runs under when `--config` gives
/// none: the one the server last ran with (every server keeps it as
/// `STATE_DIR/served-config.toml`), else none (the embedded default).
pub fn config_path(dir: &Path, config: Option<PathBuf>) -> Option<PathBuf> {
    let served = dir.join("served-config.toml");
    config.or_else(|| served.exists().then_some(served))
}

/// Replay the history in the state directory `dir` under the configuration at
/// `config_path` (else the embedded default) with the overrides set, draw the plots into
/// `out`, and return the comparison as JSON (summary, sites, every job, the plots);
/// `locate` places a configuration's errors ([`config::load`]).
pub fn replay(
    dir: &Path,
    config_path: Option<&Path>,
    overrides: &Overrides,
    out: &Path,
    locate: &dyn Fn(&Path, &SpecError) -> String,
) -> Result<serde_json::Value, LabError> {
    let config = load(config_path, overrides, locate)?;
    let sched = config.scheduler.clone();
    let names: Vec<String> = config.sites.iter().map(|s| s.name.clone()).collect();
    let local: Vec<bool> = (0..names.len())
        .map(|i| {
            matches!(
                config.backends.get(i),
                Some(coalloc_server::config::BackendKind::Local { .. })
            )
        })
        .collect();
    let h = read(dir, &names, &local, config.monitor_interval)?;
    let params = SimParams {
        site_start_latency: h.site_latency.iter().copied().enumerate().collect(),
        job_start_latency: late_start_ups(&h, &names),
        aborted_starts: h.aborted_starts.clone(),
        component_runtimes: h.component_runtimes.clone(),
        monitor_interval: Some(config.monitor_interval),
        failures: Failures {
            outages: h.outages.clone(),
            ..Failures::default()
        },
        window_end: Some(h.end.max(1)),
        scripted: h.scripted.clone(),
        ..SimParams::default()
    };
    let outcome = simulate(config.sites.clone(), sched, &h.workload, &params)
        .map_err(|e| LabError::bad(format!("the replay cannot run: {e}")))?;
    std::fs::create_dir_all(out).map_err(|e| LabError::bad(format!("{}: {e}", out.display())))?;
    compare(&h, &outcome, &names, out)
}

/// Slack on a job's observed start-up beyond its sites' start latency before it counts as
/// having waited at a site (`started_late`).
pub const START_SLACK_MS: i64 = 1_000;

/// The history's run of this job started late at a site: from its placement to its barrier
/// release took more than its sites' start latency plus [`START_SLACK_MS`], i.e. one of its
/// components waited at its site for processors the server had counted as free (another
/// user's load took them first, or the monitor's reading lagged behind a finish). The
/// replay's sites hold what the readings said, so they cannot make that wait: the replay
/// gives such a job its observed start-up instead ([`late_start_ups`]).
fn started_late(h: &History, r: &coalloc_server::logs::ResultRecord, names: &[String]) -> bool {
    let Some(startup) = start_up(r) else {
        return false;
    };
    let latency = r
        .sites
        .iter()
        .filter_map(|s| names.iter().position(|n| n == s))
        .filter_map(|i| h.site_latency.get(i).copied())
        .max()
        .unwrap_or(0);
    startup > latency + START_SLACK_MS
}

/// A run's start-up in the history: placement to barrier release.
fn start_up(r: &coalloc_server::logs::ResultRecord) -> Option<Millis> {
    r.barrier_release.zip(r.placed).map(|(b, p)| b - p)
}

/// The observed start-up of every job that [`started_late`], by index in the workload's
/// jobs: the engine's start of its run takes that long (`SimParams::job_start_latency`).
fn late_start_ups(h: &History, names: &[String]) -> BTreeMap<usize, Millis> {
    h.workload
        .jobs
        .iter()
        .enumerate()
        .filter_map(|(i, j)| {
            let r = h.observed.get(&(j.tag as u64))?;
            started_late(h, r, names).then_some((i, start_up(r)?))
        })
        .collect()
}

/// The side-by-side comparison as JSON, and its plots.
fn compare(
    h: &History,
    o: &Outcome,
    names: &[String],
    out: &Path,
) -> Result<serde_json::Value, LabError> {
    let mut jobs = Vec::new();
    let (mut obs_all, mut sim_all) = (Vec::new(), Vec::new());
    let mut reproduced = 0;
    let (mut late_at_site, mut reproduced_on_time) = (0, 0);
    let mut counts = BTreeMap::new();
    for name in [
        "finished",
        "cancelled",
        "failed running",
        "failed before running",
    ] {
        counts.insert(name, 0usize);
    }
    for j in &o.jobs {
        let id = j.tag as u64;
        let (Some(r), Some(&how)) = (h.observed.get(&id), h.treated.get(&id)) else {
            continue;
        };
        let obs = fig(r.wait_ms, r.response_ms, r.run_ms, r.placement_tries);
        let sim = j.record.as_ref().map_or(Fig::default(), |rec| {
            fig(
                rec.wait(),
                rec.response(),
                rec.runtime(),
                rec.placement_tries,
            )
        });
        let ok = within(obs, sim, how, &j.fate);
        reproduced += usize::from(ok);
        let late = started_late(h, r, names);
        late_at_site += usize::from(late);
        reproduced_on_time += usize::from(ok && !late);
        let fate = match &j.fate {
            JobFate::Finished => "finished".to_string(),
            JobFate::Failed(m) => format!("failed: {m}"),
            JobFate::Refused(m) => format!("refused: {m}"),
            JobFate::Unfinished => "unfinished".to_string(),
        };
        let side = |f: &Fig| json!({"wait_s": f.wait, "response_s": f.response, "slowdown": f.slowdown, "placement_tries": f.tries});
        jobs.push(json!({
            "job": id,
            "name": r.name,
            "happened": side(&obs),
            "would_have": side(&sim),
            "history": how.name(),
            "treated": how.how(),
            "replayed_fate": fate,
            "within_tolerance": ok,
            "started_late_at_site": late,
        }));
        *counts.entry(how.name()).or_insert(0usize) += 1;
        // The means and plots compare the jobs that finished in the history.
        if how == Treatment::Finished {
            obs_all.push((id, obs));
            sim_all.push((id, sim));
        }
    }
    let summary = |v: &[(u64, Fig)]| {
        json!({
            "mean_wait_s": mean(v.iter().map(|f| f.1.wait)),
            "mean_response_s": mean(v.iter().map(|f| f.1.response)),
            "mean_slowdown": mean(v.iter().map(|f| f.1.slowdown)),
            "mean_placement_tries": mean(v.iter().map(|f| Some(f64::from(f.1.tries)))),
        })
    };
    let sites: Vec<serde_json::Value> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let u = o.usage.get(i).map_or(0, |u| u.held + u.running) as f64;
            let cap = f64::from(o.processors.get(i).copied().unwrap_or(0)) * o.window_end as f64;
            json!({
                "site": n,
                "happened_utilization": observed_utilization(&h.samples, n, h.t0, h.end),
                "would_have_utilization": if cap > 0.0 { u / cap } else { 0.0 },
            })
        })
        .collect();
    let mut plots = Vec::new();
    let line = |name: &str, v: &[(u64, Fig)], f: &dyn Fn(&Fig) -> Option<f64>| Series {
        name: name.into(),
        points: v
            .iter()
            .filter_map(|(id, x)| Some((*id as f64, f(x)?)))
            .collect(),
    };
    for (stem, title, f) in [
        (
            "wait",
            "Wait per job",
            &(|x: &Fig| x.wait) as &dyn Fn(&Fig) -> Option<f64>,
        ),
        ("response", "Response per job", &|x: &Fig| x.response),
    ] {
        let c = chart(title.into(), "job", "seconds");
        let series = [
            line("happened", &obs_all, f),
            line("would have", &sim_all, f),
        ];
        if series.iter().all(|s| !s.points.is_empty()) {
            plots.extend(draw(out, stem, c, &series)?);
        }
    }
    Ok(json!({
        "jobs_replayed": jobs.len(),
        "replayed_by_history": counts,
        "jobs_not_replayed": h.skipped,
        "start_latency_ms": names
            .iter()
            .zip(&h.site_latency)
            .map(|(n, l)| (n.clone(), json!(l)))
            .collect::<serde_json::Map<_, _>>(),
        "aborted_starts_replayed": h.aborted_starts.values().map(Vec::len).sum::<usize>(),
        "jobs_with_component_run_times": h.component_runtimes.len(),
        "background_local_jobs": h.workload.local.iter().map(Vec::len).sum::<usize>(),
        "outages": h.outages.len(),
        "happened": summary(&obs_all),
        "would_have": summary(&sim_all),
        "sites": sites,
        "tolerance": {"ms": TOLERANCE_MS, "share_of_response": TOLERANCE_SHARE},
        "within_tolerance": reproduced,
        "started_late_at_site": late_at_site,
        "within_tolerance_of_the_others": reproduced_on_time,
        "jobs": jobs,
        "plots": plots.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
    }))
}
