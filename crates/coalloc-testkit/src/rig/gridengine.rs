//! The Grid Engine rig of scripts/gridengine/: the cells of `$COALLOC_GE_RIG/cells.tsv`, a
//! backend per cell, commands run straight against a cell, and a crash of a cell's execution
//! host (its sge_execd and its jobs killed), for the backend's tests; for end-to-end tests of
//! `coalloc serve` with Grid Engine sites, a server configuration per rig, a lock per
//! scenario ([`GeScenario`]), and the clean-up on exit (a crashed execd started again, every
//! job deleted, every cell empty), even after a failed assertion. Unset, a test prints
//! "skipped" and passes, unless `COALLOC_REQUIRE_GE=1`, when it fails.

use super::SERVER;
use crate::repo;
use coalloc_backends::gridengine::{GridEngineCell, GridEngineConfig};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// One cell of `cells.tsv`.
pub struct Cell {
    pub name: String,
    pub settings: PathBuf,
    pub dir: PathBuf,
    pub slots: u32,
    pub queue: String,
    pub pe: String,
}

/// The rig: its base directory and its cells, in `cells.tsv` order.
pub struct GeRig {
    pub base: PathBuf,
    pub cells: Vec<Cell>,
}

impl GeRig {
    /// The rig, or `None` (test skipped) when `COALLOC_GE_RIG` is unset; with
    /// `COALLOC_REQUIRE_GE=1` (scripts/test.sh) a missing rig fails the test instead.
    pub fn get(test: &str) -> Option<GeRig> {
        let Some(base) = std::env::var_os("COALLOC_GE_RIG") else {
            assert!(
                std::env::var("COALLOC_REQUIRE_GE").as_deref() != Ok("1"),
                "{test}: COALLOC_REQUIRE_GE=1 but COALLOC_GE_RIG is unset"
            );
            eprintln!(
                "{test}: skipped (COALLOC_GE_RIG is unset; see scripts/gridengine/README.md)"
            );
            return None;
        };
        let base = PathBuf::from(base);
        let tsv = base.join("cells.tsv");
        let text = std::fs::read_to_string(&tsv).unwrap_or_else(|e| {
            panic!(
                "COALLOC_GE_RIG is set but {} is unreadable: {e}",
                tsv.display()
            )
        });
        let cells: Vec<Cell> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                assert!(f.len() >= 10, "{}: bad line {l:?}", tsv.display());
                Cell {
                    name: f[0].into(),
                    settings: f[1].into(),
                    dir: base.join(f[0]),
                    slots: f[6].parse().expect("slots"),
                    queue: f[8].into(),
                    pe: f[9].into(),
                }
            })
            .collect();
        assert!(
            cells.len() >= 2,
            "{} lists fewer than 2 cells",
            tsv.display()
        );
        Some(GeRig { base, cells })
    }

    /// A backend for cell `i` (its names tagged `test`).
    pub fn backend(&self, i: usize) -> GridEngineCell {
        let c = &self.cells[i];
        GridEngineCell::new(GridEngineConfig {
            settings: Some(c.settings.clone()),
            pe: Some(c.pe.clone()),
            queue: Some(c.queue.clone()),
            command_timeout: Duration::from_secs(10),
            name_tag: Some("test".into()),
            ..GridEngineConfig::new(c.name.clone())
        })
    }

    /// `program args` run straight against cell `i` (20 s limit).
    pub fn run(&self, i: usize, program: &str, args: &[&str]) -> Output {
        Command::new("bash")
            .arg("-c")
            .arg(r#". "$1"; shift; exec timeout 20 "$@""#)
            .arg("bash")
            .arg(&self.cells[i].settings)
            .arg(program)
            .args(args)
            .current_dir("/")
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    /// The same, which must succeed; its standard output.
    pub fn ge(&self, i: usize, program: &str, args: &[&str]) -> String {
        let out = self.run(i, program, args);
        assert!(
            out.status.success(),
            "{} {program} {args:?}: {}",
            self.cells[i].name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// `id state name` of every job cell `i` lists (queued, running, in error), finished
    /// ones excepted.
    pub fn active_jobs(&self, i: usize) -> Vec<String> {
        self.ge(i, "qstat", &["-u", "*"])
            .lines()
            .skip(2)
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                format!("{} {} {}", f[0], f[4], f[2])
            })
            .collect()
    }

    /// A job of "another user" (not named `coalloc-`), straight through `qsub`: its id.
    pub fn foreign_job(&self, i: usize, slots: u32, seconds: u32) -> String {
        let c = &self.cells[i];
        let script = format!("sleep {seconds}");
        let out = Command::new("bash")
            .arg("-c")
            .arg(r#". "$1"; echo "$2" | qsub -terse -N other -o /dev/null -e /dev/null -pe "$3" "$4""#)
            .arg("bash")
            .arg(&c.settings)
            .arg(&script)
            .arg(&c.pe)
            .arg(slots.to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Waits until cell `i` lists no job (finished ones aside).
    pub fn until_empty(&self, i: usize, limit: Duration) {
        let t0 = Instant::now();
        loop {
            let jobs = self.active_jobs(i);
            if jobs.is_empty() {
                return;
            }
            assert!(
                t0.elapsed() < limit,
                "{}: jobs left {jobs:?}",
                self.cells[i].name
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// A crash of cell `i`'s execution host: its sge_execd and every job it ran are
    /// SIGKILLed (the rig's `kill_shepherds`). The qmaster notices after `max_unheard`.
    pub fn crash_host(&self, i: usize) {
        let script = repo().join("scripts/gridengine/common.sh");
        let st = Command::new("bash")
            .arg("-c")
            .arg(r#". "$1"; p=$(pid_of "$(execd_pid_file "$2")" sge_execd) && kill -KILL "$p"; kill_shepherds "$2/spool/execd""#)
            .arg("bash")
            .arg(&script)
            .arg(&self.cells[i].dir)
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// Starts whatever up.sh would start (the crashed execd), and waits until every queue
    /// is usable again.
    pub fn restore(&self) {
        let out = Command::new(repo().join("scripts/gridengine/up.sh"))
            .arg(&self.base)
            .env("INSTALL", "0")
            .env("CELLS", self.cells_spec())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "up.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `qdel -f` every job and `qrdel` every advance reservation of every cell.
    pub fn delete_all(&self) {
        for i in 0..self.cells.len() {
            let _ = self.run(i, "qdel", &["-f", "-u", "*"]);
            let _ = self.run(i, "qrdel", &["-f", "-u", "*"]);
        }
    }

    /// Grid Engine's word on a job of cell `i`: its `qstat` letters while it is listed,
    /// else `failed/exit_status` of its accounting record (`0/0` for a clean end).
    pub fn job_state(&self, i: usize, id: &str) -> String {
        if let Some(j) = self
            .active_jobs(i)
            .into_iter()
            .find(|j| j.starts_with(&format!("{id} ")))
        {
            return j.split(' ').nth(1).unwrap_or("?").to_string();
        }
        let acct = self.run(i, "qacct", &["-j", id]);
        let text = String::from_utf8_lossy(&acct.stdout);
        let field = |k: &str| {
            text.lines()
                .rev()
                .find(|l| l.starts_with(k))
                .and_then(|l| l.split_whitespace().nth(1))
                .unwrap_or("?")
                .to_string()
        };
        format!("{}/{}", field("failed"), field("exit_status"))
    }

    /// The pid of cell `i`'s sge_qmaster.
    pub fn qmaster_pid(&self, i: usize) -> Option<u32> {
        let f = self.cells[i].dir.join("spool/qmaster/qmaster.pid");
        let pid: u32 = std::fs::read_to_string(f).ok()?.trim().parse().ok()?;
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        (comm.trim() == "sge_qmaster").then_some(pid)
    }

    fn cells_spec(&self) -> String {
        self.cells
            .iter()
            .map(|c| format!("{}:{}", c.name, c.slots))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

static RIG_LOCK: Mutex<()> = Mutex::new(());

/// One scenario's hold on the cells.
pub struct GeScenario {
    pub rig: GeRig,
    _lock: MutexGuard<'static, ()>,
}

impl GeScenario {
    /// The rig, locked; `None` (skipped) when `COALLOC_GE_RIG` is unset (a failure with
    /// `COALLOC_REQUIRE_GE=1`).
    pub fn begin(test: &str) -> Option<GeScenario> {
        let rig = GeRig::get(test)?;
        let lock = RIG_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        rig.restore();
        rig.delete_all();
        for i in 0..rig.cells.len() {
            rig.until_empty(i, Duration::from_secs(20));
        }
        Some(GeScenario { rig, _lock: lock })
    }
}

impl Drop for GeScenario {
    fn drop(&mut self) {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.rig.restore();
            self.rig.delete_all();
            for i in 0..self.rig.cells.len() {
                self.rig.until_empty(i, Duration::from_secs(30));
            }
        }));
        if r.is_err() && !std::thread::panicking() {
            panic!("restoring the Grid Engine rig failed");
        }
    }
}

impl GeRig {
    /// The `[[site]]` table of cell `i`, with `extra` manager keys (`, pe = "x"`).
    pub fn site(&self, i: usize, extra: &str) -> String {
        let c = &self.cells[i];
        format!(
            "[[site]]\nname = \"{}\"\nprocessors = {}\nmanager = {{ type = \"gridengine\", settings = \"{}\", queue = \"{}\", pe = \"{}\"{extra} }}\n",
            c.name,
            c.slots,
            c.settings.display(),
            c.queue,
            c.pe
        )
    }

    /// A server configuration with one site per cell, then `scheduler`.
    pub fn config(&self, scheduler: &str) -> String {
        let mut s = String::from(SERVER);
        for i in 0..self.cells.len() {
            s += &self.site(i, "");
        }
        s + "[scheduler]\n" + scheduler + "\n"
    }
}
