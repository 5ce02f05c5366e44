//! `coalloc place`: a dry run of placement — which site (and file site) each component of a
//! job would get on a site list, with the idle processors before and after.
//!
//! A job that does not fit is a valid answer, not an error: the reason is printed on
//! standard output and the exit code is 3. A bad sites file or job file exits 2.

use crate::error::CliError;
use crate::load::{load_job, locate};
use crate::table;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use coalloc_core::model::{Job, JobKind, Millis, Site};
use coalloc_core::placement::{place, Fit, FlexibleFit, NoFit, Placement, SiteView};
use coalloc_core::scheduler::SchedulerConfig;
use coalloc_core::spec::scheduler::parse_config;
use coalloc_core::spec::units::format_duration;
use coalloc_core::{Pos, SpecError};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The exit code of a job that does not fit.
pub const NO_FIT: i32 = 3;

#[derive(Args)]
pub struct PlaceArgs {
    /// The site list: `[[site]]` tables with `processors`, and for a dry run `idle` (idle
    /// processors now; all of them when left out), `files` (replicas) and `bandwidth`. It may
    /// also hold a `[scheduler]` table, whose `fit` and `flexible` are then the defaults.
    #[arg(long, value_name = "SITES.toml")]
    sites: PathBuf,
    /// How unordered and total jobs are fitted: the modified worst-fit or best-fit of the DCS,
    /// first-fit, the plain worst fit, or close-to-files (by input file transfer time).
    /// [default: the file's `[scheduler] fit`, else worst]
    #[arg(
        long,
        value_parser = PossibleValuesParser::new(Fit::NAMES).map(|s| Fit::from_name(&s).unwrap())
    )]
    fit: Option<Fit>,
    /// How a flexible job's total is split over sites.
    /// [default: the file's `[scheduler] flexible`, else cluster-filling]
    #[arg(
        long,
        value_parser = PossibleValuesParser::new(FlexibleFit::NAMES)
            .map(|s| FlexibleFit::from_name(&s).unwrap())
    )]
    flexible: Option<FlexibleFit>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// The job file (`.rsl`, `.uno`, `.toml`, `.json`).
    job: PathBuf,
}

pub fn run(mut args: PlaceArgs) -> Result<(), CliError> {
    let ((sites, config), job) = match (load_sites(&args.sites), load_job(&args.job)) {
        (Ok(sites), Ok(job)) => (sites, job),
        (sites, job) => {
            let errors = [sites.err(), job.err()].into_iter().flatten().collect();
            return Err(CliError::BadInput(errors));
        }
    };
    args.fit.get_or_insert(config.fit);
    args.flexible.get_or_insert(config.flexible_fit);
    let view = SiteView::from_sites(&sites);
    let result = place(&job, &view, args.fit(), args.flexible());
    let text = if args.json {
        let v = json_report(&args, &job, &view, &result);
        serde_json::to_string_pretty(&v).map_err(|e| CliError::Internal(e.to_string()))? + "\n"
    } else {
        text_report(&args, &job, &view, &result)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| CliError::Internal(format!("cannot write: {e}")))?;
    if result.is_err() {
        std::process::exit(NO_FIT);
    }
    Ok(())
}

impl PlaceArgs {
    fn fit(&self) -> Fit {
        self.fit.unwrap_or_default()
    }

    fn flexible(&self) -> FlexibleFit {
        self.flexible.unwrap_or_default()
    }
}

/// Read a SITES.toml (with an optional `[scheduler]` table); errors name the file, and the
/// `[[site]]` table's line when the rule broken belongs to one site.
fn load_sites(path: &Path) -> Result<(Vec<Site>, SchedulerConfig), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    parse_config(&text).map_err(|e| {
        let e = match site_table_pos(&text, &e) {
            Some(pos) => e.at(pos),
            None => e,
        };
        locate(path, &e)
    })
}

/// Where the `[[site]]` table of a `site[i].…` error starts.
fn site_table_pos(text: &str, err: &SpecError) -> Option<Pos> {
    let SpecError::Invalid {
        pos: None, field, ..
    } = err
    else {
        return None;
    };
    let rest = field.strip_prefix("site[")?;
    let i: usize = rest[..rest.find(']')?].parse().ok()?;
    let (line, text) = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("[[site]]"))
        .nth(i)?;
    let col = text.len() - text.trim_start().len();
    Some(Pos::new(line as u32 + 1, col as u32 + 1))
}

fn what(job: &Job, args: &PlaceArgs) -> String {
    match (job.kind, job.flexible()) {
        (JobKind::Flexible, Some(f)) => format!(
            "flexible job, {} processors in pieces of at least {}; split {}",
            f.total,
            f.min_component.unwrap_or(1),
            args.flexible()
        ),
        (JobKind::Ordered, _) => {
            format!("ordered job, {}; ordered fit", components(job))
        }
        (kind, _) => format!("{kind} job, {}; fit {}", components(job), args.fit()),
    }
}

fn components(job: &Job) -> String {
    let n = job.components.len();
    format!(
        "{n} component{}, {} processors",
        if n == 1 { "" } else { "s" },
        job.total_processors()
    )
}

/// A transfer estimate for people: `40s`, `13.334s`, `1m40s`.
fn duration(ms: Millis) -> String {
    if ms % 1000 == 0 {
        format_duration(ms)
    } else {
        format!("{}.{:03}s", ms / 1000, ms % 1000)
    }
}

fn text_report(
    args: &PlaceArgs,
    job: &Job,
    view: &SiteView,
    result: &Result<Placement, NoFit>,
) -> String {
    let mut out = format!("{}: {}\n", args.job.display(), what(job, args));
    let p = match result {
        Err(why) => {
            out.push_str(&format!("does not fit: {why}\n"));
            return out;
        }
        Ok(p) => p,
    };
    let has_file = job.extra().input_file.is_some();
    let rows: Vec<Vec<String>> = p
        .components
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let (file_site, transfer) = match (&c.file, has_file) {
                (Some(f), _) => (f.site_name.clone(), duration(f.estimate)),
                (None, true) => ("none".into(), "-".into()),
                (None, false) => ("-".into(), "-".into()),
            };
            vec![
                if job.kind == JobKind::Flexible {
                    k
                } else {
                    c.component
                }
                .to_string(),
                c.label.clone().unwrap_or_else(|| "-".into()),
                c.count.to_string(),
                c.site_name.clone(),
                file_site,
                transfer,
            ]
        })
        .collect();
    let first = if job.kind == JobKind::Flexible {
        "piece"
    } else {
        "#"
    };
    out.push_str(&table::render(
        &[first, "label", "count", "site", "file site", "transfer"],
        &rows,
    ));
    if let Some(ftt) = p.transfer_time() {
        out.push_str(&format!(
            "file transfer time (longest): {}\n",
            duration(ftt)
        ));
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = view
        .sites()
        .iter()
        .enumerate()
        .map(|(i, s)| {
            vec![
                s.name.clone(),
                s.processors.to_string(),
                view.idle()[i].to_string(),
                p.idle_after[i].to_string(),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &["site", "processors", "idle before", "idle after"],
        &rows,
    ));
    out
}

fn json_report(
    args: &PlaceArgs,
    job: &Job,
    view: &SiteView,
    result: &Result<Placement, NoFit>,
) -> Value {
    let mut v = json!({
        "job": args.job.display().to_string(),
        "kind": job.kind.name(),
    });
    match job.kind {
        JobKind::Flexible => v["flexible"] = json!(args.flexible().name()),
        JobKind::Ordered => v["fit"] = json!("ordered"),
        _ => v["fit"] = json!(args.fit().name()),
    }
    let p = match result {
        Err(why) => {
            v["fits"] = json!(false);
            v["reason"] = json!(why.to_string());
            return v;
        }
        Ok(p) => p,
    };
    v["fits"] = json!(true);
    v["components"] = p
        .components
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let mut e = json!({
                "index": c.component,
                "label": c.label,
                "count": c.count,
                "site": c.site_name,
                "file_site": c.file.as_ref().map(|f| f.site_name.clone()),
                "file_bytes": c.file.as_ref().map(|f| f.bytes),
                "transfer_ms": c.file.as_ref().map(|f| f.estimate),
            });
            if job.kind == JobKind::Flexible {
                e["piece"] = json!(k);
            }
            e
        })
        .collect();
    v["transfer_ms"] = json!(p.transfer_time());
    v["sites"] = view
        .sites()
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({
                "name": s.name,
                "processors": s.processors,
                "idle_before": view.idle()[i],
                "idle_after": p.idle_after[i],
            })
        })
        .collect();
    v
}
