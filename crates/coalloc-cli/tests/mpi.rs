//! Unmodified MPI programs co-allocated through coalloc's PMI (coalloc-runtime `pmi`): a C
//! program built here with Debian's `mpicc` (MPICH) runs as one job of 2, then 3 `mpi`
//! components on three local clusters of a real `coalloc serve`; each rank checks an
//! `MPI_Allreduce` over every rank and an `MPI_Sendrecv` with its ring neighbours, which sit
//! on other components at the edges. A component whose executable is missing aborts the
//! whole job before any rank computes; an Open MPI program is refused with the reason. On
//! the Slurm rig (`COALLOC_SLURM_RIG`), the same over its clusters, and a component's ranks
//! over both nodes of its allocation (the rig's two-node cluster), failures there included.
//!
//! Skips (saying so) when `mpicc` is missing, unless `COALLOC_REQUIRE_MPI=1` (set by
//! scripts/test.sh, which installs mpich and libmpich-dev).

mod common;

use coalloc_testkit::mpi::{
    check_ranks, job, mpi_component, mpi_component_at, one_at_a_time, poisson, ring,
};
use coalloc_testkit::server::{processes_with, three_clusters, Server};
use common::COALLOC;
use serde_json::{json, Value};
use std::collections::BTreeSet;

#[test]
fn an_unmodified_mpi_program_runs_co_allocated_over_two_then_three_clusters() {
    let Some(ring) = ring() else { return };
    let ring = ring.to_str().unwrap();
    let _one = one_at_a_time();
    let s = Server::start(
        COALLOC,
        "mpi",
        &three_clusters([4, 4, 4], "policy = \"fcfs\"\nfit = \"worst\""),
    );
    for sizes in [vec![3, 3], vec![3, 3, 2]] {
        let comps = sizes.iter().map(|n| mpi_component(*n, ring, &[])).collect();
        let id = s.submit(&job(comps));
        let j = s.wait_ended(id, 60);
        assert_eq!(j["state"], "finished", "{j}\n{}", s.log());
        // Components of 3 on clusters of 4: each on a cluster of its own.
        let used: BTreeSet<String> = coalloc_testkit::server::component_sites(&j)
            .into_iter()
            .collect();
        assert_eq!(used.len(), sizes.len(), "{j}");
        assert!(j["barrier_release"].as_i64().is_some(), "{j}");
        check_ranks(|c| s.output(id, c), &sizes);
    }
}

/// The MPI version of the Poisson example, one strip per rank, its ranks on three
/// clusters: the right answer (the bound of examples/poisson), the same iterations as the
/// serial solver (red-black Gauss-Seidel does not depend on the split).
#[test]
fn the_mpi_poisson_solver_is_co_allocated_over_three_clusters() {
    let Some(exe) = poisson() else { return };
    let exe = exe.to_str().unwrap();
    let _one = one_at_a_time();
    let s = Server::start(
        COALLOC,
        "mpi-poisson",
        &three_clusters([4, 4, 4], "policy = \"fcfs\"\nfit = \"worst\""),
    );
    // 3 ranks on 3 clusters; more would only oversubscribe a small machine's cores with
    // MPICH's busy-polling ranks.
    let comps = (0..3).map(|_| mpi_component(1, exe, &["24"])).collect();
    let id = s.submit(&job(comps));
    let j = s.wait_ended(id, 120);
    assert_eq!(j["state"], "finished", "{j}\n{}", s.output(id, 0));
    let used: BTreeSet<String> = coalloc_testkit::server::component_sites(&j)
        .into_iter()
        .collect();
    assert_eq!(used.len(), 3, "{j}");
    let out = s.output(id, 0);
    let line = out
        .lines()
        .find(|l| l.starts_with("poisson-mpi:"))
        .unwrap_or("");
    // The serial solver's figures at n = 24 (`mpiexec -n 1 poisson 24`: 620 iterations,
    // max_error 1.257e-03); the bound is 1e-2.
    assert_eq!(
        line, "poisson-mpi: n=24 ranks=3 iterations=620 max_error=1.257e-03 ok",
        "{out:?}"
    );
}

#[test]
fn a_missing_executable_aborts_the_whole_mpi_job_before_any_rank_computes() {
    let Some(built) = ring() else { return };
    let _one = one_at_a_time();
    let s = Server::start(
        COALLOC,
        "mpi-missing",
        &three_clusters([4, 4, 4], "policy = \"fcfs\"\nmax_submit_failures = 1"),
    );
    // A copy of its own, so that the other tests' ranks are not counted as left over.
    let copy = s.dir.parent().unwrap().join("ring-missing");
    std::fs::copy(built, &copy).unwrap();
    let ring = copy.to_str().unwrap();
    let id = s.submit(&job(vec![
        mpi_component(2, ring, &["--started"]),
        mpi_component(2, "/no/such/mpi-program", &[]),
        mpi_component(2, ring, &["--started"]),
    ]));
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "failed", "{j}");
    let why = j["last_abort"]
        .as_str()
        .or(j["reason"].as_str())
        .unwrap_or("");
    let shown = j.to_string();
    assert!(
        shown.contains("MPI process 2 could not be started (/no/such/mpi-program"),
        "{why} {shown}"
    );
    for c in [0, 2] {
        let out = s.output(id, c);
        assert!(
            !out.contains("computing"),
            "component {c} computed: {out:?}"
        );
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        processes_with(ring),
        Vec::<u32>::new(),
        "ranks left running"
    );
}

/// `MPI_Abort` after the commit: the aborting component ends with the code, the server
/// handles it as a failure after commit (the job fails here, at its first), and no rank of
/// any component is left running.
#[test]
fn mpi_abort_after_the_commit_ends_the_job_everywhere() {
    let Some(built) = ring() else { return };
    let _one = one_at_a_time();
    let s = Server::start(
        COALLOC,
        "mpi-abort",
        &three_clusters([4, 4, 4], "policy = \"fcfs\"\nmax_completion_failures = 1"),
    );
    let copy = s.dir.parent().unwrap().join("ring-abort");
    std::fs::copy(built, &copy).unwrap();
    let ring = copy.to_str().unwrap();
    let id = s.submit(&job(vec![
        mpi_component(2, ring, &["--abort-at", "3"]),
        mpi_component(2, ring, &["--abort-at", "3"]),
    ]));
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "failed", "{j}");
    assert!(j["barrier_release"].as_i64().is_some(), "{j}");
    let err = std::fs::read_dir(s.dir.join("output").join(id.to_string()))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("1.L"))
        .filter(|e| e.file_name().to_string_lossy().ends_with(".err"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<String>();
    assert!(
        err.contains("rank 3 called MPI_Abort (exit code 5)"),
        "{err:?}"
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        processes_with(ring),
        Vec::<u32>::new(),
        "ranks left running"
    );
}

#[test]
fn an_open_mpi_program_is_refused_with_the_reason() {
    if ring().is_none() {
        return;
    }
    let s = Server::start(
        COALLOC,
        "mpi-ompi",
        &three_clusters([4, 4, 4], "max_submit_failures = 1"),
    );
    // What the proxy looks for: the library an Open MPI program is linked against.
    let fake = s.dir.parent().unwrap().join("ompi-program");
    std::fs::write(&fake, "#!/bin/sh\n# NEEDED libmpi.so.40\nexit 0\n").unwrap();
    let id = s.submit(&job(vec![mpi_component(2, fake.to_str().unwrap(), &[])]));
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "failed", "{j}");
    let shown = j.to_string();
    assert!(
        shown.contains("linked against Open MPI (libmpi.so.40)"),
        "{shown}"
    );
    assert!(shown.contains("PMIx"), "{shown}");
}

/// The same program over the clusters of the Slurm rig (scripts/slurm/; skipped unless
/// `COALLOC_SLURM_RIG` is set): each component is a Slurm job of its own cluster, its MPI
/// processes started inside that allocation by the PMI proxy; 2 then 3 clusters, in both
/// launch modes.
#[test]
fn an_unmodified_mpi_program_runs_co_allocated_over_slurm_clusters() {
    let Some(ring) = ring() else { return };
    let ring = ring.to_str().unwrap();
    let Some(sc) = coalloc_testkit::rig::slurm::Scenario::begin("mpi-slurm") else {
        return;
    };
    let _one = one_at_a_time();
    for launch in ["batch", "allocation"] {
        let config = sc.rig.config_launching("policy = \"fcfs\"", launch);
        let s = Server::start(COALLOC, &format!("mpi-slurm-{launch}"), &config);
        for sites in [&["alpha", "beta"][..], &["alpha", "beta", "gamma"][..]] {
            let comps: Vec<Value> = sites
                .iter()
                .map(|site| mpi_component_at(site, 2, ring, &[]))
                .collect();
            let id = s.submit(&json!({
                "kind": "ordered", "max_wall_time": "5m", "component": comps,
            }));
            let j = s.wait_ended(id, 90);
            assert_eq!(j["state"], "finished", "{launch}: {j}\n{}", s.log());
            assert_eq!(coalloc_testkit::server::component_sites(&j), *sites, "{j}");
            check_ranks(|c| s.output(id, c), &vec![2; sites.len()]);
        }
    }
}

/// One component's ranks over both nodes of its Slurm allocation (coalloc-runtime
/// `pmi::spread`: `srun` over the allocation, PMI over TCP), the other component on another
/// cluster. The rig's two-node cluster (gamma, 2 x 16 CPUs by default) is filled by another
/// user's job on each node but for 2 CPUs, so that a component of 4 gets 2 + 2; every rank
/// checks its `MPI_Allreduce` and `MPI_Sendrecv`, and the component's ranks report both
/// nodes (`SLURMD_NODENAME`: the rig's nodes share one host). Both launch modes.
#[test]
fn an_mpi_components_ranks_run_on_every_node_of_its_slurm_allocation() {
    let Some(ring) = ring() else { return };
    let ring = ring.to_str().unwrap();
    let Some(sc) = coalloc_testkit::rig::slurm::Scenario::begin("mpi-slurm-nodes") else {
        return;
    };
    let rig = &sc.rig;
    let Some((g, other)) = two_node_cluster(rig, "mpi-slurm-nodes") else {
        return;
    };
    let (multi, single) = (&rig.clusters[g], &rig.clusters[other]);
    let nodes: BTreeSet<String> = multi.nodes[..2].iter().cloned().collect();
    let _one = one_at_a_time();
    leave_two_cpus_per_node(rig, g);
    for launch in ["batch", "allocation"] {
        let config = rig.config_launching("policy = \"fcfs\"", launch);
        let s = Server::start(COALLOC, &format!("mpi-slurm-nodes-{launch}"), &config);
        let sites = [single.name.as_str(), multi.name.as_str()];
        let comps = vec![
            mpi_component_at(sites[0], 2, ring, &[]),
            mpi_component_at(sites[1], 4, ring, &[]),
        ];
        let id = s.submit(&json!({
            "kind": "ordered", "max_wall_time": "5m", "component": comps,
        }));
        let j = s.wait_ended(id, 120);
        assert_eq!(j["state"], "finished", "{launch}: {j}\n{}", s.log());
        assert_eq!(coalloc_testkit::server::component_sites(&j), sites, "{j}");
        check_ranks(|c| s.output(id, c), &[2, 4]);
        // "rank R of 6 on HOST node NODE: ok": ranks 2..5, two on each node, in order.
        let out = s.output(id, 1);
        let node_of = |r: u32| -> String {
            let want = format!("rank {r} of 6 on ");
            let line = out.lines().find(|l| l.starts_with(&want)).unwrap_or("");
            let node = line.split(" node ").nth(1).unwrap_or("");
            node.trim_end_matches(": ok").to_string()
        };
        let placed: Vec<String> = (2..6).map(node_of).collect();
        let used: BTreeSet<String> = placed.iter().cloned().collect();
        assert_eq!(used, nodes, "{launch}: ranks 2..5 on {placed:?}\n{out}");
        assert_eq!(placed[0], placed[1], "{launch}: {placed:?}");
        assert_eq!(placed[2], placed[3], "{launch}: {placed:?}");
    }
}

/// A stand-in for `srun` on this host: `-n N` copies of the command, with `SLURM_PROCID`
/// 0..N-1 and `SLURMD_NODENAME` fake-0 or fake-1 (block: the first half on fake-0); exits
/// with the first non-zero code.
const FAKE_SRUN: &str = r#"#!/bin/sh
n=1
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n=$2; shift 2 ;;
    -N|-m) shift 2 ;;
    --*) shift ;;
    *) break ;;
  esac
done
i=0; pids=
while [ "$i" -lt "$n" ]; do
  SLURM_PROCID=$i SLURMD_NODENAME=fake-$((2 * i / n)) "$@" &
  pids="$pids $!"
  i=$((i + 1))
done
rc=0
for p in $pids; do wait "$p"; s=$?; [ "$rc" -ne 0 ] || rc=$s; done
exit "$rc"
"#;

/// The proxy's multi-node path without Slurm (so that it runs where there is no rig): a
/// component that finds itself in a "Slurm allocation of two nodes" (`SLURM_JOB_ID`,
/// `SLURM_JOB_NUM_NODES` in its environment) starts its ranks through `srun` (here
/// [`FAKE_SRUN`], `COALLOC_SRUN`), and they speak PMI over TCP (`PMI_PORT`, `PMI_ID`);
/// beside it a component whose ranks use `PMI_FD`. Every rank checks its results.
#[test]
fn ranks_started_through_srun_speak_pmi_over_tcp() {
    let Some(ring) = ring() else { return };
    let ring = ring.to_str().unwrap();
    let _one = one_at_a_time();
    let s = Server::start(
        COALLOC,
        "mpi-tcp",
        &three_clusters([4, 4, 4], "policy = \"fcfs\"\nmax_submit_failures = 1"),
    );
    let srun = s.dir.parent().unwrap().join("fake-srun");
    std::fs::write(&srun, FAKE_SRUN).unwrap();
    std::fs::set_permissions(&srun, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut spread = mpi_component(4, ring, &[]);
    spread["environment"] = json!({
        "SLURM_JOB_ID": "1", "SLURM_JOB_NUM_NODES": "2",
        "COALLOC_SRUN": srun.to_str().unwrap(), "COALLOC_PMI_HOST": "127.0.0.1",
    });
    let id = s.submit(&job(vec![mpi_component(2, ring, &[]), spread]));
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "finished", "{j}\n{}", s.log());
    check_ranks(|c| s.output(id, c), &[2, 4]);
    let out = s.output(id, 1);
    for (r, node) in [(2, "fake-0"), (3, "fake-0"), (4, "fake-1"), (5, "fake-1")] {
        let want = format!("rank {r} of 6 on ");
        let line = out.lines().find(|l| l.starts_with(&want)).unwrap_or("");
        assert!(line.ends_with(&format!(" node {node}: ok")), "{out}");
    }
    assert!(!s.output(id, 0).contains(" node "), "{}", s.output(id, 0));
}

/// The first cluster of the rig with two nodes or more, and one with a single node; `None`
/// (skipped, or failing under `COALLOC_REQUIRE_SLURM=1`) when the rig has none.
fn two_node_cluster(rig: &coalloc_testkit::rig::slurm::Rig, test: &str) -> Option<(usize, usize)> {
    let multi = rig.clusters.iter().position(|c| c.nodes.len() >= 2);
    let single = rig.clusters.iter().position(|c| c.nodes.len() == 1);
    if let (Some(m), Some(s)) = (multi, single) {
        return Some((m, s));
    }
    let why = "the rig needs a cluster of two nodes and one of one \
               (scripts/slurm/up.sh's default CLUSTERS: alpha:64 beta:32 gamma:16:2)";
    assert!(
        std::env::var("COALLOC_REQUIRE_SLURM").as_deref() != Ok("1"),
        "{why}"
    );
    eprintln!("{test}: skipped ({why})");
    None
}

/// Another user's job on each node of cluster `g`: all its CPUs but 2 on the first two
/// nodes, all of them on any further node, so that a component of 4 gets 2 + 2.
fn leave_two_cpus_per_node(rig: &coalloc_testkit::rig::slurm::Rig, g: usize) {
    let c = &rig.clusters[g];
    let per_node = c.cpus / c.nodes.len() as u32;
    for (i, node) in c.nodes.iter().enumerate() {
        let cpus = if i < 2 { per_node - 2 } else { per_node };
        let id = rig.slurm(
            g,
            "sbatch",
            &[
                "--parsable",
                "-w",
                node,
                "-n",
                &cpus.to_string(),
                "-J",
                "not-ours",
                "-o",
                "/dev/null",
                "--wrap",
                "sleep 600",
            ],
        );
        let t0 = std::time::Instant::now();
        while rig.slurm(g, "squeue", &["-h", "-j", &id, "-o", "%T"]) != "RUNNING" {
            assert!(
                t0.elapsed().as_secs() < 20,
                "{node}: job {id} did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// Failures of a component spread over two nodes: a missing executable is a failed start
/// (the whole job aborted, no rank of the other component computes), and `MPI_Abort` after
/// the commit ends the job and every rank on every node.
#[test]
fn failures_of_an_mpi_component_over_two_nodes_end_every_rank() {
    let Some(built) = ring() else { return };
    let Some(sc) = coalloc_testkit::rig::slurm::Scenario::begin("mpi-slurm-nodes-fail") else {
        return;
    };
    let rig = &sc.rig;
    let Some((g, other)) = two_node_cluster(rig, "mpi-slurm-nodes-fail") else {
        return;
    };
    let _one = one_at_a_time();
    leave_two_cpus_per_node(rig, g);
    let config = rig.config_launching(
        "policy = \"fcfs\"\nmax_submit_failures = 1\nmax_completion_failures = 1",
        "allocation",
    );
    let s = Server::start(COALLOC, "mpi-slurm-nodes-fail", &config);
    let copy = s.dir.parent().unwrap().join("ring-nodes-fail");
    std::fs::copy(built, &copy).unwrap();
    let ring = copy.to_str().unwrap();
    let (multi, single) = (&rig.clusters[g].name, &rig.clusters[other].name);
    let gone = || {
        let t0 = std::time::Instant::now();
        while !processes_with(ring).is_empty() && t0.elapsed().as_secs() < 20 {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        assert_eq!(
            processes_with(ring),
            Vec::<u32>::new(),
            "ranks left running"
        );
    };

    let id = s.submit(
        &json!({ "kind": "ordered", "max_wall_time": "5m", "component": [
            mpi_component_at(single, 2, ring, &["--started"]),
            mpi_component_at(multi, 4, "/no/such/mpi-program", &[]),
        ]}),
    );
    let j = s.wait_ended(id, 120);
    assert_eq!(j["state"], "failed", "{j}");
    assert!(j["barrier_release"].is_null(), "{j}");
    let shown = j.to_string();
    assert!(
        shown.contains("before the co-allocation barrier"),
        "{shown}"
    );
    assert!(
        !s.output(id, 0).contains("computing"),
        "{}",
        s.output(id, 0)
    );
    gone();

    let id = s.submit(
        &json!({ "kind": "ordered", "max_wall_time": "5m", "component": [
            mpi_component_at(single, 2, ring, &[]),
            mpi_component_at(multi, 4, ring, &["--abort-at", "4"]),
        ]}),
    );
    let j = s.wait_ended(id, 120);
    assert_eq!(j["state"], "failed", "{j}");
    assert!(j["barrier_release"].as_i64().is_some(), "{j}");
    gone();
}

/// A program that never speaks PMI and never ends never reaches the co-allocation barrier:
/// the barrier timeout (the job's own, 1 s here; its wall time is 2 minutes) fails its
/// start, the job is aborted, and its processes are gone with it.
#[test]
fn a_program_that_never_speaks_pmi_is_aborted_at_the_barrier_timeout() {
    if ring().is_none() {
        return;
    }
    let s = Server::start(
        COALLOC,
        "mpi-silent",
        &three_clusters(
            [4, 4, 4],
            "max_submit_failures = 1\nretry_backoff = \"100ms\"",
        ),
    );
    let silent = mpi_component(2, "/bin/sleep", &["3131"]);
    let id = s.submit(&json!({
        "kind": "unordered", "max_wall_time": "2m", "barrier_timeout": "1s",
        "component": [silent],
    }));
    let j = s.wait_ended(id, 60);
    assert_eq!(j["state"], "failed", "{j}");
    assert!(j["barrier_release"].is_null(), "{j}");
    let why = j["last_abort"].as_str().unwrap_or_default();
    assert!(why.contains("barrier"), "{j}");
    // Ended long before its wall time.
    let ran = j["end"].as_i64().unwrap() - j["submit"].as_i64().unwrap();
    assert!(ran < 60_000, "{j}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        processes_with("/bin/sleep 3131"),
        Vec::<u32>::new(),
        "ranks left running"
    );
}

/// The same program across two agent sites (`coalloc agent` on this host, local backends
/// behind them) and a direct site: the PMI traffic of the agent sites' ranks goes to their
/// own agent, which relays it.
#[test]
fn an_unmodified_mpi_program_runs_across_agent_sites() {
    use coalloc_testkit::agent::{wait_link, AgentProc};
    let Some(ring) = ring() else { return };
    let ring = ring.to_str().unwrap();
    let _one = one_at_a_time();
    let mut config = String::from(
        "[server]\nmonitor_interval = \"50ms\"\nagent_bind = \"127.0.0.1:0\"\nheartbeat = \"200ms\"\n",
    );
    for site in ["s1", "s2"] {
        config += &format!(
            "[[site]]\nname = \"{site}\"\nprocessors = 4\nmanager = {{ type = \"agent\" }}\n"
        );
    }
    config += "[[site]]\nname = \"alpha\"\nprocessors = 4\nmanager = { type = \"local\" }\n";
    let s = Server::start(COALLOC, "mpi-agents", &config);
    let agents: Vec<AgentProc> = ["s1", "s2"]
        .iter()
        .map(|site| {
            let c = format!(
                "[agent]\nrelay_bind = \"127.0.0.1:{}\"\n[[site]]\nname = \"{site}\"\nprocessors = 4\nmanager = {{ type = \"local\" }}\n",
                coalloc_testkit::tools::free_port()
            );
            AgentProc::start(&s, site, &c, None)
        })
        .collect();
    for site in ["s1", "s2"] {
        wait_link(&s, site, true, 20);
    }
    let sizes = [3u32, 3, 2];
    let comps: Vec<Value> = ["s1", "s2", "alpha"]
        .iter()
        .zip(sizes)
        .map(|(site, n)| mpi_component_at(site, n, ring, &[]))
        .collect();
    let id = s.submit(&json!({ "kind": "ordered", "max_wall_time": "2m", "component": comps }));
    let j = s.wait_ended(id, 90);
    assert_eq!(j["state"], "finished", "{j}\n{}", s.log());
    // Each rank's line, in its component's output at its site.
    let output = |c: usize| match agents.get(c) {
        Some(a) => a.output(id, c),
        None => s.output(id, c),
    };
    check_ranks(output, &sizes);
}
