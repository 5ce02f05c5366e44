//! Reading job files from disk: formats by extension, batch files expanded, every error
//! turned into one line that names the file, line and column.

use coalloc_core::model::Job;
use coalloc_core::spec::{self, batch, Format};
use coalloc_core::SpecError;
use std::path::{Path, PathBuf};

/// One job file's outcome.
pub struct Loaded {
    /// The job file.
    pub path: PathBuf,
    /// The batch file line that listed it, as `jobs.bat:3`.
    pub listed_in: Option<String>,
    pub job: Result<Job, String>,
}

/// Where a message about `path` starts: `file:` for errors with a position, `file: ` else.
pub fn locate(path: &Path, err: &SpecError) -> String {
    format!(
        "{}:{}{err}",
        path.display(),
        if has_pos(err) { "" } else { " " }
    )
}

fn has_pos(err: &SpecError) -> bool {
    matches!(
        err,
        SpecError::Syntax { .. } | SpecError::Invalid { pos: Some(_), .. }
    )
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))
}

/// Read one job file (not a batch file).
pub fn load_job(path: &Path) -> Result<Job, String> {
    match Format::of_path(path) {
        None => Err(format!(
            "{}: unknown job file type (expected {})",
            path.display(),
            Format::EXTENSIONS
        )),
        Some(Format::Batch) => Err(format!(
            "{}: a batch file holds several jobs; give one job file",
            path.display()
        )),
        Some(format) => {
            let text = read(path)?;
            spec::parse_job(&text, format).map_err(|e| locate(path, &e))
        }
    }
}

/// Read every job of the given files, expanding batch files, in order.
pub fn load_all(paths: &[PathBuf]) -> Vec<Loaded> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut out = Vec::new();
    for path in paths {
        if Format::of_path(path) != Some(Format::Batch) {
            out.push(Loaded {
                path: path.clone(),
                listed_in: None,
                job: load_job(path),
            });
            continue;
        }
        let entries = read(path).and_then(|text| {
            let dir = std::path::absolute(path)
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf))
                .unwrap_or_else(|| PathBuf::from("."));
            batch::parse_batch(&text, &dir, home.as_deref()).map_err(|e| locate(path, &e))
        });
        match entries {
            Err(msg) => out.push(Loaded {
                path: path.clone(),
                listed_in: None,
                job: Err(msg),
            }),
            Ok(entries) => {
                for e in entries {
                    let listed = format!("{}:{}", path.display(), e.pos.line);
                    let job = if e.path.is_file() {
                        load_job(&e.path).map_err(|m| format!("{m} (listed in {listed})"))
                    } else {
                        Err(format!(
                            "{}:{}: `{}` does not exist (resolved to {})",
                            path.display(),
                            e.pos,
                            e.written,
                            e.path.display()
                        ))
                    };
                    out.push(Loaded {
                        path: e.path,
                        listed_in: Some(listed),
                        job,
                    });
                }
            }
        }
    }
    out
}
