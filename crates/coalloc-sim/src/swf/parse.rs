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

/// Parse the bytes of an SWF file: decompressed first when they start with the gzip magic
/// bytes, then as [`parse_text`].
pub fn parse(bytes: &[u8], filter: &Filter) -> Result<Trace, SwfError> {
    if let Some(first) = filter.first.filter(|_| bytes.starts_with(&[0x1f, 0x8b])) {
        return parse_text(&decompress_records(bytes, first)?, filter);
    }
    let text = decompress(bytes)?;
    parse_text(&text, filter)
}

/// The start of a gzip file's content, up to the line end after its job line `records + 1`
/// (or the whole content when it has fewer): the first jobs of a long trace without
/// decompressing all of it.
fn decompress_records(bytes: &[u8], records: usize) -> Result<Vec<u8>, SwfError> {
    const CHUNK: usize = 1 << 16;
    let mut gz = MultiGzDecoder::new(bytes);
    let mut out: Vec<u8> = Vec::new();
    // Job lines in `out[..scanned]`, which ends at a line end.
    let (mut scanned, mut found) = (0, 0);
    loop {
        let len = out.len();
        out.resize(len + CHUNK, 0);
        let n = gz
            .read(&mut out[len..])
            .map_err(|e| SwfError::Gzip(e.to_string()))?;
        out.truncate(len + n);
        if n == 0 {
            return Ok(out);
        }
        while let Some(end) = out[scanned..].iter().position(|&b| b == b'\n') {
            let line = &out[scanned..scanned + end];
            if line
                .iter()
                .find(|&&b| !is_space(b))
                .is_some_and(|&b| b != b';')
            {
                found += 1;
            }
            scanned += end + 1;
            // One job line more than asked for: `parse_text` stops there, so the comments
            // before it are read as from the whole file.
            if found > records {
                out.truncate(scanned);
                return Ok(out);
            }
        }
    }
}

/// The bytes themselves, or, when they start with the gzip magic bytes `1f 8b`, their
/// decompressed content (every gzip member, as `gzip -d` does).
pub fn decompress(bytes: &[u8]) -> Result<Cow<'_, [u8]>, SwfError> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(Cow::Borrowed(bytes));
    }
    // The last four bytes of a gzip file give the uncompressed size (mod 2^32): a capacity
    // hint, bounded so that a corrupt trailer cannot ask for much.
    let hint = match bytes.len() {
        n if n >= 18 => {
            let t: [u8; 4] = bytes[n - 4..].try_into().unwrap_or([0; 4]);
            (u32::from_le_bytes(t) as usize).min(n.saturating_mul(32))
        }
        _ => 0,
    };
    let mut out = Vec::with_capacity(hint);
    MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .map_err(|e| SwfError::Gzip(e.to_string()))?;
    Ok(Cow::Owned(out))
}

/// Parse SWF text (not compressed; bytes, so that a comment in Latin-1 is no error) and
/// keep the jobs `filter` selects.
pub fn parse_text(text: &[u8], filter: &Filter) -> Result<Trace, SwfError> {
    let mut header = Header::default();
    let mut open_entry = false;
    let mut jobs = Vec::with_capacity(estimate_jobs(text, filter));
    let mut counts = Counts::default();
    let mut records = 0usize;
    for (index, line) in text.split(|&b| b == b'\n').enumerate() {
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
        let job = parse_job(line, start, index + 1)?;
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
                    jobs.push(job);
                }
            }
        }
        counts.read += 1;
    }
    Ok(Trace {
        header,
        jobs,
        counts,
    })
}

/// A capacity hint: about one job per 60 bytes (archive lines are 70 to 100 bytes).
fn estimate_jobs(text: &[u8], filter: &Filter) -> usize {
    let guess = text.len() / 60 + 1;
    filter.first.map_or(guess, |n| n.min(guess))
}

/// Whitespace between fields: space, tab, carriage return, vertical tab, form feed.
#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c')
}

/// Parse one job line whose first non-blank byte is at `start`.
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
fn parse_decimal(tok: &[u8]) -> Option<f64> {
    let digits = tok.strip_prefix(b"-").unwrap_or(tok);
    let mut seen_digit = false;
    let mut seen_dot = false;
    for &b in digits {
        match b {
            b'0'..=b'9' => seen_digit = true,
            b'.' if !seen_dot => seen_dot = true,
            _ => return None,
        }
    }
    if !seen_digit {
        return None;
    }
    std::str::from_utf8(tok).ok()?.parse().ok()
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

    #[test]
    fn gzip_is_recognised_by_magic_bytes_only() {
        assert!(matches!(decompress(b"1 2 3"), Ok(Cow::Borrowed(_))));
        assert!(matches!(decompress(b"\x1f"), Ok(Cow::Borrowed(_))));
        assert!(matches!(decompress(b"\x1f\x8b"), Err(SwfError::Gzip(_))));
    }
}
