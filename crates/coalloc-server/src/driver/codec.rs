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

/// Write `value`'s bytes to `writer`, as they are made (no buffer of the whole value).
pub fn to_writer<T: serde::Serialize + ?Sized, W: std::io::Write>(
    value: &T,
    writer: W,
) -> Result<W> {
    postcard::to_io(value, writer).map_err(|e| CodecError(e.to_string()))
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
}
