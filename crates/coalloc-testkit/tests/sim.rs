//! The simulation harness in the test suite: 500 seeds (`COALLOC_SIM_SEEDS` for more),
//! every failure printed with the command that replays it.

#[test]
fn five_hundred_seeds_keep_every_invariant() {
    let n: u64 = std::env::var("COALLOC_SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let t = std::time::Instant::now();
    let mut failures = Vec::new();
    let (mut crashes, mut jobs) = (0, 0);
    let (mut agent_runs, mut partitions, mut reconnects) = (0, 0, 0);
    for seed in 0..n {
        match coalloc_testkit::sim::run(seed, false) {
            Ok(o) => {
                crashes += o.crashes;
                jobs += o.jobs;
                agent_runs += usize::from(o.agent_sites > 0);
                partitions += o.partitions;
                reconnects += o.reconnects;
            }
            Err(v) => failures.push(v.to_string()),
        }
    }
    eprintln!(
        "{n} seeds, {jobs} jobs, {crashes} server crashes, {agent_runs} runs with agent sites, {partitions} partitions, {reconnects} agent connections, {:.1} s",
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
    assert!(
        agent_runs > n as usize / 4 && partitions > 0 && reconnects > agent_runs as u32,
        "the seeds exercise agent sites, partitions and reconnections"
    );
}

#[test]
fn a_seed_replays_exactly() {
    let a = coalloc_testkit::sim::run(7, false).map(|o| format!("{o:?}"));
    let b = coalloc_testkit::sim::run(7, false).map(|o| format!("{o:?}"));
    assert_eq!(a.map_err(|v| v.to_string()), b.map_err(|v| v.to_string()));
}
