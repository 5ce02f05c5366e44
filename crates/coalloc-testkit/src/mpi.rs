//! The MPI test programs of `examples/mpi/` built with Debian's `mpicc` (MPICH), the shape of
//! an `mpi` component, and the check of the ring program's output, for the MPI tests
//! (coalloc-cli's tests/mpi.rs) and the MPI test over the agent rig's namespaces
//! (tests/agents_netns.rs).
//! Skips (saying so) when `mpicc` is missing, unless `COALLOC_REQUIRE_MPI=1` (set by
//! scripts/test.sh, which installs mpich and libmpich-dev).

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// One MPI job at a time: MPICH's ranks poll busily, and several jobs at once on a small
/// machine's cores only slow each other down.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The test program, `examples/mpi/ring.c`, built once with `mpicc`; `None` when there is
/// no `mpicc` and MPI is not required.
pub fn ring() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT.get_or_init(|| build("ring")).as_deref()
}

/// The MPI Poisson solver, `examples/mpi/poisson.c`, likewise.
pub fn poisson() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT.get_or_init(|| build("poisson")).as_deref()
}

/// `examples/mpi/NAME.c` built with `mpicc` into a folder of this test run.
fn build(name: &str) -> Option<PathBuf> {
    if Command::new("mpicc").arg("-show").output().is_err() {
        assert!(
            std::env::var("COALLOC_REQUIRE_MPI").as_deref() != Ok("1"),
            "mpicc not found: install mpich and libmpich-dev (scripts/test.sh does)"
        );
        eprintln!("skipped: mpicc not found (install mpich and libmpich-dev)");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("coalloc-mpi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(name);
    let src = crate::repo().join(format!("examples/mpi/{name}.c"));
    let out = Command::new("mpicc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-lm")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mpicc {name}.c: {err}");
    Some(exe)
}

/// An `mpi` component of `count` processes of `exe args`.
pub fn mpi_component(count: u32, exe: &str, args: &[&str]) -> Value {
    json!({ "count": count, "job_type": "mpi", "executable": exe, "arguments": args })
}

/// `mpi_component` pinned to `site`.
pub fn mpi_component_at(site: &str, count: u32, exe: &str, args: &[&str]) -> Value {
    let mut c = mpi_component(count, exe, args);
    c["site"] = json!(site);
    c
}

/// An unordered job of these components, 2 minutes of wall time.
pub fn job(components: Vec<Value>) -> Value {
    json!({ "kind": "unordered", "max_wall_time": "2m", "component": components })
}

/// Every rank of the ring program printed `rank R of N on HOST: ok` in the output of the
/// component it belongs to (`output(c)`), the components holding consecutive ranks in
/// order, and nothing else.
pub fn check_ranks(output: impl Fn(usize) -> String, sizes: &[u32]) {
    let total: u32 = sizes.iter().sum();
    let mut first = 0;
    for (c, n) in sizes.iter().enumerate() {
        // UCX (MPICH's transport) logs its own transport errors to standard output, e.g. a
        // shared-memory attach that lost a race on a loaded machine before falling back to
        // TCP; they are the library's, not the program's lines.
        let out: String = output(c)
            .lines()
            .filter(|l| !(l.starts_with('[') && l.contains(" UCX ")))
            .map(|l| format!("{l}\n"))
            .collect();
        for r in first..first + n {
            let want = format!("rank {r} of {total} on ");
            let line = out.lines().find(|l| l.starts_with(&want));
            assert!(
                line.is_some_and(|l| l.ends_with(": ok")),
                "component {c}, rank {r}: {out:?}"
            );
        }
        assert_eq!(out.lines().count(), *n as usize, "component {c}: {out:?}");
        first += n;
    }
}
