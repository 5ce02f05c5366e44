//! The sans-IO side of a pull (DESIGN.md "Sites apart" 1): no file, socket or clock here.
//! The pump asks [`Pull::next_range`], fetches those bytes however its transport does, and
//! hands them to [`Pull::on_data`]; [`Pull::finish`] checks the size and the BLAKE3 checksum
//! the replica catalog holds. A pull resumed after a cut ([`Pull::resumed`]) asks only for
//! the rest; the bytes before it are not seen here, so its checksum is the destination's to
//! check (its commit hashes the whole file, see `coalloc_backends::files`).

pub use coalloc_backends::files::CHUNK;

/// What went wrong with the bytes (not with the transport).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullError {
    #[error("bytes at offset {got}, expected offset {want}")]
    OutOfOrder { want: u64, got: u64 },
    #[error("more bytes than the file's {size}")]
    TooLong { size: u64 },
    #[error("the file ended at {have} bytes of {size}")]
    Short { have: u64, size: u64 },
    #[error("checksum mismatch: expected blake3 {want}, got {got}")]
    Checksum { want: String, got: String },
}

/// A range to fetch: `len` bytes from `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub offset: u64,
    pub len: u64,
}

/// One file being pulled.
#[derive(Debug, Clone)]
pub struct Pull {
    size: u64,
    want: String,
    hasher: blake3::Hasher,
    have: u64,
    /// Every byte went through the hasher (not a resumed pull).
    whole: bool,
}

impl Pull {
    /// A pull of a file of `size` bytes whose BLAKE3 is `blake3` (hex).
    pub fn new(size: u64, blake3: &str) -> Pull {
        Pull {
            size,
            want: blake3.to_ascii_lowercase(),
            hasher: blake3::Hasher::new(),
            have: 0,
            whole: true,
        }
    }

    /// A pull whose first `offset` bytes are already at the destination.
    pub fn resumed(size: u64, blake3: &str, offset: u64) -> Pull {
        Pull {
            have: offset.min(size),
            whole: offset == 0,
            ..Pull::new(size, blake3)
        }
    }

    /// Bytes received (or resumed) so far.
    pub fn have(&self) -> u64 {
        self.have
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The next range to fetch; `None` once every byte is here.
    pub fn next_range(&self) -> Option<Range> {
        (self.have < self.size).then(|| Range {
            offset: self.have,
            len: CHUNK.min(self.size - self.have),
        })
    }

    /// Every range still to fetch, in order: what [`Pull::next_range`] answers as each one
    /// arrives (a pump may ask for the next ones before the first is in).
    pub fn remaining(&self) -> impl Iterator<Item = Range> + Send + 'static {
        let size = self.size;
        std::iter::successors(self.next_range(), move |r| {
            let offset = r.offset + r.len;
            (offset < size).then(|| Range {
                offset,
                len: CHUNK.min(size - offset),
            })
        })
    }

    /// Bytes that arrived at `offset` (which must be [`Pull::have`]).
    pub fn on_data(&mut self, offset: u64, data: &[u8]) -> Result<(), PullError> {
        if offset != self.have {
            return Err(PullError::OutOfOrder {
                want: self.have,
                got: offset,
            });
        }
        if self.have + data.len() as u64 > self.size {
            return Err(PullError::TooLong { size: self.size });
        }
        self.hasher.update(data);
        self.have += data.len() as u64;
        Ok(())
    }

    /// Every byte is here and the checksum is right (when this pull saw every byte).
    pub fn finish(&self) -> Result<(), PullError> {
        if self.have < self.size {
            return Err(PullError::Short {
                have: self.have,
                size: self.size,
            });
        }
        let got = self.hasher.finalize().to_hex().to_string();
        if self.whole && got != self.want {
            return Err(PullError::Checksum {
                want: self.want.clone(),
                got,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(data: &[u8]) -> String {
        blake3::hash(data).to_hex().to_string()
    }

    #[test]
    fn a_pull_asks_for_chunks_in_order_and_checks_the_checksum() {
        let data: Vec<u8> = (0..(CHUNK * 2 + 7)).map(|i| (i % 251) as u8).collect();
        let mut p = Pull::new(data.len() as u64, &hex(&data));
        let mut ranges = Vec::new();
        while let Some(r) = p.next_range() {
            ranges.push((r.offset, r.len));
            let (a, b) = (r.offset as usize, (r.offset + r.len) as usize);
            p.on_data(r.offset, &data[a..b]).unwrap();
        }
        assert_eq!(ranges, [(0, CHUNK), (CHUNK, CHUNK), (2 * CHUNK, 7)]);
        let ahead: Vec<(u64, u64)> = Pull::resumed(data.len() as u64, &hex(&data), 5)
            .remaining()
            .map(|r| (r.offset, r.len))
            .collect();
        assert_eq!(ahead, [(5, CHUNK), (CHUNK + 5, CHUNK), (2 * CHUNK + 5, 2)]);
        assert_eq!(p.finish(), Ok(()));
    }

    #[test]
    fn a_resumed_pull_asks_only_for_the_rest_and_bad_bytes_are_refused() {
        let data = b"hello, transfer".to_vec();
        let mut p = Pull::new(data.len() as u64, &hex(&data));
        p.on_data(0, &data[..5]).unwrap();
        assert_eq!(p.next_range(), Some(Range { offset: 5, len: 10 }));
        // Resumed after a cut at 5 bytes: only the rest is asked for.
        let r = Pull::resumed(data.len() as u64, &hex(&data), 5);
        assert_eq!(r.next_range(), Some(Range { offset: 5, len: 10 }));
        assert_eq!(
            p.on_data(7, &data[7..]),
            Err(PullError::OutOfOrder { want: 5, got: 7 })
        );
        assert_eq!(p.finish(), Err(PullError::Short { have: 5, size: 15 }));
        p.on_data(5, &data[5..]).unwrap();
        assert_eq!(p.on_data(15, b"x"), Err(PullError::TooLong { size: 15 }));
        assert_eq!(p.finish(), Ok(()));
        // The same length with one byte changed fails the checksum.
        let mut q = Pull::new(15, &hex(&data));
        q.on_data(0, b"hello, transfeR").unwrap();
        assert!(matches!(q.finish(), Err(PullError::Checksum { .. })));
    }
}
