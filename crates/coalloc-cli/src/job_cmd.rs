//! `coalloc job check` and `coalloc job convert`.

use crate::error::CliError;
use crate::load::{load_all, load_job, Loaded};
use crate::table;
use clap::{Subcommand, ValueEnum};
use coalloc_core::model::{Job, JobKind};
use coalloc_core::rsl;
use coalloc_core::spec::native::{self, JobDoc};
use coalloc_core::spec::{format_time, units::format_duration};
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum JobCommand {
    /// Validate job files and print each normalized job.
    ///
    /// Accepts RSL (`.rsl` ordered, `.uno` unordered), batch files (`.bat`, one job file per
    /// line, relative to the batch file) and the native spec (`.toml`, `.json`). Every error
    /// names the file, line and column, and the rule broken. Exits 2 if any job is invalid.
    Check {
        /// Job files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print JSON (one array entry per job) instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Convert one job file to another format, without loss.
    ///
    /// Refuses (exit 2) when the target cannot say everything the job says: RSL has no
    /// priority, user, deadline, input file, runtime estimate or flexible jobs, and counts
    /// wall time in whole minutes.
    Convert {
        /// The job file.
        file: PathBuf,
        /// The target format.
        #[arg(long, value_enum)]
        to: Target,
        /// Write here instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Target {
    Toml,
    Json,
    Rsl,
}

pub fn run(cmd: JobCommand) -> Result<(), CliError> {
    match cmd {
        JobCommand::Check { files, json } => check(&files, json),
        JobCommand::Convert { file, to, output } => convert(&file, to, output),
    }
}

fn check(files: &[PathBuf], as_json: bool) -> Result<(), CliError> {
    let loaded = load_all(files);
    let errors: Vec<String> = loaded.iter().filter_map(|l| l.job.clone().err()).collect();
    if as_json {
        let entries: Vec<_> = loaded.iter().map(json_entry).collect();
        let text = serde_json::to_string_pretty(&entries)
            .map_err(|e| CliError::Internal(e.to_string()))?;
        println!("{text}");
    } else {
        for l in &loaded {
            if let Ok(job) = &l.job {
                print!("{}", describe(l, job));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(CliError::BadInput(errors))
    }
}

fn json_entry(l: &Loaded) -> serde_json::Value {
    let mut v = json!({ "file": l.path.display().to_string() });
    if let Some(b) = &l.listed_in {
        v["listed_in"] = json!(b);
    }
    match &l.job {
        Ok(job) => {
            v["valid"] = json!(true);
            v["job"] = serde_json::to_value(JobDoc::from_job(job)).unwrap_or_default();
        }
        Err(msg) => {
            v["valid"] = json!(false);
            v["error"] = json!(msg);
        }
    }
    v
}

/// A summary line and a table of components.
fn describe(l: &Loaded, job: &Job) -> String {
    let n = job.components.len();
    let shape = if job.kind == JobKind::Flexible {
        format!("{} processors split over sites", job.total_processors())
    } else {
        format!(
            "{n} component{}, {} processors",
            if n == 1 { "" } else { "s" },
            job.total_processors()
        )
    };
    let mut facts = vec![
        format!("{} job, {shape}", job.kind),
        format!("priority {}", job.priority),
    ];
    if let Some(f) = job.flexible() {
        facts.push(format!("min piece {}", f.min_component.unwrap_or(1)));
    }
    let opt = [
        ("name", job.name().map(str::to_owned)),
        ("user", job.user().map(str::to_owned)),
        ("submit", job.submit.map(format_time)),
        ("deadline", job.deadline().map(format_time)),
        (
            "runtime estimate",
            job.runtime_estimate.map(format_duration),
        ),
        ("max wall time", job.max_wall_time().map(format_duration)),
        (
            "input",
            job.input_file()
                .map(|f| format!("{} ({} bytes, {})", f.name, f.size, f.distribution)),
        ),
    ];
    facts.extend(
        opt.into_iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k} {v}"))),
    );
    let rows: Vec<Vec<String>> = job
        .components
        .iter()
        .enumerate()
        .map(|(i, c)| {
            vec![
                i.to_string(),
                c.details().label.clone().unwrap_or_else(|| "-".into()),
                if job.kind == JobKind::Flexible {
                    "*".into()
                } else {
                    c.count.to_string()
                },
                c.site.as_deref().unwrap_or("-").to_owned(),
                c.start_type.to_string(),
                c.job_type.to_string(),
                job.wall_time_of(i)
                    .map(format_duration)
                    .unwrap_or_else(|| "-".into()),
                c.details().executable.clone().unwrap_or_else(|| "-".into()),
                c.details()
                    .arguments
                    .iter()
                    .map(|a| quote(a))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]
        })
        .collect();
    let listed = l
        .listed_in
        .as_ref()
        .map(|b| format!(" (listed in {b})"))
        .unwrap_or_default();
    let mut out = format!("{}{listed}: {}\n", l.path.display(), facts.join(", "));
    let t = table::render(
        &[
            "#",
            "label",
            "count",
            "site",
            "start",
            "type",
            "wall",
            "executable",
            "arguments",
        ],
        &rows,
    );
    for line in t.lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Quote an argument for display when it would not read back as one word.
fn quote(arg: &str) -> String {
    if !arg.is_empty() && !arg.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

fn convert(file: &Path, to: Target, output: Option<PathBuf>) -> Result<(), CliError> {
    let job = load_job(file).map_err(CliError::bad)?;
    let text = match to {
        Target::Toml => native::to_toml(&job),
        Target::Json => native::to_json(&job) + "\n",
        Target::Rsl => {
            rsl::job_to_rsl(&job).map_err(|e| CliError::bad(format!("{}: {e}", file.display())))?
        }
    };
    match output {
        None => print!("{text}"),
        Some(path) => std::fs::write(&path, text)
            .map_err(|e| CliError::bad(format!("{}: cannot write: {e}", path.display())))?,
    }
    Ok(())
}
