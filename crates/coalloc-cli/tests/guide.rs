//! The guide cannot drift (issue 33 item 1): every fenced block of `docs/src` whose info
//! string is `sh,runnable` is run, page by page in the order of `docs/src/SUMMARY.md`,
//! against one `coalloc serve` of the embedded default in a temporary state directory.
//! Each page's blocks are one `bash -euo pipefail` script, run in a fresh folder where
//! `examples/`, `experiments/` and `traces/` are the repository's, with this build's
//! `coalloc` first on the `PATH` and `COALLOC_STATE_DIR` naming the server's state. A
//! script that exits non-zero (or runs over two minutes) fails the test with its page and
//! output. `GUIDE_PAGE=first-steps.md` runs one page.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const COALLOC: &str = env!("CARGO_BIN_EXE_coalloc");
const PAGE_LIMIT: Duration = Duration::from_secs(120);

/// The pages of the table of contents, in order.
fn pages(src: &Path) -> Vec<String> {
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("docs/src/SUMMARY.md");
    let mut out = Vec::new();
    for line in summary.lines() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                let target = &rest[..end];
                if target.ends_with(".md") && !out.iter().any(|p| p == target) {
                    out.push(target.to_string());
                }
                rest = &rest[end..];
            }
        }
    }
    out
}

/// The runnable blocks of a page, in order.
fn runnable_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match &mut current {
            None => {
                let info = line.trim_start().strip_prefix("```").map(str::trim);
                if info.is_some_and(|i| i.split([',', ' ']).any(|w| w == "runnable")) {
                    current = Some(String::new());
                }
            }
            Some(block) => {
                if line.trim_start().starts_with("```") {
                    blocks.push(std::mem::take(block));
                    current = None;
                } else {
                    block.push_str(line);
                    block.push('\n');
                }
            }
        }
    }
    assert!(current.is_none(), "a runnable block is not closed");
    blocks
}

struct Serve {
    child: Child,
}

impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child, by its pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn path_with_coalloc() -> String {
    let bin = Path::new(COALLOC).parent().unwrap().display().to_string();
    match std::env::var("PATH") {
        Ok(p) => format!("{bin}:{p}"),
        Err(_) => format!("{bin}:/usr/bin:/bin"),
    }
}

/// Run one page's script; its output, or why it failed.
fn run_page(script: &Path, dir: &Path, state: &Path) -> Result<String, String> {
    let log = dir.join("page.log");
    let out = std::fs::File::create(&log).unwrap();
    let mut child = Command::new("bash")
        .arg(script)
        .current_dir(dir)
        .env("PATH", path_with_coalloc())
        .env("COALLOC_STATE_DIR", state)
        .env_remove("COALLOC_URL")
        .env_remove("COALLOC_TOKEN")
        .env_remove("COALLOC_SOCKET")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("bash");
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t.elapsed() > PAGE_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    match status {
        Some(s) if s.success() => Ok(text),
        Some(s) => Err(format!("{s}\n{text}")),
        None => Err(format!("still running after {PAGE_LIMIT:?}\n{text}")),
    }
}

#[test]
fn every_runnable_block_of_the_guide_runs_against_the_embedded_default() {
    let repo = common::repo();
    let src = repo.join("docs/src");
    let only = std::env::var("GUIDE_PAGE").ok();
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("guide");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let state = base.join("state");
    let log = std::fs::File::create(base.join("serve.log")).unwrap();
    let mut serve = Serve {
        child: Command::new(COALLOC)
            .args(["serve", "--state-dir"])
            .arg(&state)
            .env("PATH", path_with_coalloc())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("coalloc serve"),
    };
    let t = Instant::now();
    while !state.join("server.json").exists() {
        assert!(
            serve.child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(60),
            "coalloc serve did not start: {}",
            std::fs::read_to_string(base.join("serve.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let mut ran = Vec::new();
    let mut failed = Vec::new();
    let mut blocks_run = 0;
    for page in pages(&src) {
        if only.as_deref().is_some_and(|o| o != page) {
            continue;
        }
        let text = std::fs::read_to_string(src.join(&page))
            .unwrap_or_else(|e| panic!("{page} is in SUMMARY.md but cannot be read: {e}"));
        let blocks = runnable_blocks(&text);
        if blocks.is_empty() {
            continue;
        }
        let dir = base.join("pages").join(page.replace(['/', '.'], "_"));
        std::fs::create_dir_all(&dir).unwrap();
        for link in ["examples", "experiments", "traces"] {
            std::os::unix::fs::symlink(repo.join(link), dir.join(link)).unwrap();
        }
        let mut script = String::from("set -euo pipefail\n");
        for (i, b) in blocks.iter().enumerate() {
            script.push_str(&format!("# --- {page}, runnable block {}\n{b}", i + 1));
        }
        let path = dir.join("page.sh");
        std::fs::write(&path, &script).unwrap();
        blocks_run += blocks.len();
        match run_page(&path, &dir, &state) {
            Ok(out) => {
                eprintln!("guide: {page}: {} block(s) ran\n{out}", blocks.len());
                ran.push(page);
            }
            Err(why) => failed.push(format!("{page}: {why}\n--- script:\n{script}")),
        }
    }
    drop(serve);
    assert!(
        failed.is_empty(),
        "guide pages failed:\n{}",
        failed.join("\n")
    );
    if only.is_none() {
        assert!(
            blocks_run >= 12 && ran.len() >= 8,
            "only {blocks_run} runnable blocks on {} pages: {ran:?}",
            ran.len()
        );
        assert!(ran.iter().any(|p| p == "first-steps.md"), "{ran:?}");
    }
}

#[test]
fn runnable_blocks_are_found_by_their_info_string() {
    let text = "intro\n```sh\nnot this\n```\n```sh,runnable\necho a\necho b\n```\n\
                ```toml\nx = 1\n```\n```sh runnable\necho c\n```\n";
    assert_eq!(runnable_blocks(text), vec!["echo a\necho b\n", "echo c\n"]);
    let src = common::repo().join("docs/src");
    let p = pages(&src);
    assert_eq!(p.first().map(String::as_str), Some("introduction.md"));
    assert!(p.iter().any(|x| x == "running/commands.md"), "{p:?}");
    for page in &p {
        assert!(
            src.join(page).exists(),
            "{page} listed in SUMMARY.md is missing"
        );
    }
}
