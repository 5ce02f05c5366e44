//! The simulation harness in the test suite: 500 seeds of the plans without agent sites
//! (`--classic`), and the seeds among the first 500 whose plans have agent sites
//! (`COALLOC_SIM_SEEDS` for more), every failure printed with the command that replays it.

use coalloc_testkit::sim;

/// Seeds with agent sites that break an invariant and are known to: none. (54, 110, 115,
/// 370, 388 and 494 were restarts that reached another state, a site's link not being in
/// the core's snapshot: fixed by snapshot form 5. 274: `resume` journaled the agent sites'
/// "link down" only at the next turn, and a crash before it left the next restart with the
/// links up: `resume` now ends with a turn. 71 and 235 pass since the fixes of the
/// one-hour run's failures.) A seed put here must say why.
const KNOWN: &[u64] = &[];

fn seeds() -> u64 {
    std::env::var("COALLOC_SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

#[test]
fn five_hundred_seeds_keep_every_invariant() {
    let n = seeds();
    let t = std::time::Instant::now();
    let mut failures = Vec::new();
    let (mut crashes, mut jobs) = (0, 0);
    for seed in 0..n {
        match sim::run_classic(seed, false) {
            Ok(o) => {
                crashes += o.crashes;
                jobs += o.jobs;
            }
            Err(v) => failures.push(v.to_string()),
        }
    }
    eprintln!(
        "{n} seeds, {jobs} jobs, {crashes} server crashes, {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        crashes > 0 && jobs > n as usize,
        "the seeds exercise crashes and jobs"
    );
}

#[test]
fn the_seeds_with_agent_sites_keep_every_invariant() {
    let n = seeds();
    let t = std::time::Instant::now();
    let (mut failures, mut known) = (Vec::new(), Vec::new());
    let (mut runs, mut partitions, mut reconnects) = (0, 0, 0);
    for seed in (0..n).filter(|s| sim::plan::plan(*s).sites.iter().any(|s| s.agent.is_some())) {
        runs += 1;
        match sim::run(seed, false) {
            Ok(o) => {
                partitions += o.partitions;
                reconnects += o.reconnects;
            }
            Err(_) if KNOWN.contains(&seed) => known.push(seed),
            Err(v) => failures.push(v.to_string()),
        }
    }
    eprintln!(
        "{runs} of {n} seeds with agent sites, {partitions} partitions, {reconnects} agent connections, known failures {known:?}, {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        runs > n / 4 && partitions > 0 && reconnects > runs as u32,
        "the seeds exercise agent sites, partitions and reconnections"
    );
}

#[test]
fn a_seed_replays_exactly() {
    let a = sim::run(7, false).map(|o| format!("{o:?}"));
    let b = sim::run(7, false).map(|o| format!("{o:?}"));
    assert_eq!(a.map_err(|v| v.to_string()), b.map_err(|v| v.to_string()));
}

/// Seeds of the one-hour run (bench/RESULTS.md, issue 30) that found bugs: each keeps every
/// invariant now.
#[test]
fn the_seeds_that_found_bugs_keep_every_invariant() {
    let failures: Vec<String> = [100449, 108037, 113267, 175612, 183660, 195223]
        .into_iter()
        .filter_map(|seed| coalloc_testkit::sim::run(seed, false).err())
        .map(|v| v.to_string())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
