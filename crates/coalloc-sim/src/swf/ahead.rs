//! Gzip inflated on a second thread, ahead of the parser: a compressed trace's text reaches
//! [`super::parse`] through [`Ahead`], a [`BufRead`] over chunks that another thread
//! inflates meanwhile. Inflating SDSC-BLUE (22 MB of text) is about a twentieth of a whole
//! `coalloc replay`'s instructions, and the parser need not wait for it: the two overlap on
//! a machine of two cores or more (`bench/RESULTS.md`, thirteenth session). The bytes and the
//! errors are the same as one thread's: a corrupt stream is the same `io::Error` at the
//! same place in the text.

use flate2::read::MultiGzDecoder;
use std::io::{self, BufRead, Read};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Bytes of text per chunk.
const CHUNK: usize = 1 << 16;
/// Chunks inflated ahead of the parser at most (and a chunk being filled, one being read).
const DEPTH: usize = 6;
/// The inflating thread's stack (the decoder's state is on the heap).
const STACK: usize = 128 << 10;

/// Run `read` over the text of the gzip stream `bytes` (every member, as `gzip -d` reads),
/// inflated on a scoped thread. When `read` returns before the end (an error in the text,
/// or [`super::Filter::first`] reached), the thread stops at its next chunk.
pub(super) fn inflated<R>(bytes: &[u8], read: impl FnOnce(Ahead) -> R) -> R {
    std::thread::scope(|scope| {
        let (chunks, rx) = sync_channel(DEPTH);
        let (back, spent) = sync_channel(DEPTH + 2);
        // The decoder and every chunk are made here and only used there, and the thread's
        // stack is small: a thread of its own must not cost the process memory.
        let gz = MultiGzDecoder::new(bytes);
        for _ in 0..DEPTH + 2 {
            let _ = back.try_send(vec![0; CHUNK]);
        }
        std::thread::Builder::new()
            .name("swf-inflate".into())
            .stack_size(STACK)
            .spawn_scoped(scope, move || inflate(gz, &chunks, &spent))
            .expect("a thread to inflate the trace");
        read(Ahead {
            rx,
            back,
            chunk: Vec::new(),
            pos: 0,
        })
    })
}

/// The inflating thread: fill chunks (spent ones again when the reader gave them back) and
/// send them, until the end of the stream, an error (sent too), or a reader that is gone.
fn inflate(
    mut gz: MultiGzDecoder<&[u8]>,
    chunks: &SyncSender<io::Result<Vec<u8>>>,
    spent: &Receiver<Vec<u8>>,
) {
    loop {
        let mut chunk = spent.try_recv().unwrap_or_default();
        chunk.resize(CHUNK, 0);
        let mut filled = 0;
        let end = loop {
            match gz.read(&mut chunk[filled..]) {
                Ok(0) => break Ok(true),
                Ok(n) => {
                    filled += n;
                    if filled == CHUNK {
                        break Ok(false);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        chunk.truncate(filled);
        // The text before an error goes first, so that the reader meets it where one
        // thread would have.
        if filled > 0 && chunks.send(Ok(chunk)).is_err() {
            return;
        }
        match end {
            Ok(false) => {}
            Ok(true) => return,
            Err(e) => {
                let _ = chunks.send(Err(e));
                return;
            }
        }
    }
}

/// The reading end: the inflated text, a chunk at a time, in order.
pub(super) struct Ahead {
    rx: Receiver<io::Result<Vec<u8>>>,
    back: SyncSender<Vec<u8>>,
    chunk: Vec<u8>,
    pos: usize,
}

impl BufRead for Ahead {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos == self.chunk.len() {
            // The end of the text (or of an error already returned) is an empty buffer.
            let Ok(next) = self.rx.recv() else {
                return Ok(&[]);
            };
            let spent = std::mem::replace(&mut self.chunk, next?);
            self.pos = 0;
            if spent.capacity() > 0 {
                // For the inflating thread to fill again; dropped if it has ended.
                let _ = self.back.try_send(spent);
            }
        }
        Ok(&self.chunk[self.pos..])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.chunk.len());
    }
}

impl Read for Ahead {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let have = self.fill_buf()?;
        let n = have.len().min(out.len());
        out[..n].copy_from_slice(&have[..n]);
        self.consume(n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::Compression;
    use std::io::Write;

    fn gz(text: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(text).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn the_text_comes_whole_and_in_order_across_chunks_and_members() {
        // Several chunks' worth, in two gzip members.
        let a: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i % 251) as u8).collect();
        let b = b"second member\n".to_vec();
        let mut bytes = gz(&a);
        bytes.extend(gz(&b));
        let mut text = Vec::new();
        inflated(&bytes, |mut r| r.read_to_end(&mut text)).unwrap();
        assert_eq!(text, [a, b].concat());
    }

    #[test]
    fn a_corrupt_stream_is_an_error_after_the_text_before_it() {
        let text: Vec<u8> = b"line\n".repeat(2 * CHUNK);
        let mut bytes = gz(&text);
        let n = bytes.len();
        bytes.truncate(n - 8); // the trailer gone
        let mut single = Vec::new();
        let one = MultiGzDecoder::new(&bytes[..]).read_to_end(&mut single);
        let mut got = Vec::new();
        let two = inflated(&bytes, |mut r| r.read_to_end(&mut got));
        assert!(one.is_err() && two.is_err());
        assert_eq!(got, single);
    }

    #[test]
    fn a_reader_that_stops_early_stops_the_thread() {
        // More chunks than the thread may fill ahead: it must end for the scope to return.
        let bytes = gz(&vec![b'x'; 40 * CHUNK]);
        let first = inflated(&bytes, |mut r| r.fill_buf().map(|b| b.len()));
        assert_eq!(first.unwrap(), CHUNK);
    }
}
