//! Golden values on the traces shipped in `traces/`: job counts, skip counts, filters and
//! the run-time statistics of seed 004's Table II.
//!
//! How the figures were cross-checked: an independent python3 script (standard library
//! only, run once) read each `.gz` with `gzip.open`, split every non-comment line with
//! `str.split()`, applied the same rules (run time < 0 → skipped; processors = field 5, or
//! field 8 when field 5 < 0, < 0 → skipped; more than `max` → dropped; `first` counts job
//! lines), took the mean as an exact `fractions.Fraction`, and found each percentile as the
//! smallest run time x such that `100 · #(values ≤ x) ≥ p · n`, by scanning the distinct
//! values with `bisect` — a different formulation of nearest rank from the index formula
//! the crate uses. Every figure below equals the script's output. The KTH-SP2 max-32 row
//! was also checked a third way with `zcat | awk | sort -n | awk`.

use coalloc_sim::swf::{self, Counts, Filter, RuntimeStats};
use std::path::PathBuf;

fn trace_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../traces")
        .join(name)
}

const KTH: &str = "KTH-SP2-1996-2.1-cln.swf.gz";
const LUBLIN: &str = "lublin_256.swf.gz";

fn read(name: &str, filter: Filter) -> swf::Trace {
    swf::read(trace_path(name), &filter).unwrap()
}

/// (jobs, mean in seconds, p25, p50, p75, p99).
fn figures(trace: &swf::Trace) -> (usize, f64, i64, i64, i64, i64) {
    let s = RuntimeStats::of(&trace.jobs).unwrap();
    (s.jobs, s.mean, s.p25, s.p50, s.p75, s.p99)
}

fn assert_close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-9, "{a} != {b}");
}

#[test]
fn kth_sp2_all_jobs() {
    let t = read(KTH, Filter::default());
    // 28,476 job lines, as the traces README and the header's MaxRecords say.
    assert_eq!(t.header.max_records, Some(28_476));
    assert_eq!(
        t.counts,
        Counts {
            read: 28_476,
            // Job 27313 has -1 in both field 5 and field 8.
            unknown_processors: 1,
            kept: 28_475,
            ..Counts::default()
        }
    );
    assert_close(
        t.counts.kept_percent().unwrap(),
        100.0 * 28_475.0 / 28_476.0,
    );
    let (n, mean, p25, p50, p75, p99) = figures(&t);
    assert_eq!(n, 28_475);
    // python: 8872.164143985952 s = 147.86940239976587 min.
    assert_close(mean, 252_634_874.0 / 28_475.0);
    assert_close(mean / 60.0, 147.869_402_399_765_87);
    assert_eq!((p25, p50, p75, p99), (35, 847, 9806, 77_454));
    // Run time 0 is kept: KTH has 8 such jobs.
    assert_eq!(t.jobs.iter().filter(|j| j.run_time == 0).count(), 8);
}

#[test]
fn kth_sp2_at_most_32_processors() {
    let t = read(KTH, Filter::max_processors(32));
    assert_eq!(
        t.counts,
        Counts {
            read: 28_476,
            unknown_processors: 1,
            too_many_processors: 1_158,
            kept: 27_317,
            ..Counts::default()
        }
    );
    // 27,317 of 28,476 jobs with a known run time: 95.93 %.
    assert_close(t.counts.kept_percent().unwrap(), 95.929_905_885_658_1);
    assert!(t.jobs.iter().all(|j| j.processors().unwrap() <= 32));
    let (n, mean, p25, p50, p75, p99) = figures(&t);
    assert_eq!(n, 27_317);
    // python: 8948.16048614416 s = 149.13600810240266 min.
    assert_close(mean, 8_948.160_486_144_16);
    assert_close(mean / 60.0, 149.136_008_102_402_66);
    assert_eq!((p25, p50, p75, p99), (33, 835, 9859, 78_873));
}

#[test]
fn lublin_256() {
    let t = read(LUBLIN, Filter::default());
    assert_eq!(t.header.max_records, Some(10_000));
    assert_eq!(t.header.max_nodes, Some(256));
    assert_eq!(t.header.max_procs, None);
    assert_eq!(
        t.counts,
        Counts {
            read: 10_000,
            kept: 10_000,
            ..Counts::default()
        }
    );
    assert_eq!(t.counts.kept_percent(), Some(100.0));
    let (n, mean, p25, p50, p75, p99) = figures(&t);
    assert_eq!(n, 10_000);
    // python: 4862.7667 s = 81.04611166666666 min.
    assert_close(mean, 4_862.766_7);
    assert_eq!((p25, p50, p75, p99), (21, 137, 8270, 36_138));
    // Only fields 1, 2, 4, 5, 11 and 15 carry values: requested time falls back to run time.
    let j = t.jobs[0];
    assert_eq!(j.requested_time(), None);
    assert_eq!(j.requested_time_or_run_time(), Some(12_072));
    assert_eq!(j.wait_time(), None);
    assert_eq!(j.start_time(), None);
}

#[test]
fn lublin_256_at_most_32_processors() {
    let t = read(LUBLIN, Filter::max_processors(32));
    assert_eq!(t.counts.too_many_processors, 1_206);
    assert_eq!(t.counts.kept, 8_794);
    assert_close(t.counts.kept_percent().unwrap(), 87.94);
    let (n, mean, p25, p50, p75, p99) = figures(&t);
    assert_eq!(n, 8_794);
    // python: 4095.0367295883557 s.
    assert_close(mean, 4_095.036_729_588_355_7);
    assert_eq!((p25, p50, p75, p99), (19, 98, 6312, 34_284));
}

#[test]
fn first_n_jobs() {
    let t = read(
        KTH,
        Filter {
            first: Some(1000),
            ..Filter::default()
        },
    );
    assert_eq!(t.counts.read, 1000);
    assert_eq!(t.counts.kept, 1000);
    assert_eq!(t.jobs.first().unwrap().job_number, 15);
    assert_eq!(t.jobs.last().unwrap().job_number, 1014);
    // python: mean 4346.731 s; percentiles 17, 36, 875, 53327.
    assert_eq!(figures(&t), (1000, 4_346.731, 17, 36, 875, 53_327));

    // `first` counts job lines before the size filter (seed 004: "the first 50,000 jobs",
    // then jobs over 32 nodes removed).
    let t = read(
        KTH,
        Filter {
            first: Some(1000),
            max_processors: Some(32),
            ..Filter::default()
        },
    );
    assert_eq!(t.counts.read, 1000);
    assert_eq!(t.counts.too_many_processors, 67);
    assert_eq!(t.counts.kept, 933);
    let (n, mean, p25, p50, p75, p99) = figures(&t);
    assert_eq!(n, 933);
    assert_close(mean, 4_226.361_200_428_724);
    assert_eq!((p25, p50, p75, p99), (16, 32, 825, 53_327));

    let t = read(
        LUBLIN,
        Filter {
            first: Some(0),
            ..Filter::default()
        },
    );
    assert_eq!(t.counts, Counts::default());
    assert!(t.jobs.is_empty());
    assert_eq!(RuntimeStats::of(&t.jobs), None);
    // The header before the first job line is still read.
    assert_eq!(t.header.max_records, Some(10_000));
}

#[test]
fn submit_window() {
    let all = read(LUBLIN, Filter::default());
    let (lo, hi) = (all.jobs[100].submit_time, all.jobs[200].submit_time);
    let t = read(
        LUBLIN,
        Filter {
            submit_window: Some(lo..hi),
            ..Filter::default()
        },
    );
    let expected: Vec<_> = all
        .jobs
        .iter()
        .filter(|j| (lo..hi).contains(&j.submit_time))
        .copied()
        .collect();
    assert_eq!(t.jobs, expected);
    assert_eq!(t.counts.read, expected.len());
    assert_eq!(t.counts.outside_window, 10_000 - expected.len());
}

#[test]
fn kth_header_is_kept() {
    let t = read(KTH, Filter::default());
    let h = &t.header;
    assert_eq!(h.get("Version"), Some("2.2"));
    assert_eq!(h.get("Acknowledge"), Some("Lars Malinowsky"));
    assert_eq!(
        h.get("Information"),
        Some("http://www.pdc.kth.se/\nhttp://www.cs.huji.ac.il/labs/parallel/workload/")
    );
    assert_eq!(h.max_jobs, Some(28_490));
    assert_eq!(h.max_nodes, Some(100));
    assert_eq!(h.max_procs, Some(100));
    assert_eq!(h.unix_start_time, Some(843_480_031));
    assert_eq!(h.get("EndTime"), Some("Fri Aug 29 10:55:01 CEST 1997"));
    assert_eq!(h.comments.first().unwrap(), "; Version: 2.2");
    assert_eq!(
        h.get_all("Note").collect::<Vec<_>>(),
        [
            "uses the EASY scheduler",
            "THIS IS A CLEANED VERSION OF THE LOG!\nThe filter used to produce it was\njob<=14 (14 jobs removed)"
        ]
    );
    // Every line of the header is kept verbatim.
    assert_eq!(h.comments.len(), 24);
    let first = t.jobs[0];
    assert_eq!(
        first.to_swf_line(),
        "15 599850 192180 3477 4 -1 -1 4 53940 -1 1 12 12 -1 -1 -1 -1 -1"
    );
    assert_eq!(first.start_time(), Some(599_850 + 192_180));
    assert_eq!(first.status(), Some(1));
    assert_eq!(first.average_cpu_time(), None);
}

#[test]
fn plain_text_and_gzip_give_the_same_trace() {
    let gz = std::fs::read(trace_path(KTH)).unwrap();
    let text = swf::decompress(&gz).unwrap().into_owned();
    assert_eq!(text.len(), 2_620_495);
    let a = swf::parse(&gz, &Filter::default()).unwrap();
    let b = swf::parse(&text, &Filter::default()).unwrap();
    let c = swf::parse_text(&text, &Filter::default()).unwrap();
    assert_eq!(a, b);
    assert_eq!(b, c);
}
