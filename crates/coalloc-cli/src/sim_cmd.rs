//! `coalloc sim EXPERIMENT.toml`: run a parameter study on the simulator and write its CSV
//! tables, per-job logs and plots.
//!
//! Outputs, in the output folder: `runs.csv` (one row per run: grid values, seed, every
//! metric), `summary.csv` (one row per grid point: the mean over its seeds and, when a point
//! has several, `METRIC_sem` columns, the standard error of the mean σ/√n of seed 004 §V-D,
//! also drawn as error bars in the plots), `jobs/RUN.jsonl`
//! (one line per job, when the file asks), `sites/RUN.jsonl` (load samples, when
//! `sim.sample_interval` is set) and `PLOT.svg` / `PLOT.png` for every `[[plot]]`.

use crate::error::CliError;
use crate::plot::{line_chart_with_errors, Chart, Series};
use crate::table;
use coalloc_sim::engine::{JobFate, Outcome};
use coalloc_sim::experiment::spec::{label, PlotDoc};
use coalloc_sim::experiment::{run_all, Experiment, Run, RunResult};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use toml::Value;

#[derive(clap::Args)]
pub struct SimArgs {
    /// The experiment file (TOML: sites, scheduler, workload, sim, grid, plots). See
    /// `experiments/*/` for examples and `coalloc_sim::experiment::spec` for every key.
    experiment: PathBuf,
    /// Output folder (default: the file's `output`, else `results` beside the file).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Worker threads (default: every core).
    #[arg(long, short = 'j')]
    threads: Option<usize>,
    /// Run seeds 1..=N instead of the file's seeds.
    #[arg(long)]
    seeds: Option<u64>,
    /// Check the file and list the runs without simulating.
    #[arg(long)]
    dry_run: bool,
    /// No progress bar.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Print the summary (one object per grid point) as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: SimArgs) -> Result<(), CliError> {
    let path = &args.experiment;
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::bad(format!("{}: cannot read: {e}", path.display())))?;
    let mut exp = Experiment::parse(&text, path).map_err(CliError::bad)?;
    if let Some(n) = args.seeds {
        if n == 0 {
            return Err(CliError::bad("--seeds: give at least 1"));
        }
        exp.doc.seeds = Some(coalloc_sim::experiment::spec::Seeds::Count(n));
    }
    let runs = exp.runs().map_err(CliError::bad)?;
    for plot in &exp.doc.plot {
        check_plot(plot, &exp).map_err(CliError::bad)?;
    }
    if args.dry_run {
        for r in &runs {
            let point: Vec<String> = r
                .point
                .iter()
                .map(|(k, v)| format!("{k}={}", label(v)))
                .collect();
            println!("{}  seed {}  {}", r.name(), r.seed, point.join(" "));
        }
        return Ok(());
    }
    let out = args.out.clone().unwrap_or_else(|| {
        exp.base
            .join(exp.doc.output.as_deref().unwrap_or("results"))
    });
    let jobs_dir = out.join("jobs");
    let sites_dir = out.join("sites");
    std::fs::create_dir_all(&out)
        .map_err(|e| CliError::bad(format!("{}: cannot create: {e}", out.display())))?;
    let mkdir = |d: &Path| {
        std::fs::create_dir_all(d).map_err(|e| CliError::Internal(format!("{}: {e}", d.display())))
    };
    if exp.doc.jobs_jsonl {
        mkdir(&jobs_dir)?;
    }
    let samples = exp.doc.sim.sample_interval.is_some();
    if samples {
        mkdir(&sites_dir)?;
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let bar = if args.quiet || args.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(runs.len() as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} runs, eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let write_errors = std::sync::Mutex::new(Vec::<String>::new());
    let started = std::time::Instant::now();
    let done = |run: &Run, outcome: Option<&Outcome>| {
        if let Some(o) = outcome {
            let mut writes = Vec::new();
            if exp.doc.jobs_jsonl {
                writes.push((
                    jobs_dir.join(format!("{}.jsonl", run.name())),
                    jobs_jsonl(o),
                ));
            }
            if samples {
                writes.push((
                    sites_dir.join(format!("{}.jsonl", run.name())),
                    samples_jsonl(o),
                ));
            }
            for (p, text) in writes {
                if let Err(e) = std::fs::write(&p, text) {
                    let mut w = write_errors.lock().unwrap_or_else(|e| e.into_inner());
                    w.push(format!("{}: {e}", p.display()));
                }
            }
        }
        bar.inc(1);
    };
    let results = run_all(&runs, &exp.base, threads, &done);
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    let errors = write_errors.into_inner().unwrap_or_default();
    if let Some(e) = errors.first() {
        return Err(CliError::Internal(format!("cannot write {e}")));
    }
    let axes: Vec<String> = exp.doc.grid.iter().map(|a| a.column().to_owned()).collect();
    let write = |name: &str, text: String| {
        let p = out.join(name);
        std::fs::write(&p, text).map_err(|e| CliError::Internal(format!("{}: {e}", p.display())))
    };
    write("runs.csv", runs_csv(&axes, &results))?;
    let summary = summarize(&results);
    write("summary.csv", summary_csv(&axes, &summary))?;
    let mut plots = Vec::new();
    for plot in &exp.doc.plot {
        let files = draw_plot(plot, &exp, &summary, &out).map_err(CliError::Internal)?;
        plots.extend(files);
    }
    let failed: Vec<&RunResult> = results.iter().filter(|r| r.metrics.is_err()).collect();
    if args.json {
        let points: Vec<serde_json::Value> = summary
            .iter()
            .map(|p| {
                let mut m = serde_json::Map::new();
                for (k, v) in &p.point {
                    m.insert(k.clone(), serde_json::Value::String(label(v)));
                }
                m.insert("seeds".into(), p.seeds.into());
                for (k, v) in &p.means {
                    m.insert(k.clone(), (*v).into());
                }
                for (k, e) in p.sems.iter().filter(|(_, e)| !e.is_nan()) {
                    m.insert(format!("{k}_sem"), (*e).into());
                }
                serde_json::Value::Object(m)
            })
            .collect();
        println!("{}", serde_json::Value::Array(points));
    } else {
        print!("{}", summary_table(&axes, &summary));
        println!(
            "{} runs ({} failed) on {threads} threads in {:.1} s; wrote {} (runs.csv, summary.csv{}{})",
            results.len(),
            failed.len(),
            elapsed.as_secs_f64(),
            out.display(),
            if exp.doc.jobs_jsonl { ", jobs/" } else { "" },
            if samples { ", sites/" } else { "" },
        );
        for p in &plots {
            println!("plot: {}", p.display());
        }
    }
    match failed.first() {
        Some(r) => Err(CliError::Internal(format!(
            "run {} failed: {}",
            r.run.name(),
            r.metrics.as_ref().err().map_or("", String::as_str)
        ))),
        None => Ok(()),
    }
}

/// One grid point's metrics, averaged over its seeds.
struct Point {
    point: Vec<(String, Value)>,
    seeds: usize,
    means: Vec<(String, f64)>,
    /// The standard error of each mean, σ/√n with σ the sample standard deviation over the
    /// n seeds (seed 004 §V-D); NaN for a single seed.
    sems: Vec<(String, f64)>,
}

/// σ/√n of n values with sum `s` and sum of squares `q`, σ the sample standard deviation;
/// NaN below two values.
fn standard_error(s: f64, q: f64, n: usize) -> f64 {
    if n < 2 {
        return f64::NAN;
    }
    let n = n as f64;
    let var = ((q - s * s / n) / (n - 1.0)).max(0.0);
    (var / n).sqrt()
}

fn summarize(results: &[RunResult]) -> Vec<Point> {
    let mut points: Vec<Point> = Vec::new();
    let mut sums: Vec<BTreeMap<String, (f64, f64, usize)>> = Vec::new();
    let mut order: Vec<Vec<String>> = Vec::new();
    for r in results {
        let Some(cols) = r.columns() else { continue };
        let k = match points.iter().position(|p| p.point == r.run.point) {
            Some(k) => k,
            None => {
                points.push(Point {
                    point: r.run.point.clone(),
                    seeds: 0,
                    means: Vec::new(),
                    sems: Vec::new(),
                });
                sums.push(BTreeMap::new());
                order.push(Vec::new());
                points.len() - 1
            }
        };
        points[k].seeds += 1;
        for (name, v) in cols {
            let Ok(x) = v.parse::<f64>() else { continue };
            if !sums[k].contains_key(&name) {
                order[k].push(name.clone());
            }
            let e = sums[k].entry(name).or_insert((0.0, 0.0, 0));
            e.0 += x;
            e.1 += x * x;
            e.2 += 1;
        }
    }
    for (k, p) in points.iter_mut().enumerate() {
        p.means = order[k]
            .iter()
            .map(|n| {
                let (s, _, c) = sums[k][n];
                (n.clone(), s / c.max(1) as f64)
            })
            .collect();
        p.sems = order[k]
            .iter()
            .map(|n| {
                let (s, q, c) = sums[k][n];
                (n.clone(), standard_error(s, q, c))
            })
            .collect();
    }
    points
}

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn runs_csv(axes: &[String], results: &[RunResult]) -> String {
    let mut out = String::new();
    let metric_names: Vec<String> = results
        .iter()
        .find_map(RunResult::columns)
        .map(|c| c.into_iter().map(|(k, _)| k).collect())
        .unwrap_or_default();
    let mut header = vec!["run".to_owned(), "seed".to_owned()];
    header.extend(axes.iter().cloned());
    header.extend(metric_names.iter().cloned());
    header.push("error".to_owned());
    let _ = writeln!(
        out,
        "{}",
        header
            .iter()
            .map(|h| csv_cell(h))
            .collect::<Vec<_>>()
            .join(",")
    );
    for r in results {
        let mut row = vec![r.run.name(), r.run.seed.to_string()];
        row.extend(r.run.point.iter().map(|(_, v)| label(v)));
        match (r.columns(), &r.metrics) {
            (Some(cols), _) => {
                row.extend(cols.into_iter().map(|(_, v)| v));
                row.push(String::new());
            }
            (None, Err(e)) => {
                row.extend(metric_names.iter().map(|_| String::new()));
                row.push(e.clone());
            }
            (None, Ok(_)) => {}
        }
        let _ = writeln!(
            out,
            "{}",
            row.iter()
                .map(|c| csv_cell(c))
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    out
}

fn summary_csv(axes: &[String], points: &[Point]) -> String {
    let mut out = String::new();
    let names: Vec<&str> = points
        .first()
        .map(|p| p.means.iter().map(|(k, _)| k.as_str()).collect())
        .unwrap_or_default();
    // Standard errors only when some point has several seeds (empty cells for one seed).
    let with_sem = points.iter().any(|p| p.seeds > 1);
    let sem_names: Vec<String> = names.iter().map(|n| format!("{n}_sem")).collect();
    let mut header: Vec<&str> = axes.iter().map(String::as_str).collect();
    header.push("seeds");
    header.extend(&names);
    if with_sem {
        header.extend(sem_names.iter().map(String::as_str));
    }
    let _ = writeln!(
        out,
        "{}",
        header
            .iter()
            .map(|h| csv_cell(h))
            .collect::<Vec<_>>()
            .join(",")
    );
    for p in points {
        let mut row: Vec<String> = p.point.iter().map(|(_, v)| label(v)).collect();
        row.push(p.seeds.to_string());
        row.extend(p.means.iter().map(|(_, v)| format!("{v}")));
        if with_sem {
            row.extend(p.sems.iter().map(|(_, v)| {
                if v.is_nan() {
                    String::new()
                } else {
                    format!("{v}")
                }
            }));
        }
        let _ = writeln!(
            out,
            "{}",
            row.iter()
                .map(|c| csv_cell(c))
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    out
}

fn summary_table(axes: &[String], points: &[Point]) -> String {
    const SHOWN: [&str; 6] = [
        "finished",
        "success_rate",
        "mean_wait",
        "mean_bounded_slowdown",
        "total_load",
        "local_kill_rate",
    ];
    let mut header: Vec<&str> = axes.iter().map(String::as_str).collect();
    header.push("seeds");
    header.extend(SHOWN);
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            let mut row: Vec<String> = p.point.iter().map(|(_, v)| label(v)).collect();
            row.push(p.seeds.to_string());
            for name in SHOWN {
                let v = p
                    .means
                    .iter()
                    .find(|(k, _)| k == name)
                    .map_or(0.0, |(_, v)| *v);
                row.push(format!("{v:.3}"));
            }
            row
        })
        .collect();
    table::render(&header, &rows)
}

fn axis_index(exp: &Experiment, name: &str) -> Option<usize> {
    exp.doc
        .grid
        .iter()
        .position(|a| a.column() == name || a.key == name)
}

fn check_plot(plot: &PlotDoc, exp: &Experiment) -> Result<(), String> {
    let ctx = |m: String| format!("plot \"{}\": {m}", plot.file);
    if axis_index(exp, &plot.x).is_none() {
        return Err(ctx(format!("x = \"{}\" is not a grid axis", plot.x)));
    }
    if let Some(s) = &plot.series {
        if axis_index(exp, s).is_none() {
            return Err(ctx(format!("series = \"{s}\" is not a grid axis")));
        }
    }
    for k in plot.filter.keys() {
        if axis_index(exp, k).is_none() {
            return Err(ctx(format!("where: \"{k}\" is not a grid axis")));
        }
    }
    let known = coalloc_sim::metrics::Metrics::default().columns();
    for y in &plot.y {
        let (subset, metric) = match y.split_once('.') {
            Some((s, m)) => (Some(s), m),
            None => (None, y.as_str()),
        };
        if let Some(s) = subset {
            if !exp.doc.subset.iter().any(|x| x.name == s) {
                return Err(ctx(format!("y: \"{y}\" names no [[subset]] \"{s}\"")));
            }
        }
        if !known.iter().any(|(k, _)| k == metric) {
            let names: Vec<&str> = known.iter().map(|(k, _)| k.as_str()).collect();
            return Err(ctx(format!(
                "y: no metric \"{y}\"; metrics: {}",
                names.join(", ")
            )));
        }
    }
    if plot.y.is_empty() {
        return Err(ctx("y: name at least one metric".into()));
    }
    if let Some(l) = &plot.legend {
        if !crate::plot::LEGENDS.contains(&l.as_str()) {
            return Err(ctx(format!(
                "legend: \"{l}\" is not one of {}",
                crate::plot::LEGENDS.join(", ")
            )));
        }
    }
    if plot.file.contains(['/', '\\']) || plot.file.is_empty() {
        return Err(ctx("file: a plain file name without folders".into()));
    }
    Ok(())
}

/// One point of a plotted series: x, the mean over seeds, its standard error (0 if none).
type PlotPoint = (f64, f64, f64);

fn draw_plot(
    plot: &PlotDoc,
    exp: &Experiment,
    points: &[Point],
    out: &Path,
) -> Result<Vec<PathBuf>, String> {
    let xi = axis_index(exp, &plot.x).unwrap_or(0);
    let si = plot.series.as_ref().and_then(|s| axis_index(exp, s));
    let scale = plot.scale.unwrap_or(1.0);
    let keep = |p: &Point| {
        plot.filter.iter().all(|(k, want)| {
            axis_index(exp, k).is_some_and(|i| label(&p.point[i].1) == label(want))
        })
    };
    // Per series: its name and (x, mean, standard error) of each point, sorted by x below.
    let mut series: Vec<(String, Vec<PlotPoint>)> = Vec::new();
    for y in &plot.y {
        for p in points.iter().filter(|p| keep(p)) {
            let x_value = &p.point[xi].1;
            // A value that is not a number (a policy name) is plotted at its position.
            let axis = &exp.doc.grid[xi];
            let x = label(x_value).parse::<f64>().unwrap_or_else(|_| {
                (0..axis.values.len())
                    .position(|i| axis.label(i) == label(x_value))
                    .unwrap_or(0) as f64
            });
            let Some(v) = p.means.iter().find(|(k, _)| k == y).map(|(_, v)| *v) else {
                continue;
            };
            let sem = p.sems.iter().find(|(k, _)| k == y).map_or(0.0, |(_, e)| *e);
            let sem = if sem.is_nan() { 0.0 } else { sem * scale };
            let mut name = if plot.y.len() > 1 {
                y.clone()
            } else {
                String::new()
            };
            if let Some(si) = si {
                let s = format!("{} = {}", exp.doc.grid[si].column(), label(&p.point[si].1));
                name = if name.is_empty() {
                    s
                } else {
                    format!("{name}, {s}")
                };
            }
            match series.iter_mut().find(|s| s.0 == name) {
                Some(s) => s.1.push((x, v * scale, sem)),
                None => series.push((name, vec![(x, v * scale, sem)])),
            }
        }
    }
    let mut errors = Vec::new();
    let series: Vec<Series> = series
        .into_iter()
        .map(|(name, mut pts)| {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            errors.push(pts.iter().map(|p| p.2).collect());
            Series {
                name,
                points: pts.iter().map(|p| (p.0, p.1)).collect(),
            }
        })
        .collect();
    let chart = Chart {
        title: plot.title.clone().unwrap_or_else(|| plot.file.clone()),
        x_label: plot.x_label.clone().unwrap_or_else(|| plot.x.clone()),
        y_label: plot.y_label.clone().unwrap_or_else(|| plot.y.join(", ")),
        log_x: plot.log_x,
        log_y: plot.log_y,
        x_categories: categories(&exp.doc.grid[xi]),
        legend: plot.legend.clone(),
    };
    line_chart_with_errors(&out.join(&plot.file), &chart, &series, &errors)
}

/// The labels of an axis whose values are not all numbers (those are plotted at their
/// positions 0, 1, 2, …, and the ticks name them); none for a numeric axis.
fn categories(axis: &coalloc_sim::experiment::spec::Axis) -> Vec<String> {
    let labels: Vec<String> = (0..axis.values.len()).map(|i| axis.label(i)).collect();
    if labels.iter().all(|l| l.parse::<f64>().is_ok()) {
        Vec::new()
    } else {
        labels
    }
}

/// One JSON line per job: its fate, its size and shape, and every time of its record.
fn jobs_jsonl(o: &Outcome) -> String {
    let mut out = String::new();
    for j in &o.jobs {
        let r = j.record.as_ref();
        let secs = |t: Option<i64>| t.map(|t| t as f64 / 1000.0);
        let fate = match &j.fate {
            JobFate::Finished => ("finished", None),
            JobFate::Failed(w) => ("failed", Some(w.as_str())),
            JobFate::Refused(w) => ("refused", Some(w.as_str())),
            JobFate::Unfinished => ("unfinished", None),
        };
        let line = serde_json::json!({
            "job": j.tag,
            "fate": fate.0,
            "reason": fate.1,
            "submit": j.submit as f64 / 1000.0,
            "deadline": secs(j.deadline),
            "components": j.components,
            "size": j.size,
            "priority": format!("{:?}", j.priority).to_lowercase(),
            "runtime": j.runtime as f64 / 1000.0,
            "placed": secs(r.and_then(|r| r.placed())),
            "start": secs(r.and_then(|r| r.start())),
            "end": secs(r.and_then(|r| r.end())),
            "start_delay": secs(r.and_then(|r| r.start_delay())),
            "placement_tries": r.map(|r| r.placement_tries),
            "claim_tries": r.map(|r| r.claim_tries),
            "submit_failures": r.map(|r| r.submit_failures),
            "completion_failures": r.map(|r| r.completion_failures),
            "preemptions": r.map(|r| r.preemptions),
            "sites": r.map(|r| r.sites().to_vec()),
        });
        let _ = writeln!(out, "{line}");
    }
    out
}

fn samples_jsonl(o: &Outcome) -> String {
    let mut out = String::new();
    for s in &o.samples {
        if let Ok(line) = serde_json::to_string(s) {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}
