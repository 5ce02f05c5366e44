//! DCS batch files (seed 003 appendix A.2–A.3): a `.bat` file lists job files, one per line.
//!
//! Blank lines and lines starting with `#` are skipped. A relative path resolves against the
//! batch file's folder and `~` against the home folder (DCS wanted full paths; we are kinder).
//! An entry must be a job file (`.rsl`, `.uno`, `.toml`, `.json`): a batch file does not list
//! other batch files. Whether the file exists is for the caller to check, since that is I/O.

use super::Format;
use crate::error::{Pos, SpecError};
use std::path::{Path, PathBuf};

/// One job file named by a batch file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchEntry {
    /// Where the entry stands in the batch file.
    pub pos: Pos,
    /// The path as written.
    pub written: String,
    /// The path resolved against the batch file's folder and the home folder.
    pub path: PathBuf,
    pub format: Format,
}

/// Read a batch file's entries. `dir` is the batch file's folder, `home` the home folder.
pub fn parse_batch(
    text: &str,
    dir: &Path,
    home: Option<&Path>,
) -> Result<Vec<BatchEntry>, SpecError> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let col = raw.len() - raw.trim_start().len();
        let pos = Pos::new(n as u32 + 1, raw[..col].chars().count() as u32 + 1);
        let path =
            resolve(line, dir, home).map_err(|rule| SpecError::invalid_at(pos, "entry", rule))?;
        let format = match Format::of_path(&path) {
            Some(Format::Batch) => {
                return Err(SpecError::invalid_at(
                    pos,
                    "entry",
                    format!(
                    "`{line}` is a batch file; a batch file lists job files, not other batch files"
                ),
                ))
            }
            Some(f) => f,
            None => {
                return Err(SpecError::invalid_at(
                    pos,
                    "entry",
                    format!("`{line}` is not a job file (expected .rsl, .uno, .toml or .json)"),
                ))
            }
        };
        out.push(BatchEntry {
            pos,
            written: line.to_owned(),
            path,
            format,
        });
    }
    if out.is_empty() {
        return Err(SpecError::invalid_at(
            Pos::new(1, 1),
            "entry",
            "the batch file lists no job files",
        ));
    }
    Ok(out)
}

fn resolve(written: &str, dir: &Path, home: Option<&Path>) -> Result<PathBuf, String> {
    let tilde = written == "~" || written.starts_with("~/");
    if tilde {
        let home =
            home.ok_or_else(|| format!("`{written}` starts with ~ but no home folder is known"))?;
        return Ok(home.join(written.trim_start_matches('~').trim_start_matches('/')));
    }
    let p = Path::new(written);
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_absolute_and_home_paths() {
        let text = "# jobs\n\na.rsl\n  sub/b.uno\n/abs/c.toml\n~/d.json\n";
        let got = parse_batch(text, Path::new("/batch"), Some(Path::new("/home/u"))).unwrap();
        let paths: Vec<_> = got
            .iter()
            .map(|e| e.path.to_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            paths,
            [
                "/batch/a.rsl",
                "/batch/sub/b.uno",
                "/abs/c.toml",
                "/home/u/d.json"
            ]
        );
        assert_eq!(got[1].pos, Pos::new(4, 3));
        assert_eq!(got[1].format, Format::Uno);
    }

    #[test]
    fn rejects_unknown_entries_nested_batches_and_empty_files() {
        let e = parse_batch("a.rsl\nnotes.txt\n", Path::new("/b"), None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "2:1: entry: `notes.txt` is not a job file (expected .rsl, .uno, .toml or .json)"
        );
        let e = parse_batch("x.bat", Path::new("/b"), None).unwrap_err();
        assert!(e.to_string().contains("not other batch files"), "{e}");
        let e = parse_batch("# only\n", Path::new("/b"), None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "1:1: entry: the batch file lists no job files"
        );
        let e = parse_batch("~/x.rsl", Path::new("/b"), None).unwrap_err();
        assert!(e.to_string().contains("no home folder"), "{e}");
    }
}
