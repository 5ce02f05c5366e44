//! The reader: gzip detection, line splitting and the field scanner.

use super::{Counts, Filter, Header, Job, SwfError, Trace, FIELD_NAMES};
use flate2::read::MultiGzDecoder;
use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

/// Read an SWF file (plain or gzip-compressed) and keep the jobs `filter` selects.
///
/// An unreadable file is [`SwfError::Io`] (the message is the system's, e.g. `No such
/// file or directory (os error 2)`); the file name is left to the caller
/// ([`SwfError::with_file`]).
pub fn read(path: impl AsRef<Path>, filter: &Filter) -> Result<Trace, SwfError> {
    let bytes = std::fs::read(path).map_err(|e| SwfError::Io(e.to_string()))?;
    parse(&bytes, filter)
}

/// [`read`], keeping of each kept job only what `map` makes of it (jobs it maps to `None`
/// are left out too), and no header or counts: a caller that needs a few fields of every
/// job holds those alone, never the whole jobs (a 250,000-job trace is 36 MB of [`Job`]s).
pub fn read_map<T>(
    path: impl AsRef<Path>,
    filter: &Filter,
    map: impl FnMut(Job) -> Option<T>,
) -> Result<Vec<T>, SwfError> {
    let bytes = std::fs::read(path).map_err(|e| SwfError::Io(e.to_string()))?;
    parse_map(&bytes, filter, map)
}

/// [`parse_map`] of an SWF file's bytes, handing each kept job's `map` to `keep` as it is
/// read instead of keeping them, on the calling thread alone (gzip inflated as the lines are
/// read): a reader on a thread of its own passes jobs on while it reads (`coalloc replay`
/// runs the trace's start meanwhile, [`crate::replay::replay_file`]). Reading stops early,
/// with no error, when `keep` returns false.
pub fn parse_each<T>(
    bytes: &[u8],
    filter: &Filter,
    map: impl FnMut(Job) -> Option<T>,
    keep: impl FnMut(T) -> bool,
) -> Result<(), SwfError> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return parse_lines(bytes, filter, map, keep)
            .map(drop)
            .map_err(|e| e.into_swf(SwfError::Io));
    }
    let text = std::io::BufReader::with_capacity(1 << 16, MultiGzDecoder::new(bytes));
    parse_lines(text, filter, map, keep)
        .map(drop)
        .map_err(|e| e.into_swf(SwfError::Gzip))
}

/// About how many jobs `filter` keeps of an SWF file's bytes (plain or gzip-compressed), to
/// reserve room for: one per 60 bytes of text, at most [`Filter::first`].
pub fn job_capacity(bytes: &[u8], filter: &Filter) -> usize {
    let size = if bytes.starts_with(&[0x1f, 0x8b]) {
        gzip_size_hint(bytes)
    } else {
        bytes.len()
    };
    estimate_jobs(size, filter)
}

/// Parse the bytes of an SWF file: decompressed first when they start with the gzip magic
/// bytes, then as [`parse_text`]. The decompressed text is read a line at a time, never
/// held whole (a trace of 250,000 jobs is over 20 MB of text).
pub fn parse(bytes: &[u8], filter: &Filter) -> Result<Trace, SwfError> {
    parse_bytes(bytes, filter, Some).map(trace)
}

/// [`parse`] as [`read_map`] reads.
pub fn parse_map<T>(
    bytes: &[u8],
    filter: &Filter,
    map: impl FnMut(Job) -> Option<T>,
) -> Result<Vec<T>, SwfError> {
    parse_bytes(bytes, filter, map).map(|(_, jobs, _)| jobs)
}

/// What [`parse_lines`] reads: the header, the kept jobs as `map` made them, the counts.
type Parts<T> = (Header, Vec<T>, Counts);

/// A whole trace from its parts.
fn trace((header, jobs, counts): Parts<Job>) -> Trace {
    Trace {
        header,
        jobs,
        counts,
    }
}

/// Plain or gzip-compressed bytes through [`parse_lines`] (gzip inflated ahead on a second
/// thread), into a vector.
fn parse_bytes<T>(
    bytes: &[u8],
    filter: &Filter,
    map: impl FnMut(Job) -> Option<T>,
) -> Result<Parts<T>, SwfError> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return text_parts(bytes, filter, map);
    }
    let mut jobs = Vec::with_capacity(job_capacity(bytes, filter));
    let keep = |job| {
        jobs.push(job);
        true
    };
    let (header, counts) =
        super::ahead::inflated(bytes, |text| parse_lines(text, filter, map, keep))
            .map_err(|e| e.into_swf(SwfError::Gzip))?;
    Ok((header, jobs, counts))
}

/// Plain text through [`parse_lines`].
fn text_parts<T>(
    text: &[u8],
    filter: &Filter,
    map: impl FnMut(Job) -> Option<T>,
) -> Result<Parts<T>, SwfError> {
    let mut jobs = Vec::with_capacity(estimate_jobs(text.len(), filter));
    let keep = |job| {
        jobs.push(job);
        true
    };
    // A slice is read without I/O errors; `Io` names one if it ever came.
    let (header, counts) =
        parse_lines(text, filter, map, keep).map_err(|e| e.into_swf(SwfError::Io))?;
    Ok((header, jobs, counts))
}

/// The uncompressed size a gzip file's last four bytes give (mod 2^32), bounded so that a
/// corrupt trailer cannot ask for much: a capacity hint.
fn gzip_size_hint(bytes: &[u8]) -> usize {
    match bytes.len() {
        n if n >= 18 => {
            let t: [u8; 4] = bytes[n - 4..].try_into().unwrap_or([0; 4]);
            (u32::from_le_bytes(t) as usize).min(n.saturating_mul(32))
        }
        _ => 0,
    }
}

/// The bytes themselves, or, when they start with the gzip magic bytes `1f 8b`, their
/// decompressed content (every gzip member, as `gzip -d` does).
pub fn decompress(bytes: &[u8]) -> Result<Cow<'_, [u8]>, SwfError> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(Cow::Borrowed(bytes));
    }
    let mut out = Vec::with_capacity(gzip_size_hint(bytes));
    MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .map_err(|e| SwfError::Gzip(e.to_string()))?;
    Ok(Cow::Owned(out))
}

/// Parse SWF text (not compressed; bytes, so that a comment in Latin-1 is no error) and
/// keep the jobs `filter` selects.
pub fn parse_text(text: &[u8], filter: &Filter) -> Result<Trace, SwfError> {
    text_parts(text, filter, Some).map(trace)
}

/// Why [`parse_lines`] stopped: the text, or the reader under it (a corrupt gzip stream).
enum LineError {
    Swf(SwfError),
    Read(std::io::Error),
}

impl LineError {
    fn into_swf(self, read: fn(String) -> SwfError) -> SwfError {
        match self {
            LineError::Swf(e) => e,
            LineError::Read(e) => read(e.to_string()),
        }
    }
}

/// The parser: SWF text from `input`, a line at a time. Reading stops after
/// [`Filter::first`] job lines, so the rest of a compressed file is never decompressed, or
/// when `keep` returns false. Each kept job goes through `map`, and what it makes goes to
/// `keep` (`None`: left out, but counted as kept).
fn parse_lines<T>(
    mut input: impl std::io::BufRead,
    filter: &Filter,
    mut map: impl FnMut(Job) -> Option<T>,
    mut keep: impl FnMut(T) -> bool,
) -> Result<(Header, Counts), LineError> {
    let mut header = Header::default();
    let mut open_entry = false;
    let mut counts = Counts::default();
    let mut records = 0usize;
    let mut buf = Vec::with_capacity(256);
    let mut line_no = 0usize;
    loop {
        buf.clear();
        if input.read_until(b'\n', &mut buf).map_err(LineError::Read)? == 0 {
            break;
        }
        line_no += 1;
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let Some(start) = line.iter().position(|&b| !is_space(b)) else {
            continue; // blank
        };
        if line[start] == b';' {
            header.push_comment(line, &mut open_entry);
            continue;
        }
        open_entry = false;
        if filter.first.is_some_and(|n| records >= n) {
            break;
        }
        records += 1;
        let job = parse_job(line, start, line_no).map_err(LineError::Swf)?;
        if job.submit_time().is_none() {
            counts.unknown_submit_time += 1;
        } else if filter
            .submit_window
            .as_ref()
            .is_some_and(|w| !w.contains(&job.submit_time))
        {
            counts.outside_window += 1;
            continue;
        } else if job.run_time().is_none() {
            counts.unknown_run_time += 1;
        } else {
            match job.processors() {
                None => counts.unknown_processors += 1,
                Some(p) if filter.max_processors.is_some_and(|max| p > max) => {
                    counts.too_many_processors += 1
                }
                Some(_) => {
                    counts.kept += 1;
                    if let Some(t) = map(job) {
                        if !keep(t) {
                            break;
                        }
                    }
                }
            }
        }
        counts.read += 1;
    }
    Ok((header, counts))
}

/// A capacity hint for `bytes` of text: about one job per 60 bytes (archive lines are 70 to
/// 100 bytes).
fn estimate_jobs(bytes: usize, filter: &Filter) -> usize {
    let guess = bytes / 60 + 1;
    filter.first.map_or(guess, |n| n.min(guess))
}

/// Whitespace between fields: space, tab, carriage return, vertical tab, form feed.
#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c')
}

/// Parse one job line whose first non-blank byte is at `start`.
///
/// A field that is an optional `-` and at most 18 digits (every whole-number field of an
/// archive log) is read in the same pass that finds its end; any other token (field 6's
/// decimals, a long or malformed number) goes through [`parse_int`] or [`parse_decimal`],
/// which also name what is wrong with it.
fn parse_job(line: &[u8], start: usize, line_no: usize) -> Result<Job, SwfError> {
    let mut ints = [0i64; 17];
    let mut cpu = 0.0f64;
    let mut n = 0usize; // fields seen
    let mut i = start;
    let mut end_of_last = start;
    let len = line.len();
    loop {
        while i < len && is_space(line[i]) {
            i += 1;
        }
        if i == len {
            break;
        }
        let s = i;
        if n != 5 && n < 18 {
            // The fast way: sign, digits, then a space or the end of the line.
            let neg = line[i] == b'-';
            let digits = i + usize::from(neg);
            let mut j = digits;
            let mut v: i64 = 0;
            while j < len {
                let d = line[j].wrapping_sub(b'0');
                if d > 9 {
                    break;
                }
                v = v.wrapping_mul(10).wrapping_add(i64::from(d));
                j += 1;
            }
            if j > digits && j - digits <= 18 && (j == len || is_space(line[j])) {
                ints[if n < 5 { n } else { n - 1 }] = if neg { -v } else { v };
                n += 1;
                i = j;
                end_of_last = j;
                continue;
            }
        }
        while i < len && !is_space(line[i]) {
            i += 1;
        }
        if n == 18 {
            let extra = 1 + count_fields(&line[i..]);
            return Err(SwfError::FieldCount {
                line: line_no,
                column: s + 1,
                found: 18 + extra,
            });
        }
        let tok = &line[s..i];
        let bad = |expected| SwfError::NotANumber {
            line: line_no,
            column: s + 1,
            field: n + 1,
            name: FIELD_NAMES[n],
            text: excerpt(tok),
            expected,
        };
        if n == 5 {
            cpu = parse_decimal(tok).ok_or_else(|| bad("a number"))?;
        } else {
            let v = match parse_int(tok) {
                Ok(v) => v,
                Err(IntError::NotANumber) => return Err(bad("a whole number")),
                Err(IntError::Overflow) => {
                    return Err(SwfError::OutOfRange {
                        line: line_no,
                        column: s + 1,
                        field: n + 1,
                        name: FIELD_NAMES[n],
                        text: excerpt(tok),
                    })
                }
            };
            ints[if n < 5 { n } else { n - 1 }] = v;
        }
        n += 1;
        end_of_last = i;
    }
    if n < 18 {
        return Err(SwfError::FieldCount {
            line: line_no,
            column: end_of_last + 1,
            found: n,
        });
    }
    let [job_number, submit_time, wait_time, run_time, allocated_processors, used_memory, requested_processors, requested_time, requested_memory, status, user_id, group_id, executable_number, queue_number, partition_number, preceding_job_number, think_time] =
        ints;
    Ok(Job {
        job_number,
        submit_time,
        wait_time,
        run_time,
        allocated_processors,
        average_cpu_time: cpu,
        used_memory,
        requested_processors,
        requested_time,
        requested_memory,
        status,
        user_id,
        group_id,
        executable_number,
        queue_number,
        partition_number,
        preceding_job_number,
        think_time,
    })
}

fn count_fields(rest: &[u8]) -> usize {
    rest.split(|&b| is_space(b))
        .filter(|t| !t.is_empty())
        .count()
}

/// The offending text for a message: at most 40 characters.
fn excerpt(tok: &[u8]) -> String {
    let s = String::from_utf8_lossy(tok);
    match s.char_indices().nth(40) {
        Some((cut, _)) => format!("{}...", &s[..cut]),
        None => s.into_owned(),
    }
}

enum IntError {
    NotANumber,
    Overflow,
}

/// An optional `-`, then ASCII digits, in `i64`.
fn parse_int(tok: &[u8]) -> Result<i64, IntError> {
    let (neg, digits) = match tok.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, tok),
    };
    if digits.is_empty() {
        return Err(IntError::NotANumber);
    }
    let mut v: i64 = 0;
    let mut overflow = false;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return Err(IntError::NotANumber);
        }
        if !overflow {
            // Accumulate on the sign's side so that i64::MIN fits.
            let next = v.checked_mul(10).and_then(|x| {
                if neg {
                    x.checked_sub(i64::from(d))
                } else {
                    x.checked_add(i64::from(d))
                }
            });
            match next {
                Some(x) => v = x,
                None => overflow = true,
            }
        }
    }
    if overflow {
        Err(IntError::Overflow)
    } else {
        Ok(v)
    }
}

/// An optional `-`, digits, and at most one `.` (`12`, `0.03`, `-1`, `5.`, `.5`).
///
/// A token of at most 15 digits is one division, as `str::parse` gives it without its general
/// algorithm: the digits as an integer below 2^53 and a power of ten up to 10^15 are both
/// exact doubles, so the quotient rounds correctly (Clinger's fast path). Longer ones go to
/// `str::parse`.
fn parse_decimal(tok: &[u8]) -> Option<f64> {
    const POW10: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let (neg, digits) = match tok.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, tok),
    };
    // The digits as an integer, how many, and how many after the dot (`None`: no dot).
    let (mut m, mut n, mut scale) = (0u64, 0usize, None);
    for &b in digits {
        match b {
            b'0'..=b'9' => {
                m = m.wrapping_mul(10).wrapping_add(u64::from(b - b'0'));
                n += 1;
                if let Some(k) = scale.as_mut() {
                    *k += 1;
                }
            }
            b'.' if scale.is_none() => scale = Some(0usize),
            _ => return None,
        }
    }
    if n == 0 {
        return None;
    }
    if n > 15 {
        return std::str::from_utf8(tok).ok()?.parse().ok();
    }
    let v = m as f64 / POW10[scale.unwrap_or(0)];
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers() {
        assert!(matches!(parse_int(b"0"), Ok(0)));
        assert!(matches!(parse_int(b"-1"), Ok(-1)));
        assert!(matches!(parse_int(b"9223372036854775807"), Ok(i64::MAX)));
        assert!(matches!(parse_int(b"-9223372036854775808"), Ok(i64::MIN)));
        assert!(matches!(
            parse_int(b"9223372036854775808"),
            Err(IntError::Overflow)
        ));
        assert!(matches!(
            parse_int(b"99999999999999999999x"),
            Err(IntError::NotANumber)
        ));
        for bad in [&b"-"[..], b"", b"+1", b"1.0", b"--1", b"1-"] {
            assert!(matches!(parse_int(bad), Err(IntError::NotANumber)));
        }
    }

    #[test]
    fn decimals() {
        assert_eq!(parse_decimal(b"0.03"), Some(0.03));
        assert_eq!(parse_decimal(b"-1"), Some(-1.0));
        assert_eq!(parse_decimal(b"142.00"), Some(142.0));
        assert_eq!(parse_decimal(b"5."), Some(5.0));
        assert_eq!(parse_decimal(b".5"), Some(0.5));
        for bad in [&b"."[..], b"-", b"1e5", b"1.2.3", b"inf", b"NaN", b"+1"] {
            assert_eq!(
                parse_decimal(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    proptest::proptest! {
        /// The fast paths give what the general ones give: `str::parse` for decimals and
        /// whole numbers, in a token and in a job line.
        #[test]
        fn fast_paths_agree(int in 0u64..10_000_000_000_000_000_000, frac in 0u64..1_000_000_000_000, cut in 0usize..14, neg: bool, dot_last: bool) {
            let sign = if neg { "-" } else { "" };
            let frac = frac.to_string();
            let frac = &frac[..cut.min(frac.len())];
            let tok = match (frac.is_empty(), dot_last) {
                (true, false) => format!("{sign}{int}"),
                (true, true) => format!("{sign}{int}."),
                _ => format!("{sign}{int}.{frac}"),
            };
            let want: f64 = tok.parse().unwrap();
            let got = parse_decimal(tok.as_bytes()).unwrap();
            proptest::prop_assert_eq!(got.to_bits(), want.to_bits(), "{}", tok);
            let whole = format!("{sign}{int}");
            match (parse_int(whole.as_bytes()), whole.parse::<i64>()) {
                (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a, b),
                (Err(IntError::Overflow), Err(_)) => {}
                _ => proptest::prop_assert!(false, "{}", whole),
            }
            // A job line reads the same field in the pass that finds its end (up to 18
            // digits), else through `parse_int`.
            let line = format!("  {whole} 1 0 5 4 {tok} -1 4 100 -1 1 1 1 -1 -1 -1 -1 -1");
            let job = parse_job(line.as_bytes(), 2, 1);
            match (job, whole.parse::<i64>()) {
                (Ok(job), Ok(b)) => {
                    proptest::prop_assert_eq!(job.job_number, b);
                    proptest::prop_assert_eq!(job.average_cpu_time.to_bits(), want.to_bits());
                }
                (Err(SwfError::OutOfRange { field: 1, .. }), Err(_)) => {}
                (got, _) => proptest::prop_assert!(false, "{}: {:?}", line, got),
            }
        }
    }

    #[test]
    fn gzip_is_recognised_by_magic_bytes_only() {
        assert!(matches!(decompress(b"1 2 3"), Ok(Cow::Borrowed(_))));
        assert!(matches!(decompress(b"\x1f"), Ok(Cow::Borrowed(_))));
        assert!(matches!(decompress(b"\x1f\x8b"), Err(SwfError::Gzip(_))));
    }
}
