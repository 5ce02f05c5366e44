//! A report of a server's logs (`coalloc report`, which prints it): pictures and a summary (seed 003 appendix A.5):
//! utilization over time, the load of every site (busy by coalloc, busy by other users,
//! idle), KOALA's figures (seed 000 §5: each job's placement time and start delay, the
//! share of co-allocated jobs), and the jobs' wait, run and response times from the result
//! log. Each plot's data is written beside it as CSV (`series,x,y`).
//!
//! A short run still gives plots with a span: each site's last reading is held until the
//! end of the logs (the last sample or the last job's end), and a run with fewer readings
//! than that is said to be too short instead of drawn as a single dot.

use crate::plot::{line_chart, write_data, Chart, Series};
use crate::LabError;
use coalloc_server::logs::{read_lines, ResultRecord, SiteSample};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn mean(v: &[i64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<i64>() as f64 / v.len() as f64 / 1000.0)
}

fn pct(a: u64, t: u64) -> f64 {
    if t == 0 {
        0.0
    } else {
        100.0 * a as f64 / t as f64
    }
}

/// Draw one chart and write its data; the files written.
pub fn draw(
    out: &Path,
    stem: &str,
    chart: Chart,
    series: &[Series],
) -> Result<Vec<PathBuf>, LabError> {
    let stem = out.join(stem);
    let mut files = line_chart(&stem, &chart, series).map_err(LabError::Internal)?;
    files.push(write_data(&stem, series).map_err(LabError::Internal)?);
    Ok(files)
}

pub fn chart(title: String, x: &str, y: &str) -> Chart {
    Chart {
        title,
        x_label: x.into(),
        y_label: y.into(),
        ..Chart::default()
    }
}

/// What a reading says is busy, as (coalloc's, other users'): coalloc's launches that wait in
/// a site's own queue hold no processors, so the busy processors of the reading (total -
/// idle) bound both, other users' first.
pub fn busy(s: &SiteSample) -> (u32, u32) {
    let busy = s.total.saturating_sub(s.idle);
    let other = s.other.min(busy);
    (s.coalloc.min(busy - other), other)
}

/// The load plots: all sites' utilization, each site's load, and one chart per site.
fn load_plots(out: &Path, samples: &[SiteSample], end: i64) -> Result<Vec<PathBuf>, LabError> {
    let t0 = samples.iter().map(|s| s.time).min().unwrap_or(0);
    let x = |t: i64| (t - t0) as f64 / 1000.0;
    let mut by_site: BTreeMap<&str, Vec<SiteSample>> = BTreeMap::new();
    for s in samples {
        by_site.entry(&s.site).or_default().push(s.clone());
    }
    // Hold each site's last reading until the end of the logs.
    for ss in by_site.values_mut() {
        if let Some(last) = ss.last().filter(|l| l.time < end).cloned() {
            ss.push(SiteSample { time: end, ..last });
        }
    }
    // Utilization of all sites: at each instant, every site's latest reading.
    let times: BTreeSet<i64> = by_site.values().flatten().map(|s| s.time).collect();
    let mut util = (Vec::new(), Vec::new());
    let mut at = vec![0usize; by_site.len()];
    for t in &times {
        let (mut c, mut o, mut total) = (0u64, 0u64, 0u64);
        for (k, ss) in by_site.values().enumerate() {
            while ss.get(at[k] + 1).is_some_and(|s| s.time <= *t) {
                at[k] += 1;
            }
            let s = &ss[at[k]];
            if s.time <= *t {
                let (sc, so) = busy(s);
                c += u64::from(sc);
                o += u64::from(so);
                total += u64::from(s.total);
            }
        }
        util.0.push((x(*t), pct(c, total)));
        util.1.push((x(*t), pct(c + o, total)));
    }
    let mut files = draw(
        out,
        "utilization",
        chart(
            "Utilization of all sites".into(),
            "time (s)",
            "busy processors (%)",
        ),
        &[
            Series {
                name: "coalloc".into(),
                points: util.0,
            },
            Series {
                name: "coalloc + other users".into(),
                points: util.1,
            },
        ],
    )?;
    let series: Vec<Series> = by_site
        .iter()
        .map(|(name, ss)| Series {
            name: name.to_string(),
            points: ss
                .iter()
                .map(|s| {
                    let (c, o) = busy(s);
                    (x(s.time), pct(u64::from(c + o), u64::from(s.total)))
                })
                .collect(),
        })
        .collect();
    let c = chart("Load per site".into(), "time (s)", "busy processors (%)");
    files.extend(draw(out, "site-load", c, &series)?);
    for (name, ss) in &by_site {
        let line = |label: &str, f: &dyn Fn(&SiteSample) -> u32| Series {
            name: label.into(),
            points: ss.iter().map(|s| (x(s.time), f64::from(f(s)))).collect(),
        };
        let series = [
            line("coalloc", &|s| busy(s).0),
            line("other users", &|s| busy(s).1),
            line("idle", &|s| s.idle),
        ];
        let c = chart(format!("Site {name}"), "time (s)", "processors");
        files.extend(draw(out, &format!("site-{name}"), c, &series)?);
    }
    Ok(files)
}

/// KOALA's figure (seed 000 figure 5): each job's placement time and start delay, in the
/// order the jobs arrived.
fn koala_plot(out: &Path, results: &[ResultRecord]) -> Result<Vec<PathBuf>, LabError> {
    let mut jobs: Vec<&ResultRecord> = results.iter().filter(|r| r.placed.is_some()).collect();
    jobs.sort_by_key(|r| (r.submit, r.job));
    let points = |f: &dyn Fn(&ResultRecord) -> Option<i64>| -> Vec<(f64, f64)> {
        jobs.iter()
            .filter_map(|r| Some((r.job as f64, f(r)? as f64 / 1000.0)))
            .collect()
    };
    let series = [
        Series {
            name: "placement time".into(),
            points: points(&|r| r.placement_ms),
        },
        Series {
            name: "start delay".into(),
            points: points(&|r| r.start_delay_ms),
        },
    ];
    let c = chart("Placement times and start delays".into(), "job", "seconds");
    draw(out, "placement-times", c, &series)
}

/// Read the logs in the state directory `dir`, draw the plots into `out` (default
/// `STATE_DIR/report`) and return the summary as JSON (its notes and the plots written
/// among its fields).
pub fn report(dir: &Path, out: Option<PathBuf>) -> Result<serde_json::Value, LabError> {
    let results: Vec<ResultRecord> =
        read_lines(&dir.join("logs/result.jsonl")).map_err(LabError::bad)?;
    let samples: Vec<SiteSample> =
        read_lines(&dir.join("logs/surveillance.jsonl")).map_err(LabError::bad)?;
    if results.is_empty() && samples.is_empty() {
        return Err(LabError::bad(format!(
            "no logs in {}: run a server with this state directory first",
            dir.join("logs").display()
        )));
    }
    let out = out.unwrap_or_else(|| dir.join("report"));
    std::fs::create_dir_all(&out).map_err(|e| LabError::bad(format!("{}: {e}", out.display())))?;
    let end = samples
        .iter()
        .map(|s| s.time)
        .chain(results.iter().filter_map(|r| r.end))
        .max()
        .unwrap_or(0);
    let start = samples.iter().map(|s| s.time).min().unwrap_or(end);
    let mut notes = Vec::new();
    let mut files = Vec::new();
    if end > start {
        files.extend(load_plots(&out, &samples, end)?);
    } else {
        notes.push("the run was too short for load plots (one reading of the sites)".to_string());
    }
    if results.iter().any(|r| r.placed.is_some()) {
        files.extend(koala_plot(&out, &results)?);
    }
    let finished: Vec<&ResultRecord> = results.iter().filter(|r| r.outcome == "finished").collect();
    let col = |f: &dyn Fn(&ResultRecord) -> Option<i64>| -> Vec<i64> {
        finished.iter().filter_map(|r| f(r)).collect()
    };
    let coallocated = finished
        .iter()
        .filter(|r| r.sites.iter().collect::<BTreeSet<_>>().len() > 1)
        .count();
    let aborts: usize = results.iter().map(|r| r.aborts.len()).sum();
    let survived = finished.iter().filter(|r| !r.aborts.is_empty()).count();
    let summary = json!({
        "jobs": results.len(),
        "finished": finished.len(),
        "failed": results.len() - finished.len(),
        "coallocated": coallocated,
        "coallocated_share": (!finished.is_empty()).then(|| coallocated as f64 / finished.len() as f64),
        "mean_placement_s": mean(&col(&|r| r.placement_ms)),
        "mean_start_delay_s": mean(&col(&|r| r.start_delay_ms)),
        "mean_wait_s": mean(&col(&|r| r.wait_ms)),
        "mean_run_s": mean(&col(&|r| r.run_ms)),
        "mean_response_s": mean(&col(&|r| r.response_ms)),
        "aborts": aborts,
        "finished_after_aborts": survived,
        "site_samples": samples.len(),
        "duration_s": (end - start) as f64 / 1000.0,
        "notes": notes,
        "plots": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
    });
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(total: u32, idle: u32, coalloc: u32, other: u32) -> SiteSample {
        SiteSample {
            time: 0,
            site: "alpha".into(),
            total,
            idle,
            coalloc,
            other,
            healthy: true,
        }
    }

    #[test]
    fn launches_waiting_in_a_sites_queue_are_not_counted_busy() {
        // 15 of coalloc's processors launched, 4 held by others, none idle: 12 of coalloc's
        // run, 3 wait in the site's queue (seen in the demo as 119 % busy).
        assert_eq!(busy(&sample(16, 0, 15, 4)), (12, 4));
        assert_eq!(busy(&sample(16, 6, 8, 2)), (8, 2));
        assert_eq!(busy(&sample(16, 16, 0, 0)), (0, 0));
        assert_eq!(busy(&sample(4, 0, 0, 9)), (0, 4));
    }
}
