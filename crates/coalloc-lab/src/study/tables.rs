//! A study's tables and plots: the mean of every grid point over its seeds, the rows of
//! `runs.csv` and `summary.csv`, and the `[[plot]]` charts.

use super::Row;
use crate::plot::{line_chart_with_errors, Chart, Series};
use coalloc_sim::experiment::spec::{label, PlotDoc};
use coalloc_sim::experiment::Experiment;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use toml::Value;

/// One grid point's metrics, averaged over its seeds.
pub struct Point {
    pub point: Vec<(String, Value)>,
    pub seeds: usize,
    pub means: Vec<(String, f64)>,
    /// The standard error of each mean, σ/√n with σ the sample standard deviation over the
    /// n seeds (seed 004 §V-D); NaN for a single seed.
    pub sems: Vec<(String, f64)>,
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

pub fn summarize(results: &[Row]) -> Vec<Point> {
    let mut points: Vec<Point> = Vec::new();
    let mut sums: Vec<BTreeMap<String, (f64, f64, usize)>> = Vec::new();
    let mut order: Vec<Vec<String>> = Vec::new();
    for r in results {
        let Ok(cols) = &r.cols else { continue };
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
            if !sums[k].contains_key(name) {
                order[k].push(name.clone());
            }
            let e = sums[k].entry(name.clone()).or_insert((0.0, 0.0, 0));
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

/// Append one CSV line of `cells` to `out`.
fn csv_line<S: AsRef<str>>(out: &mut String, cells: &[S]) {
    let line: Vec<String> = cells.iter().map(|c| csv_cell(c.as_ref())).collect();
    let _ = writeln!(out, "{}", line.join(","));
}

pub fn runs_csv(axes: &[String], results: &[Row]) -> String {
    let mut out = String::new();
    let metric_names: Vec<String> = results
        .iter()
        .find_map(|r| r.cols.as_ref().ok())
        .map(|c| c.iter().map(|(k, _)| k.clone()).collect())
        .unwrap_or_default();
    let mut header = vec!["run".to_owned(), "seed".to_owned()];
    header.extend(axes.iter().cloned());
    header.extend(metric_names.iter().cloned());
    header.push("error".to_owned());
    csv_line(&mut out, &header);
    for r in results {
        let mut row = vec![r.run.name(), r.run.seed.to_string()];
        row.extend(r.run.point.iter().map(|(_, v)| label(v)));
        match &r.cols {
            Ok(cols) => {
                row.extend(cols.iter().map(|(_, v)| v.clone()));
                row.push(String::new());
            }
            Err(e) => {
                row.extend(metric_names.iter().map(|_| String::new()));
                row.push(e.clone());
            }
        }
        csv_line(&mut out, &row);
    }
    out
}

pub fn summary_csv(axes: &[String], points: &[Point]) -> String {
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
    csv_line(&mut out, &header);
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
        csv_line(&mut out, &row);
    }
    out
}

fn axis_index(exp: &Experiment, name: &str) -> Option<usize> {
    exp.doc
        .grid
        .iter()
        .position(|a| a.column() == name || a.key == name)
}

pub fn check_plot(plot: &PlotDoc, exp: &Experiment) -> Result<(), String> {
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

pub fn draw_plot(
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
