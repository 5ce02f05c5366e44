//! Memory per queued job, measured with a counting global allocator.
//!
//! For each policy: 100 sites of 64 processors, all filled by local jobs (the monitor reports
//! 0 idle), then 10,000 two-component unordered jobs with no strings are submitted; none
//! fits, so all of them wait in the queue. The figure is the growth of the live heap (bytes
//! allocated minus bytes freed, the jobs' own `Vec<Component>` included, since the scheduler
//! keeps it) from just before the first job is built to just after the last submission,
//! divided by the number of jobs. Then 10 more passes run (a monitor report each) to show
//! what a waiting job costs per pass.
//!
//! Goal: at most 500 bytes per queued job.
//!
//! `cargo bench -p coalloc-core --bench memory`; `COALLOC_BENCH_JOBS` changes the count and
//! `COALLOC_BENCH_POLICIES` (comma-separated) the policies (default: fcfs, fpfs, and easy
//! when it exists).

mod common;
use coalloc_core::model::{Component, ComponentDetails, Job, JobExtra, Site};
use coalloc_core::scheduler::jobs::{CompState, JobState};
use coalloc_core::scheduler::*;
use common::queued_job;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

/// The system allocator, counting live bytes and allocations.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Relaxed);
            ALLOCS.fetch_add(1, Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            LIVE.fetch_add(new_size, Relaxed);
            ALLOCS.fetch_add(1, Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SITES: usize = 100;
const PROCESSORS: u32 = 64;
const GOAL: f64 = 500.0;

fn measure(policy: &str, jobs: usize) {
    let config = SchedulerConfig {
        queue: QueueConfig::from_name(policy).expect("a known policy"),
        ..SchedulerConfig::default()
    };
    let sites = (0..SITES)
        .map(|i| Site::cluster(format!("s{i}"), PROCESSORS))
        .collect();
    let mut s = Scheduler::new(config, sites);
    for site in 0..SITES {
        s.handle(
            0,
            Event::SiteStatus {
                site,
                idle: 0,
                total: PROCESSORS,
                healthy: true,
                other: 0,
            },
        )
        .expect("accepted");
    }
    while s.poll_command().is_some() {}
    let started = Instant::now();
    let (live0, allocs0) = (LIVE.load(Relaxed), ALLOCS.load(Relaxed));
    for k in 0..jobs {
        let job = if scale_jobs() {
            scale_job(k)
        } else {
            queued_job(k)
        };
        s.handle(1, Event::Submit(Box::new(job))).expect("accepted");
        while s.poll_command().is_some() {}
    }
    let (live1, allocs1) = (LIVE.load(Relaxed), ALLOCS.load(Relaxed));
    assert_eq!(s.queued(), jobs, "every job waits");
    breakdown(policy, &s, live1 - live0, jobs);
    let per_job = (live1 - live0) as f64 / jobs as f64;
    println!(
        "memory/{policy}: {per_job:.0} bytes per queued job ({} live bytes for {jobs} jobs, \
         {:.1} allocation calls per submission, transient ones included; goal <= {GOAL:.0}: \
         {}) [{:.1?}]",
        live1 - live0,
        (allocs1 - allocs0) as f64 / jobs as f64,
        if per_job <= GOAL { "PASS" } else { "FAIL" },
        started.elapsed()
    );
    const PASSES: usize = 10;
    for k in 0..PASSES {
        s.handle(
            2 + k as i64,
            Event::SiteStatus {
                site: 0,
                idle: (k % 2) as u32 + 1,
                total: PROCESSORS,
                healthy: true,
                other: 0,
            },
        )
        .expect("accepted");
        while s.poll_command().is_some() {}
    }
    let live2 = LIVE.load(Relaxed);
    println!(
        "memory/{policy}: +{:.1} bytes per queued job per pass ({PASSES} more passes)",
        (live2 as f64 - live1 as f64) / jobs as f64 / PASSES as f64
    );
    let tries: usize = s.jobs().map(|j| j.record.try_times.len()).sum();
    let cap: usize = s
        .jobs()
        .map(|j| j.record.try_times.capacity() * size_of::<i64>())
        .sum();
    println!(
        "memory/{policy}: record.try_times holds {:.1} entries per job, {:.0} bytes \
         per job of capacity",
        tries as f64 / jobs as f64,
        cap as f64 / jobs as f64
    );
    drop(s);
}

/// What the live bytes are: the jobs' own heap (components, component states, placement
/// tries), the `JobState`s themselves, and the rest (the job map's B-tree nodes beyond the
/// states they hold, the queue policy's maps).
fn breakdown(policy: &str, s: &Scheduler, live: usize, jobs: usize) {
    let (mut components, mut states, mut tries, mut boxes) = (0, 0, 0, 0);
    for j in s.jobs() {
        components += j.job.components.capacity() * size_of::<Component>();
        boxes += j.job.extra.as_ref().map_or(0, |_| size_of::<JobExtra>());
        // Details shared by several components count a share each.
        boxes += j
            .job
            .components
            .iter()
            .filter_map(|c| c.details.as_ref())
            .map(|d| size_of::<ComponentDetails>() / std::sync::Arc::strong_count(d))
            .sum::<usize>();
        states += j.comps.len() * size_of::<CompState>();
        tries += j.record.try_times.capacity() * size_of::<i64>();
    }
    let inline = jobs * size_of::<JobState>();
    let rest = live as i64 - (components + states + tries + boxes + inline) as i64;
    let per = |b: usize| b as f64 / jobs as f64;
    println!(
        "memory/{policy}: per job: JobState {:.0} + Vec<Component> {:.0} + Vec<CompState> {:.0} \
         + try_times {:.0} + JobExtra and ComponentDetails boxes {:.0} + the rest (job map's B-tree slack, queue maps) {:.0}",
        per(inline),
        per(components),
        per(states),
        per(tries),
        per(boxes),
        rest as f64 / jobs as f64
    );
}

/// `COALLOC_BENCH_SHAPE=scale`: the jobs of `bench/scale.sh` instead (a name, the user
/// `bench`, two one-processor components running `/bin/true`), read from the native JSON
/// spec as the server reads them.
fn scale_jobs() -> bool {
    std::env::var("COALLOC_BENCH_SHAPE").is_ok_and(|v| v == "scale")
}

fn scale_job(k: usize) -> Job {
    let text = format!(
        r#"{{"name": "j{k}", "user": "bench", "kind": "unordered", "component": [
        {{"count": 1, "executable": "/bin/true"}}, {{"count": 1, "executable": "/bin/true"}}]}}"#
    );
    coalloc_core::spec::native::from_json(&text).expect("a valid job")
}

fn main() {
    let jobs = std::env::var("COALLOC_BENCH_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let policies: Vec<String> = match std::env::var("COALLOC_BENCH_POLICIES") {
        Ok(v) => v.split(',').map(|p| p.trim().to_owned()).collect(),
        Err(_) => ["fcfs", "fpfs", "easy"]
            .into_iter()
            .filter(|p| QueueConfig::from_name(p).is_ok())
            .map(str::to_owned)
            .collect(),
    };
    println!(
        "memory: size_of JobState {} (Job {}, JobRecord {}), Component {}, CompState {}, \
         JobExtra {}, ComponentDetails {}",
        size_of::<JobState>(),
        size_of::<Job>(),
        size_of::<JobRecord>(),
        size_of::<Component>(),
        size_of::<CompState>(),
        size_of::<JobExtra>(),
        size_of::<ComponentDetails>()
    );
    for p in policies {
        measure(&p, jobs);
    }
}
