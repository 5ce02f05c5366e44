//! The snapshot's byte form: postcard, a compact, non-self-describing serde format, for
//! state that is written and read by the same build. Integers are varints (signed ones
//! zigzagged), strings and sequences carry their length, structs and tuples their fields in
//! order with no names, enums their variant's index. CBOR spelt every field's name for every
//! job (about 950 bytes a queued job, against about 300 here), and writing and reading it
//! took most of a restart.
//!
//! Not self-describing: `deserialize_any` (untagged or internally tagged enums, flattened
//! fields) is refused, and so is a field skipped one way only.

/// Why a value could not be written or read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CodecError(String);

impl CodecError {
    pub fn new(message: impl Into<String>) -> CodecError {
        CodecError(message.into())
    }
}

impl From<std::io::Error> for CodecError {
    fn from(e: std::io::Error) -> CodecError {
        CodecError(e.to_string())
    }
}

type Result<T, E = CodecError> = std::result::Result<T, E>;

/// Write `value`'s bytes to `writer`, as they are made (no buffer of the whole value), in
/// chunks of [`CHUNK`] bytes. Allocates nothing (a snapshot's forked child uses it).
pub fn to_writer<T: serde::Serialize + ?Sized, W: std::io::Write>(
    value: &T,
    mut writer: W,
) -> Result<W> {
    let mut failed = None;
    let chunks = Chunks {
        writer: &mut writer,
        buf: [0; CHUNK],
        len: 0,
        failed: &mut failed,
    };
    let done = postcard::serialize_with_flavor(value, chunks);
    match (done, failed) {
        (_, Some(e)) => Err(e.into()),
        (Err(e), None) => Err(CodecError(e.to_string())),
        (Ok(()), None) => Ok(writer),
    }
}

/// How many bytes [`to_writer`] gathers before it writes them.
const CHUNK: usize = 16 * 1024;

/// A postcard flavor that gathers bytes in a fixed buffer and hands them to a writer a
/// chunk at a time. postcard's own `to_io` calls the writer once per byte, and behind a
/// `dyn Write` that was most of a snapshot's cost (1.2–2 s for a million queued jobs).
struct Chunks<'a, W> {
    writer: &'a mut W,
    buf: [u8; CHUNK],
    len: usize,
    /// The writer's error, which postcard's own error type cannot carry.
    failed: &'a mut Option<std::io::Error>,
}

impl<W: std::io::Write> Chunks<'_, W> {
    fn flush_buf(&mut self) -> postcard::Result<()> {
        let len = std::mem::take(&mut self.len);
        let r = self.writer.write_all(&self.buf[..len]);
        self.kept(r)
    }

    /// The writer's result, its error kept for [`to_writer`] to report.
    fn kept(&mut self, r: std::io::Result<()>) -> postcard::Result<()> {
        r.map_err(|e| {
            *self.failed = Some(e);
            postcard::Error::SerializeBufferFull
        })
    }
}

impl<W: std::io::Write> postcard::ser_flavors::Flavor for Chunks<'_, W> {
    type Output = ();

    #[inline]
    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        if self.len == CHUNK {
            self.flush_buf()?;
        }
        self.buf[self.len] = byte;
        self.len += 1;
        Ok(())
    }

    #[inline]
    fn try_extend(&mut self, bytes: &[u8]) -> postcard::Result<()> {
        if bytes.len() > CHUNK - self.len {
            self.flush_buf()?;
            if bytes.len() >= CHUNK {
                let r = self.writer.write_all(bytes);
                return self.kept(r);
            }
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
        Ok(())
    }

    fn finalize(mut self) -> postcard::Result<()> {
        self.flush_buf()?;
        let r = self.writer.flush();
        self.kept(r)
    }
}

/// The value `bytes` hold; every byte must be used.
pub fn from_bytes<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T> {
    let (v, rest) = postcard::take_from_bytes(bytes).map_err(|e| CodecError(e.to_string()))?;
    if !rest.is_empty() {
        return Err(CodecError(format!("{} bytes left over", rest.len())));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, VecDeque};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum Kind {
        A,
        B(i64),
        C { x: Option<String>, y: (u8, char) },
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Value {
        n: u64,
        neg: i32,
        f: f64,
        kinds: Vec<Kind>,
        map: BTreeMap<(u32, String), VecDeque<bool>>,
        arr: [u8; 4],
        boxed: Option<Box<Value>>,
        #[serde(skip)]
        skipped: u32,
    }

    #[test]
    fn values_come_back_as_they_were_written() {
        let inner = Value {
            n: u64::MAX,
            neg: i32::MIN,
            f: -0.5,
            kinds: vec![],
            map: BTreeMap::new(),
            arr: [0, 1, 2, 255],
            boxed: None,
            skipped: 0,
        };
        let v = Value {
            n: 300,
            neg: -1,
            f: 1e300,
            kinds: vec![
                Kind::A,
                Kind::B(-7_000_000_000),
                Kind::C {
                    x: Some("é".into()),
                    y: (9, '✓'),
                },
            ],
            map: [((7, "k".to_string()), VecDeque::from([true, false]))].into(),
            arr: [4, 3, 2, 1],
            boxed: Some(Box::new(inner)),
            skipped: 0,
        };
        let bytes = to_writer(&v, Vec::new()).unwrap();
        assert_eq!(from_bytes::<Value>(&bytes).unwrap(), v);
        // Cut short or with bytes left over: an error, not a panic.
        assert!(from_bytes::<Value>(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(from_bytes::<Value>(&longer).is_err());
    }

    /// A writer that takes `room` bytes, then fails.
    struct Full {
        room: usize,
        calls: usize,
    }

    impl std::io::Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.room == 0 {
                return Err(std::io::Error::other("disk full"));
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_value_of_many_chunks_is_written_a_chunk_at_a_time_and_a_failing_writer_is_reported() {
        // Many small fields and strings longer than a chunk, on both sides of its edges.
        let value: Vec<(u64, String)> = (0..100_000u64)
            .map(|i| (i, "x".repeat(if i % 997 == 0 { CHUNK + 3 } else { 3 })))
            .collect();
        let mut counted = Full {
            room: usize::MAX,
            calls: 0,
        };
        to_writer(&value, &mut counted).unwrap();
        let bytes = to_writer(&value, Vec::new()).unwrap();
        assert_eq!(from_bytes::<Vec<(u64, String)>>(&bytes).unwrap(), value);
        assert!(
            counted.calls <= 2 * bytes.len() / CHUNK + 2 * 101,
            "{} writes for {} bytes",
            counted.calls,
            bytes.len()
        );
        let e = to_writer(
            &value,
            Full {
                room: 100_000,
                calls: 0,
            },
        )
        .err()
        .expect("an error");
        assert_eq!(e.to_string(), "disk full");
    }
}
