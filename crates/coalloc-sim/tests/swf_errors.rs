//! Malformed input: every case gives exactly the message shown (line and column first), and
//! no input panics.

use coalloc_sim::swf::{self, Filter, SwfError};

fn err(text: &[u8]) -> String {
    swf::parse(text, &Filter::default())
        .unwrap_err()
        .to_string()
}

const GOOD: &str = "1 0 10 100 4 -1 -1 4 600 -1 1 1 1 -1 -1 -1 -1 -1";

#[test]
fn bad_job_lines() {
    let cases: &[(&str, &str)] = &[
        // 17 fields: the column is just past the last one.
        (
            "; Version: 2\n1 0 10 100 4 -1 -1 4 600 -1 1 1 1 -1 -1 -1 -1\n",
            "2:46: expected 18 fields, found 17",
        ),
        // 19 fields: the column is where the 19th starts.
        (
            "1 0 10 100 4 -1 -1 4 600 -1 1 1 1 -1 -1 -1 -1 -1 7\n",
            "1:50: expected 18 fields, found 19",
        ),
        (
            "1 0 10 100 4 -1 -1 4 600 -1 1 1 1 -1 -1 -1 -1 -1 7 8 9\n",
            "1:50: expected 18 fields, found 21",
        ),
        ("   42\n", "1:6: expected 18 fields, found 1"),
        (
            "1 0 10 1O0 4 -1 -1 4 600 -1 1 1 1 -1 -1 -1 -1 -1\n",
            "1:8: field 4 (run time): `1O0` is not a whole number",
        ),
        (
            "1 0 10 100 4 -1 -1 4 600.5 -1 1 1 1 -1 -1 -1 -1 -1\n",
            "1:22: field 9 (requested time): `600.5` is not a whole number",
        ),
        (
            "1 0 10 100 4 1e3 -1 4 600 -1 1 1 1 -1 -1 -1 -1 -1\n",
            "1:14: field 6 (average CPU time): `1e3` is not a number",
        ),
        (
            "1 0 10 100 4 -1 -1 4 600 -1 1 1 1 -1 -1 -1 -1 x\n",
            "1:47: field 18 (think time): `x` is not a whole number",
        ),
        (
            "1 99999999999999999999 10 100 4 -1 -1 4 600 -1 1 1 1 -1 -1 -1 -1 -1\n",
            "1:3: field 2 (submit time): `99999999999999999999` does not fit in 64 bits",
        ),
        (
            "1\t0 10 100 4 -1 -1 4 600 -1 1 1 1 -1 -1 -1 -1 -1\r\n2 0 10 100 4 -1 -1 4 600 -1 1 1 1 -1 -1 -1 -1 +1\r\n",
            "2:47: field 18 (think time): `+1` is not a whole number",
        ),
        // Long text is cut to 40 characters.
        (
            "1 0 10 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 4\n",
            "1:8: field 4 (run time): `aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...` is not a whole number",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(err(text.as_bytes()), *expected, "{text:?}");
    }
}

#[test]
fn invalid_utf8_in_a_job_line_is_reported_not_panicked_on() {
    let mut text = GOOD.as_bytes().to_vec();
    text[7] = 0xff; // the run time's first digit
    assert_eq!(
        err(&text),
        "1:8: field 4 (run time): `\u{fffd}00` is not a whole number"
    );
}

#[test]
fn errors_carry_their_position() {
    let e = swf::parse(b"\n\n;c\n1 2 3\n", &Filter::default()).unwrap_err();
    assert_eq!(
        e,
        SwfError::FieldCount {
            line: 4,
            column: 6,
            found: 3
        }
    );
    assert_eq!(e.position(), Some((4, 6)));
    assert_eq!(
        e.with_file("t.swf"),
        "t.swf:4:6: expected 18 fields, found 3"
    );
}

#[test]
fn a_bad_line_after_first_n_jobs_is_not_read() {
    let text = format!("{GOOD}\n{GOOD}\nnot a job\n");
    let t = swf::parse(
        text.as_bytes(),
        &Filter {
            first: Some(2),
            ..Filter::default()
        },
    )
    .unwrap();
    assert_eq!(t.counts.read, 2);
    assert_eq!(
        err(text.as_bytes()),
        "3:1: field 1 (job number): `not` is not a whole number"
    );
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

#[test]
fn gzip_garbage() {
    // The magic bytes and nothing else that makes sense.
    assert_eq!(
        err(b"\x1f\x8bgarbage, not a gzip stream"),
        "not a valid gzip file: invalid gzip header"
    );
    assert_eq!(
        err(b"\x1f\x8b"),
        "not a valid gzip file: unexpected end of file"
    );
    // A good stream cut short.
    let good = gzip(format!("; Version: 2\n{GOOD}\n").as_bytes());
    assert_eq!(
        err(&good[..good.len() - 10]),
        "not a valid gzip file: incomplete deflate stream"
    );
    // A good header, then a damaged deflate stream.
    let mut bad = good.clone();
    for b in &mut bad[10..20] {
        *b = 0xff;
    }
    assert_eq!(err(&bad), "not a valid gzip file: corrupt deflate stream");
    // A bad checksum.
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 8] ^= 1;
    assert_eq!(
        err(&bad),
        "not a valid gzip file: corrupt gzip stream does not have a matching checksum"
    );
    // The good stream itself parses; with the position of an error inside it.
    assert_eq!(
        swf::parse(&good, &Filter::default()).unwrap().counts.read,
        1
    );
    let bad_line = gzip(b"; x\n1 2\n");
    assert_eq!(err(&bad_line), "2:4: expected 18 fields, found 2");
}

#[test]
fn unreadable_file() {
    let e = swf::read("/nonexistent/trace.swf", &Filter::default()).unwrap_err();
    assert_eq!(e.position(), None);
    assert_eq!(
        e.with_file("/nonexistent/trace.swf"),
        "/nonexistent/trace.swf: cannot read: No such file or directory (os error 2)"
    );
}

#[test]
fn unknown_fields_are_skipped_and_counted() {
    let text = [
        "; MaxProcs: 64",
        "1 0 -1 100 4 -1 -1 4 600 -1 1 1 1 -1 -1 -1 -1 -1", // kept
        "2 5 -1 -1 4 -1 -1 4 600 -1 1 1 1 -1 -1 -1 -1 -1",  // run time unknown
        "3 6 -1 0 4 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1",    // run time 0: kept
        "4 7 -1 10 -1 -1 -1 -1 600 -1 1 1 1 -1 -1 -1 -1 -1", // processors unknown
        "5 8 -1 10 -1 -1 -1 64 600 -1 1 1 1 -1 -1 -1 -1 -1", // field 8 used: 64
        "6 -1 -1 10 2 -1 -1 2 600 -1 1 1 1 -1 -1 -1 -1 -1", // submit unknown
        "",
        "   ",
        "7 9 -1 10 33 12.5 -1 33 600 -1 1 1 1 -1 -1 -1 -1 -1", // 33 > 32
    ]
    .join("\n");
    let t = swf::parse(text.as_bytes(), &Filter::max_processors(32)).unwrap();
    let c = t.counts;
    assert_eq!(
        (
            c.read,
            c.kept,
            c.unknown_run_time,
            c.unknown_processors,
            c.unknown_submit_time,
            c.too_many_processors
        ),
        (7, 2, 1, 1, 1, 2)
    );
    assert_eq!(c.known_run_time(), 5);
    assert_eq!(c.kept_percent(), Some(40.0));
    let kept: Vec<i64> = t.jobs.iter().map(|j| j.job_number).collect();
    assert_eq!(kept, [1, 3]);
    assert_eq!(t.jobs[1].requested_time_or_run_time(), Some(0));
    let all = swf::parse(text.as_bytes(), &Filter::default()).unwrap();
    let kept: Vec<i64> = all.jobs.iter().map(|j| j.job_number).collect();
    assert_eq!(kept, [1, 3, 5, 7]);
    assert_eq!(all.jobs[2].processors(), Some(64));
    assert_eq!(all.jobs[3].average_cpu_time(), Some(12.5));
    assert_eq!(all.header.max_procs, Some(64));
}

#[test]
fn empty_input() {
    let t = swf::parse(b"", &Filter::default()).unwrap();
    assert_eq!(t, swf::Trace::default());
}
