//! The larger traces in `../shared/traces` (not shipped in this repository): every one
//! parses, with the job counts of that folder's README and its counts of unknown run times
//! (SDSC-SP2 5,671, SDSC-BLUE 10,744). When the folder is missing the test says so and
//! passes.

use coalloc_sim::swf::{self, Filter};
use std::path::PathBuf;

/// (file, job lines, jobs with run time -1, jobs with run time 0).
const TRACES: &[(&str, usize, usize, usize)] = &[
    ("KTH-SP2-1996-2.1-cln.swf.gz", 28_476, 0, 8),
    ("CTC-SP2-1996-3.1-cln.swf.gz", 77_222, 0, 17),
    ("SDSC-SP2-1998-4.2-cln.swf.gz", 59_715, 5_671, 10),
    ("SDSC-BLUE-2000-4.2-cln.swf.gz", 243_306, 10_744, 26),
    ("LANL-CM5-1994-4.1-cln.swf.gz", 122_060, 0, 2),
    ("HPC2N-2002-2.2-cln.swf.gz", 202_871, 0, 0),
    ("LCG-2005-1.swf.gz", 188_041, 0, 521),
    ("lublin_256.swf.gz", 10_000, 0, 0),
];

#[test]
fn every_shared_trace_parses_with_its_documented_counts() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    if !dir.is_dir() {
        eprintln!("skipped: {} is not there", dir.display());
        return;
    }
    for &(name, lines, unknown_run_time, zero) in TRACES {
        let t = swf::read(dir.join(name), &Filter::default()).unwrap();
        let c = t.counts;
        assert_eq!(c.read, lines, "{name}");
        assert_eq!(c.unknown_run_time, unknown_run_time, "{name}");
        assert_eq!(c.unknown_submit_time, 0, "{name}");
        assert_eq!(
            c.read,
            c.unknown_run_time + c.unknown_processors + c.kept,
            "{name}"
        );
        assert_eq!(
            t.jobs.iter().filter(|j| j.run_time == 0).count(),
            zero,
            "{name}"
        );
        // Job numbers strictly increase and jobs come in submit order.
        assert!(
            t.jobs
                .windows(2)
                .all(|w| w[0].job_number < w[1].job_number && w[0].submit_time <= w[1].submit_time),
            "{name}"
        );
        if let Some(records) = t.header.max_records {
            // CTC-SP2 and LANL-CM5 count the records before cleaning.
            assert!(records as usize >= lines, "{name}");
        }
    }
}
