//! The pump of a pull between folders of this machine (local sites): the source is read at
//! the offsets the [`Pull`] asks for, the bytes are appended to `DEST.part`, and the part
//! file is renamed to `DEST` only when the checksum is right. A source that fails half-way
//! (a cut) is opened again and the pull resumes from the bytes already written, a few times;
//! a later transfer of the same file to the same place resumes from the part file too.

use super::session::{Pull, CHUNK};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where bytes come from, by offset.
pub trait Source {
    /// Read up to `buf.len()` bytes at `offset`; 0 means the end.
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize>;
    /// Start again after an error (reopen a file, reconnect).
    fn reopen(&mut self) -> std::io::Result<()>;
}

/// A file on this machine.
pub struct FileSource {
    path: PathBuf,
    file: Option<File>,
}

impl FileSource {
    pub fn new(path: impl Into<PathBuf>) -> FileSource {
        FileSource {
            path: path.into(),
            file: None,
        }
    }
}

impl Source for FileSource {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.file.is_none() {
            self.reopen()?;
        }
        let f = self.file.as_mut().expect("opened above");
        f.seek(SeekFrom::Start(offset))?;
        f.read(buf)
    }

    fn reopen(&mut self) -> std::io::Result<()> {
        self.file = Some(File::open(&self.path)?);
        Ok(())
    }
}

/// What stops a pull from outside, and how often it may retry a failing source.
pub struct Control<'a> {
    pub cancel: &'a AtomicBool,
    pub deadline: Instant,
    /// Tries after a source error before giving up.
    pub retries: u32,
    /// Pause before a retry.
    pub backoff: Duration,
}

/// The part file next to a destination.
pub fn part_of(dest: &Path) -> PathBuf {
    let mut p = dest.as_os_str().to_owned();
    p.push(".part");
    PathBuf::from(p)
}

/// Pull `size` bytes with checksum `blake3` from `src` into `dest`, resuming from
/// `dest.part`; `progress` hears the bytes at the destination after each chunk. Returns
/// the bytes this call moved.
pub fn pull(
    src: &mut dyn Source,
    dest: &Path,
    size: u64,
    blake3: &str,
    ctl: &Control<'_>,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, String> {
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let part = part_of(dest);
    let io = |e: std::io::Error| format!("{}: {e}", part.display());
    let mut p = Pull::new(size, blake3);
    let mut buf = vec![0u8; CHUNK as usize];
    // Resume: hash what an earlier attempt left (a prefix too long is started over).
    if std::fs::metadata(&part).is_ok_and(|m| m.len() > size) {
        std::fs::remove_file(&part).map_err(io)?;
    }
    if let Ok(mut f) = File::open(&part) {
        loop {
            let n = f.read(&mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            p.on_data(p.have(), &buf[..n]).map_err(|e| e.to_string())?;
        }
    }
    let mut out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&part)
        .map_err(io)?;
    let resumed = p.have();
    progress(resumed);
    let mut failures = 0;
    while let Some(r) = p.next_range() {
        if ctl.cancel.load(Ordering::Relaxed) {
            return Err("cancelled".into());
        }
        if Instant::now() > ctl.deadline {
            return Err(format!("timed out at {} of {size} bytes", p.have()));
        }
        let want = &mut buf[..r.len as usize];
        let n = match src.read_at(r.offset, want) {
            Ok(0) => {
                let e = p.finish().err().map(|e| e.to_string()).unwrap_or_default();
                return Err(format!("the replica is shorter than the catalog says: {e}"));
            }
            Ok(n) => n,
            Err(e) => {
                failures += 1;
                if failures > ctl.retries {
                    return Err(format!(
                        "reading the replica at {} of {size} bytes: {e}",
                        r.offset
                    ));
                }
                tracing::warn!(offset = r.offset, "transfer source failed ({e}); resuming");
                std::thread::sleep(ctl.backoff);
                let _ = src.reopen();
                continue;
            }
        };
        out.write_all(&want[..n]).map_err(io)?;
        p.on_data(r.offset, &want[..n]).map_err(|e| e.to_string())?;
        progress(p.have());
    }
    out.sync_all().map_err(io)?;
    drop(out);
    if let Err(e) = p.finish() {
        // Wrong bytes: a retry must start over, not resume from them.
        let _ = std::fs::remove_file(&part);
        return Err(e.to_string());
    }
    std::fs::rename(&part, dest).map_err(io)?;
    Ok(size - resumed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that fails once at `cut` bytes (a link cut half-way), then serves again.
    struct Cut {
        data: Vec<u8>,
        cut: u64,
        cuts: u32,
        reopened: u32,
    }

    impl Source for Cut {
        fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.cuts > 0 && offset + buf.len() as u64 > self.cut {
                self.cuts -= 1;
                // What made it before the cut is delivered; the rest fails.
                if offset < self.cut {
                    let n = (self.cut - offset) as usize;
                    buf[..n].copy_from_slice(&self.data[offset as usize..self.cut as usize]);
                    return Ok(n);
                }
                return Err(std::io::Error::other("link cut"));
            }
            let a = (offset as usize).min(self.data.len());
            let n = buf.len().min(self.data.len() - a);
            buf[..n].copy_from_slice(&self.data[a..a + n]);
            Ok(n)
        }
        fn reopen(&mut self) -> std::io::Result<()> {
            self.reopened += 1;
            Ok(())
        }
    }

    fn data() -> Vec<u8> {
        (0..(3 * CHUNK + 5)).map(|i| (i * 7 % 253) as u8).collect()
    }

    fn ctl(cancel: &AtomicBool, retries: u32) -> Control<'_> {
        Control {
            cancel,
            deadline: Instant::now() + Duration::from_secs(60),
            retries,
            backoff: Duration::ZERO,
        }
    }

    #[test]
    fn a_cut_half_way_resumes_from_the_offset_and_the_checksum_holds() {
        let dir = tempdir();
        let dest = dir.join("site-b/grid.dat");
        let data = data();
        let sum = blake3::hash(&data).to_hex().to_string();
        let cancel = AtomicBool::new(false);
        // Cut in the middle of the second chunk; the pump retries and goes on.
        let mut src = Cut {
            data: data.clone(),
            cut: CHUNK + CHUNK / 2,
            cuts: 2,
            reopened: 0,
        };
        let mut seen = Vec::new();
        let moved = pull(
            &mut src,
            &dest,
            data.len() as u64,
            &sum,
            &ctl(&cancel, 3),
            &mut |b| seen.push(b),
        )
        .unwrap();
        assert_eq!(moved, data.len() as u64);
        assert_eq!(src.reopened, 1, "one error, one reopen");
        assert!(seen.contains(&(CHUNK + CHUNK / 2)), "{seen:?}");
        assert_eq!(std::fs::read(&dest).unwrap(), data);
        assert!(!part_of(&dest).exists());
    }

    #[test]
    fn a_transfer_given_up_after_a_cut_resumes_from_its_part_file_later() {
        let dir = tempdir();
        let dest = dir.join("grid.dat");
        let data = data();
        let sum = blake3::hash(&data).to_hex().to_string();
        let cancel = AtomicBool::new(false);
        let mut src = Cut {
            data: data.clone(),
            cut: 2 * CHUNK,
            cuts: 5,
            reopened: 0,
        };
        let e = pull(
            &mut src,
            &dest,
            data.len() as u64,
            &sum,
            &ctl(&cancel, 0),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.contains("link cut"), "{e}");
        assert_eq!(std::fs::metadata(part_of(&dest)).unwrap().len(), 2 * CHUNK);
        // The link is back: only the rest moves.
        let mut src = FileSource::new(dir.join("src"));
        std::fs::write(dir.join("src"), &data).unwrap();
        let moved = pull(
            &mut src,
            &dest,
            data.len() as u64,
            &sum,
            &ctl(&cancel, 0),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(moved, CHUNK + 5);
        assert_eq!(std::fs::read(&dest).unwrap(), data);
    }

    #[test]
    fn a_wrong_checksum_or_a_vanished_replica_fails_and_leaves_no_file() {
        let dir = tempdir();
        let dest = dir.join("grid.dat");
        std::fs::write(dir.join("src"), b"abc").unwrap();
        let cancel = AtomicBool::new(false);
        let bad = blake3::hash(b"abd").to_hex().to_string();
        let mut src = FileSource::new(dir.join("src"));
        let e = pull(&mut src, &dest, 3, &bad, &ctl(&cancel, 0), &mut |_| {}).unwrap_err();
        assert!(e.contains("checksum mismatch"), "{e}");
        assert!(!dest.exists() && !part_of(&dest).exists());
        let mut gone = FileSource::new(dir.join("nothing"));
        let e = pull(&mut gone, &dest, 3, &bad, &ctl(&cancel, 0), &mut |_| {}).unwrap_err();
        assert!(e.contains("reading the replica"), "{e}");
        // Cancelled before a byte moved.
        cancel.store(true, Ordering::Relaxed);
        let e = pull(&mut src, &dest, 3, &bad, &ctl(&cancel, 0), &mut |_| {}).unwrap_err();
        assert_eq!(e, "cancelled");
    }

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "coalloc-transfer-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
