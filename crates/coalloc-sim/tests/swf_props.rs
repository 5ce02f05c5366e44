//! Properties: jobs written as SWF lines parse back unchanged, whatever the whitespace and
//! line ends; the keep rules match a plain model of them; and no input makes the parser
//! panic.

use coalloc_sim::swf::{self, Filter, Job};
use proptest::prelude::*;

/// Field values as in real logs (mostly -1 or small) with a share of extremes.
fn int() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => Just(-1i64),
        6 => 0i64..100_000,
        1 => any::<i64>(),
    ]
}

fn cpu() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(-1.0),
        (0u32..10_000_000).prop_map(|c| f64::from(c) / 100.0),
        any::<f64>().prop_filter("finite", |v| v.is_finite()),
    ]
}

fn job() -> impl Strategy<Value = Job> {
    (
        (int(), int(), int(), int(), int(), cpu()),
        (int(), int(), int(), int(), int(), int()),
        (int(), int(), int(), int(), int(), int()),
    )
        .prop_map(|(a, b, c)| Job {
            job_number: a.0,
            submit_time: a.1,
            wait_time: a.2,
            run_time: a.3,
            allocated_processors: a.4,
            average_cpu_time: a.5,
            used_memory: b.0,
            requested_processors: b.1,
            requested_time: b.2,
            requested_memory: b.3,
            status: b.4,
            user_id: b.5,
            group_id: c.0,
            executable_number: c.1,
            queue_number: c.2,
            partition_number: c.3,
            preceding_job_number: c.4,
            think_time: c.5,
        })
}

/// A job every rule keeps: submit time, run time and processors known.
fn known_job() -> impl Strategy<Value = Job> {
    (job(), 0i64..1 << 40, 0i64..1 << 40, 0i64..100_000).prop_map(|(mut j, s, r, p)| {
        j.submit_time = s;
        j.run_time = r;
        j.allocated_processors = p;
        j
    })
}

/// How a line is laid out: separators, indentation, line end, comment lines around it.
#[derive(Debug, Clone)]
struct Layout {
    seps: Vec<&'static str>,
    indent: &'static str,
    crlf: bool,
    comment_before: bool,
    blank_before: bool,
}

fn layout() -> impl Strategy<Value = Layout> {
    (
        prop::collection::vec(
            prop::sample::select(vec![" ", "  ", "\t", " \t ", "     "]),
            17,
        ),
        prop::sample::select(vec!["", " ", "   ", "\t"]),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(seps, indent, crlf, comment_before, blank_before)| Layout {
                seps,
                indent,
                crlf,
                comment_before,
                blank_before,
            },
        )
}

/// Write jobs as an SWF file: `Job::write_swf`'s fields, re-spaced by the layouts.
fn write(jobs: &[(Job, Layout)]) -> String {
    let mut out = String::from("; Version: 2.2\n; MaxRecords: 3\n");
    for (j, l) in jobs {
        let end = if l.crlf { "\r\n" } else { "\n" };
        if l.comment_before {
            out.push_str("; Note: between jobs");
            out.push_str(end);
        }
        if l.blank_before {
            out.push_str("  ");
            out.push_str(end);
        }
        out.push_str(l.indent);
        let line = j.to_swf_line();
        for (k, field) in line.split(' ').enumerate() {
            if k > 0 {
                out.push_str(l.seps[k - 1]);
            }
            out.push_str(field);
        }
        out.push_str(end);
    }
    out
}

/// The keep rules, written out plainly (see `coalloc_sim::swf`).
fn model(jobs: &[Job], max: Option<i64>) -> Vec<Job> {
    jobs.iter()
        .filter(|j| j.submit_time >= 0 && j.run_time >= 0)
        .filter(|j| {
            let p = if j.allocated_processors >= 0 {
                j.allocated_processors
            } else {
                j.requested_processors
            };
            p >= 0 && !matches!(max, Some(m) if p > m)
        })
        .copied()
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn known_jobs_round_trip(jobs in prop::collection::vec((known_job(), layout()), 0..20)) {
        let text = write(&jobs);
        let t = swf::parse(text.as_bytes(), &Filter::default()).unwrap();
        let expected: Vec<Job> = jobs.iter().map(|(j, _)| *j).collect();
        prop_assert_eq!(&t.jobs, &expected);
        prop_assert_eq!(t.counts.read, expected.len());
        prop_assert_eq!(t.counts.kept, expected.len());
        prop_assert_eq!(t.header.max_records, Some(3));
        // Field 6 comes back bit for bit (the sign of zero aside).
        for (a, b) in t.jobs.iter().zip(&expected) {
            prop_assert!(a.average_cpu_time == b.average_cpu_time);
        }
        // The same text, gzip-compressed, gives the same trace.
        let gz = {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(text.as_bytes()).unwrap();
            e.finish().unwrap()
        };
        prop_assert_eq!(swf::parse(&gz, &Filter::default()).unwrap(), t);
    }

    #[test]
    fn any_jobs_are_kept_by_the_rules(
        jobs in prop::collection::vec((job(), layout()), 0..30),
        max in prop::option::of(0i64..50_000),
        first in prop::option::of(0usize..35),
    ) {
        let text = write(&jobs);
        let filter = Filter { max_processors: max, first, ..Filter::default() };
        let t = swf::parse(text.as_bytes(), &filter).unwrap();
        let read: Vec<Job> = jobs.iter().map(|(j, _)| *j).take(first.unwrap_or(usize::MAX)).collect();
        prop_assert_eq!(&t.jobs, &model(&read, max));
        let c = t.counts;
        prop_assert_eq!(c.read, read.len());
        prop_assert_eq!(
            c.read,
            c.unknown_submit_time + c.unknown_run_time + c.unknown_processors
                + c.too_many_processors + c.kept
        );
        prop_assert_eq!(c.unknown_run_time, read.iter().filter(|j| j.submit_time >= 0 && j.run_time < 0).count());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = swf::parse(&bytes, &Filter::default());
        let mut gz = vec![0x1f, 0x8b];
        gz.extend_from_slice(&bytes);
        let _ = swf::parse(&gz, &Filter::default());
    }

    #[test]
    fn damaged_lines_give_positioned_errors(
        j in job(),
        at in any::<prop::sample::Index>(),
        with in prop::sample::select(vec![b'x', b'.', b'-', b' ', b'\t', b';', 0xffu8, b'e']),
    ) {
        let mut line = j.to_swf_line().into_bytes();
        let i = at.index(line.len());
        line[i] = with;
        let text = [b"; h\n".as_slice(), &line, b"\n"].concat();
        match swf::parse(&text, &Filter::default()) {
            Ok(t) => prop_assert!(t.counts.read <= 1),
            Err(e) => {
                let (l, c) = e.position().unwrap();
                prop_assert_eq!(l, 2);
                prop_assert!(c >= 1 && c <= line.len() + 1);
            }
        }
    }
}
