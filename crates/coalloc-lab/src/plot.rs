//! Line charts written as SVG and PNG (plotters), for experiments and reports. The font
//! (DejaVu Sans, `assets/`, under its own free licence) is built in, so a plot looks the
//! same on every machine and needs no system font library.

use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

fn register_font() {
    REGISTER.call_once(|| {
        // The font is ours and valid; a failure would only leave plots without text.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// One line: its legend and its points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A chart's labels and options.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    /// A logarithmic y axis (seed 004's figures 3–6 use one): points with y ≤ 0 are left out.
    pub log_y: bool,
    /// Names of the x positions 0, 1, 2, … when the x axis is a list of categories (trace or
    /// policy names): the ticks show these names instead of the numbers.
    pub x_categories: Vec<String>,
    /// "upper-right" (default), "upper-left", "lower-left", "lower-right", "middle-right".
    pub legend: Option<String>,
}

/// The legend positions [`Chart::legend`] may name.
pub const LEGENDS: [&str; 5] = [
    "upper-right",
    "upper-left",
    "lower-left",
    "lower-right",
    "middle-right",
];

fn legend_position(name: Option<&str>) -> SeriesLabelPosition {
    match name {
        Some("upper-left") => SeriesLabelPosition::UpperLeft,
        Some("lower-left") => SeriesLabelPosition::LowerLeft,
        Some("lower-right") => SeriesLabelPosition::LowerRight,
        Some("middle-right") => SeriesLabelPosition::MiddleRight,
        _ => SeriesLabelPosition::UpperRight,
    }
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Write `stem.svg` and `stem.png`; returns the files written.
pub fn line_chart(stem: &Path, chart: &Chart, series: &[Series]) -> Result<Vec<PathBuf>, String> {
    line_chart_with_errors(stem, chart, series, &[])
}

/// [`line_chart`] with error bars: `errors[i][j]` is the half-height of the bar at point `j`
/// of series `i` (e.g. the standard error σ/√n of a mean over seeds, seed 004 §V-D); 0, or a
/// series without an entry, draws none.
pub fn line_chart_with_errors(
    stem: &Path,
    chart: &Chart,
    series: &[Series],
    errors: &[Vec<f64>],
) -> Result<Vec<PathBuf>, String> {
    register_font();
    let svg = stem.with_extension("svg");
    let png = stem.with_extension("png");
    draw(
        SVGBackend::new(&svg, (800, 500)).into_drawing_area(),
        chart,
        series,
        errors,
    )
    .map_err(|e| format!("{}: {e}", svg.display()))?;
    draw(
        BitMapBackend::new(&png, (800, 500)).into_drawing_area(),
        chart,
        series,
        errors,
    )
    .map_err(|e| format!("{}: {e}", png.display()))?;
    Ok(vec![svg, png])
}

/// Write the points behind a chart to `stem.csv` (`series,x,y`, one line per point), so that
/// the numbers of a plot can be read back; returns the file.
pub fn write_data(stem: &Path, series: &[Series]) -> Result<PathBuf, String> {
    let path = stem.with_extension("csv");
    let mut text = String::from("series,x,y\n");
    for s in series {
        let name = s.name.replace(['"', ','], " ");
        for (x, y) in &s.points {
            text.push_str(&format!("{name},{x},{y}\n"));
        }
    }
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

fn bounds(series: &[Series], log_x: bool, log_y: bool) -> ((f64, f64), (f64, f64)) {
    let pts = || {
        series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| (!log_x || p.0 > 0.0) && (!log_y || p.1 > 0.0))
    };
    let (x0, x1) = pts().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (y0, y1) = pts().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let (x0, x1) = if x0 > x1 { (0.0, 1.0) } else { (x0, x1) };
    if log_y {
        // Whole decades around the points, so the ticks are 1, 10, 100, ...
        let (y0, y1) = if y0 > y1 { (1.0, 10.0) } else { (y0, y1) };
        let lo = 10f64.powf(y0.log10().floor());
        let hi = 10f64.powf(y1.log10().ceil()).max(lo * 10.0);
        let (x0, x1) = match (log_x && x0 == x1, (x1 - x0).abs() < 1e-12) {
            (true, _) => (x0 / 2.0, x1 * 2.0),
            (false, true) => (x0 - 1.0, x1 + 1.0),
            _ => (x0, x1),
        };
        return ((x0, x1), (lo, hi));
    }
    let (y0, y1) = if y0 > y1 {
        (0.0, 1.0)
    } else {
        (y0.min(0.0), y1)
    };
    let widen = |a: f64, b: f64| {
        if (b - a).abs() < 1e-12 {
            (a - 1.0, b + 1.0)
        } else {
            (a, b)
        }
    };
    let (y0, y1) = widen(y0, y1);
    let (x0, x1) = if log_x && x0 == x1 {
        (x0 / 2.0, x1 * 2.0)
    } else {
        widen(x0, x1)
    };
    ((x0, x1), (y0, y1 + (y1 - y0) * 0.05))
}

/// The error bars of series `i`: (x, low, high) for every point with a positive error.
fn bars(series: &[Series], errors: &[Vec<f64>], i: usize) -> Vec<(f64, f64, f64)> {
    let Some(e) = errors.get(i) else {
        return Vec::new();
    };
    series[i]
        .points
        .iter()
        .zip(e)
        .filter(|(_, e)| **e > 0.0)
        .map(|(&(x, y), &e)| (x, y - e, y + e))
        .collect()
}

fn draw<DB: DrawingBackend>(
    area: DrawingArea<DB, plotters::coord::Shift>,
    chart: &Chart,
    series: &[Series],
    errors: &[Vec<f64>],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    area.fill(&WHITE).map_err(err)?;
    // The axes take in the bars' ends too (a bar's low end at or below 0 on a log axis
    // is cut at the axis).
    let ends: Vec<Series> = (0..series.len())
        .map(|i| Series {
            name: String::new(),
            points: bars(series, errors, i)
                .into_iter()
                .flat_map(|(x, lo, hi)| [(x, lo), (x, hi)])
                .collect(),
        })
        .chain(series.iter().cloned())
        .collect();
    let ((x0, x1), (y0, y1)) = bounds(&ends, chart.log_x, chart.log_y);
    // Category names for the ticks at 0, 1, 2, ...; the axis gets a half-step margin.
    let cats = &chart.x_categories;
    let (x0, x1) = if cats.is_empty() {
        (x0, x1)
    } else {
        (-0.5, (cats.len() as f64 - 0.5).max(x1 + 0.5))
    };
    let x_fmt = |x: &f64| -> String {
        if cats.is_empty() {
            return format!("{x}");
        }
        let i = x.round();
        match cats.get(i as usize) {
            Some(name) if (x - i).abs() < 1e-6 && i >= 0.0 => name.clone(),
            _ => String::new(),
        }
    };
    let mut builder = ChartBuilder::on(&area);
    builder
        .caption(&chart.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65);
    macro_rules! body {
        ($ctx:expr) => {{
            let mut ctx = $ctx;
            let mut mesh = ctx.configure_mesh();
            if !cats.is_empty() {
                mesh.x_labels(cats.len() * 2 + 1).x_label_formatter(&x_fmt);
            }
            mesh.x_desc(&chart.x_label)
                .y_desc(&chart.y_label)
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(err)?;
            for (i, s) in series.iter().enumerate() {
                let color = COLORS[i % COLORS.len()];
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|p| (!chart.log_x || p.0 > 0.0) && (!chart.log_y || p.1 > 0.0))
                    .collect();
                ctx.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                    .map_err(err)?
                    .label(&s.name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                ctx.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                    .map_err(err)?;
                // Error bars: a vertical line with short caps (in pixels) at both ends.
                let cap = |x: f64, y: f64| {
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(-4, 0), (4, 0)], color.stroke_width(1))
                };
                for (x, lo, hi) in bars(series, errors, i) {
                    let lo = if chart.log_y && lo <= 0.0 {
                        y0
                    } else {
                        lo.max(y0)
                    };
                    ctx.draw_series([PathElement::new(
                        vec![(x, lo), (x, hi)],
                        color.stroke_width(1),
                    )])
                    .map_err(err)?;
                    ctx.draw_series([cap(x, lo), cap(x, hi)]).map_err(err)?;
                }
            }
            if series.len() > 1 || series.iter().any(|s| !s.name.is_empty()) {
                ctx.configure_series_labels()
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .label_font(("sans-serif", 14))
                    .position(legend_position(chart.legend.as_deref()))
                    .draw()
                    .map_err(err)?;
            }
        }};
    }
    match (chart.log_x, chart.log_y) {
        (true, true) => body!(builder
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(err)?),
        (true, false) => body!(builder
            .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
            .map_err(err)?),
        (false, true) => body!(builder
            .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
            .map_err(err)?),
        (false, false) => body!(builder.build_cartesian_2d(x0..x1, y0..y1).map_err(err)?),
    }
    area.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log y axis spans whole decades around the positive points (seed 004's log axes).
    #[test]
    fn a_log_y_axis_spans_whole_decades_and_skips_zeros() {
        let s = [Series {
            name: String::new(),
            points: vec![(0.0, 0.0), (1.0, 1.3), (2.0, 68.0)],
        }];
        assert_eq!(bounds(&s, false, true), ((1.0, 2.0), (1.0, 100.0)));
    }

    /// Error bars: only points with a positive error get one, drawn as a thin line with caps.
    #[test]
    fn error_bars_are_drawn_as_thin_lines_in_the_series_colour() {
        let s = vec![Series {
            name: "RND".into(),
            points: vec![(1.0, 10.0), (2.0, 20.0)],
        }];
        let errors = vec![vec![0.0, 5.0]];
        assert_eq!(bars(&s, &errors, 0), vec![(2.0, 15.0, 25.0)]);
        assert!(bars(&s, &[], 0).is_empty());
        let dir = std::env::temp_dir().join(format!("coalloc-plot-err-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = line_chart_with_errors(&dir.join("c"), &Chart::default(), &s, &errors).unwrap();
        let plain = line_chart(&dir.join("p"), &Chart::default(), &s).unwrap();
        // One bar: its line and two caps, thin lines in the series' colour (the series'
        // own line is 2 px wide).
        let bar = r##"stroke="#1F77B4" stroke-width="1""##;
        let with = std::fs::read_to_string(&files[0]).unwrap();
        let without = std::fs::read_to_string(&plain[0]).unwrap();
        assert_eq!(with.matches(bar).count(), 3);
        assert_eq!(without.matches(bar).count(), 0);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn writes_an_svg_and_a_png_with_text() {
        let dir = std::env::temp_dir().join(format!("coalloc-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = line_chart(
            &dir.join("chart"),
            &Chart {
                title: "Success rate".into(),
                x_label: "λg (1/s)".into(),
                y_label: "%".into(),
                log_x: false,
                ..Chart::default()
            },
            &[Series {
                name: "Lp = 0.7".into(),
                points: vec![(0.001, 90.0), (0.002, 80.0)],
            }],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.contains("Success rate") && svg.contains("Lp = 0.7"));
        let png = std::fs::read(&files[1]).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
