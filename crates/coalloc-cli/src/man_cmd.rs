//! `coalloc man --dir DIR`: the manual pages, generated from the command line's own clap
//! definitions by clap_mangen (issue 33 item 2): `coalloc.1` and one page per command
//! (`coalloc-submit.1`; nested commands as `coalloc-site-add.1`), hidden commands left out.
//! `man -M DIR coalloc-submit`, or install them under a directory of `manpath`
//! (`coalloc man --dir ~/.local/share/man/man1`).

use crate::error::CliError;
use clap::{Args, Command};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Where to write the pages (created if missing), e.g. ~/.local/share/man/man1.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Print the files written as JSON (`{"dir": ..., "pages": [...]}`).
    #[arg(long)]
    pub json: bool,
}

/// Write every page of `cmd` (named `coalloc`) into `args.dir`.
pub fn run(args: ManArgs, cmd: Command) -> Result<(), CliError> {
    let pages = write_pages(&args.dir, cmd)?;
    if args.json {
        let names: Vec<String> = pages.iter().map(|p| p.display().to_string()).collect();
        println!(
            "{}",
            serde_json::json!({ "dir": args.dir.display().to_string(), "pages": names })
        );
    } else {
        println!(
            "{} manual pages in {} (e.g. `man -M {} coalloc-submit`, or put them in a directory of `manpath`)",
            pages.len(),
            args.dir.display(),
            args.dir.parent().unwrap_or(&args.dir).display()
        );
    }
    Ok(())
}

/// The pages of a command and of every visible subcommand, depth first, into `dir` (created
/// if missing); the files written.
pub fn write_pages(dir: &Path, cmd: Command) -> Result<Vec<PathBuf>, CliError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::bad(format!("cannot create {}: {e}", dir.display())))?;
    let mut cmd = cmd;
    cmd.build();
    let mut written = Vec::new();
    page(dir, cmd, &mut written)?;
    Ok(written)
}

fn page(dir: &Path, cmd: Command, written: &mut Vec<PathBuf>) -> Result<(), CliError> {
    let name = cmd
        .get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string();
    let path = dir.join(format!("{name}.1"));
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut buf)
        .map_err(|e| CliError::Internal(format!("rendering {name}(1): {e}")))?;
    std::fs::write(&path, buf)
        .map_err(|e| CliError::bad(format!("cannot write {}: {e}", path.display())))?;
    written.push(path);
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        // `coalloc site add` → coalloc-site-add(1); its usage line keeps the spaces.
        let sub = sub
            .clone()
            .display_name(format!("{name}-{}", sub.get_name()))
            .bin_name(format!(
                "{} {}",
                cmd.get_bin_name().unwrap_or(&name),
                sub.get_name()
            ));
        page(dir, sub, written)?;
    }
    Ok(())
}
