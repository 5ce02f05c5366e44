//! The pump of a pull: it asks the [`Pull`] for ranges, reads them from the replica's site
//! and appends them at the destination site, both through their backends' file operations
//! (`Backend::file`: this machine's file system for local sites, the site's agent for agent
//! sites — the server relays the bytes between two agents that cannot see each other).
//! The replica is read ahead of the appends (two reads in flight), so that the replica's
//! link, the bottleneck when the server relays, is never idle waiting for the destination or
//! for the agent's next read. A read or append that fails (a cut link) is retried after a
//! pause, resuming from the destination's part-file length; the destination commits (size
//! and BLAKE3 checked there) only when every byte is in.

use super::session::Pull;
use coalloc_backends::files::{FileAnswer, FileOp};
use coalloc_backends::Backend;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One end of a transfer: a file on a site.
#[derive(Clone)]
pub struct SiteFile {
    /// The site's backend; `None`: this machine (a file of the server's, staged in).
    pub backend: Option<Arc<dyn Backend>>,
    /// What relative paths are relative to on a site sharing this machine.
    pub base: PathBuf,
    pub path: String,
}

impl SiteFile {
    fn op(&self, op: FileOp) -> Result<FileAnswer, String> {
        match &self.backend {
            Some(b) => b.file(&self.base, op).map_err(|e| e.to_string()),
            None => coalloc_backends::files::local(&self.base, op),
        }
    }

    fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>, String> {
        match self.op(FileOp::Read {
            path: self.path.clone(),
            offset,
            len,
        })? {
            FileAnswer::Data(d) => Ok(d),
            other => Err(format!("a read answered {other:?}")),
        }
    }

    fn part_len(&self, size: u64) -> Result<u64, String> {
        match self.op(FileOp::PartLen {
            path: self.path.clone(),
            size,
        })? {
            FileAnswer::Len(n) => Ok(n),
            other => Err(format!("a part length answered {other:?}")),
        }
    }

    fn append(&self, offset: u64, data: Vec<u8>) -> Result<(), String> {
        self.op(FileOp::Append {
            path: self.path.clone(),
            offset,
            data,
        })
        .map(drop)
    }

    fn commit(&self, size: u64, blake3: &str) -> Result<String, String> {
        match self.op(FileOp::Commit {
            path: self.path.clone(),
            size,
            blake3: blake3.to_owned(),
        })? {
            FileAnswer::Done(p) => Ok(p),
            other => Err(format!("a commit answered {other:?}")),
        }
    }
}

/// Copy a whole file of a site to `to` on this machine (a component's output brought back,
/// seed 003 §5.2's staging out); the bytes copied.
pub fn fetch(src: &SiteFile, to: &std::path::Path) -> Result<u64, String> {
    use std::io::Write;
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut out = std::fs::File::create(to).map_err(|e| format!("{}: {e}", to.display()))?;
    let mut offset = 0;
    loop {
        let data = src.read(offset, coalloc_backends::files::CHUNK)?;
        if data.is_empty() {
            return Ok(offset);
        }
        out.write_all(&data)
            .map_err(|e| format!("{}: {e}", to.display()))?;
        offset += data.len() as u64;
    }
}

/// Reads of the replica in flight at once.
const READERS: usize = 2;

/// How a step of a pull went wrong: for good, or worth resuming.
enum Step {
    Fatal(String),
    Retry(String),
}

/// What stops a pull from outside, and how often it may retry.
pub struct Control<'a> {
    pub cancel: &'a AtomicBool,
    pub deadline: Instant,
    /// Consecutive failed steps before giving up.
    pub retries: u32,
    /// Pause before a retry.
    pub backoff: Duration,
}

/// What a finished pull did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// The file's path at the destination.
    pub path: String,
    /// Bytes this pull moved (a resumed prefix not counted).
    pub moved: u64,
}

/// Pull `size` bytes with checksum `blake3` from `src` to `dest`; `progress` hears the bytes
/// at the destination after each chunk.
pub fn pull(
    src: &SiteFile,
    dest: &SiteFile,
    size: u64,
    blake3: &str,
    ctl: &Control<'_>,
    progress: &mut dyn FnMut(u64),
) -> Result<Pulled, String> {
    let mut failures = 0;
    let mut retry = |what: String| -> Result<(), String> {
        failures += 1;
        if failures > ctl.retries {
            return Err(what);
        }
        tracing::warn!("transfer step failed ({what}); resuming");
        std::thread::sleep(ctl.backoff);
        Ok(())
    };
    // What was at the destination before this call (a part file of an earlier one).
    let mut before = None;
    'resume: loop {
        let have = match dest.part_len(size) {
            Ok(n) => n,
            Err(e) => {
                retry(format!("the destination: {e}"))?;
                continue;
            }
        };
        let before = *before.get_or_insert(have);
        let mut p = Pull::resumed(size, blake3, have);
        progress(have);
        // The replica's site is read ahead of the destination's appends, by READERS calls
        // in flight (chunk k by reader k % READERS), so that its link (the bottleneck, when
        // the server relays) never waits for the other one or for the agent's next read.
        let mut rxs = Vec::with_capacity(READERS);
        let step = std::thread::scope(|scope| {
            for k in 0..READERS {
                let (tx, rx) = sync_channel::<Result<(u64, Vec<u8>), String>>(1);
                rxs.push(rx);
                let ranges = p.remaining().skip(k).step_by(READERS);
                scope.spawn(move || {
                    for r in ranges {
                        let got = src.read(r.offset, r.len).map(|d| (r.offset, d));
                        let failed = got.is_err();
                        if tx.send(got).is_err() || failed {
                            return;
                        }
                    }
                });
            }
            // The receivers go at the end of this closure: a reader still ahead stops at
            // its next chunk.
            let rxs = std::mem::take(&mut rxs);
            let mut chunk = 0;
            while p.next_range().is_some() {
                if ctl.cancel.load(Ordering::Relaxed) {
                    return Err(Step::Fatal("cancelled".into()));
                }
                if Instant::now() > ctl.deadline {
                    return Err(Step::Fatal(format!(
                        "timed out at {} of {size} bytes",
                        p.have()
                    )));
                }
                let got = rxs[chunk % READERS].recv();
                chunk += 1;
                let (offset, data) = match got {
                    Ok(Ok((_, d))) if d.is_empty() => {
                        return Err(Step::Fatal(format!(
                            "the replica is shorter than the catalog says: {} of {size} bytes",
                            p.have()
                        )))
                    }
                    Ok(Ok(got)) => got,
                    Ok(Err(e)) => {
                        return Err(Step::Retry(format!(
                            "reading the replica at {} of {size} bytes: {e}",
                            p.have()
                        )))
                    }
                    Err(_) => return Err(Step::Retry("the reader stopped".into())),
                };
                p.on_data(offset, &data)
                    .map_err(|e| Step::Fatal(e.to_string()))?;
                if let Err(e) = dest.append(offset, data) {
                    return Err(Step::Retry(format!("writing at the destination: {e}")));
                }
                progress(p.have());
            }
            Ok(())
        });
        match step {
            Ok(()) => {}
            Err(Step::Fatal(e)) => return Err(e),
            Err(Step::Retry(e)) => {
                retry(e)?;
                continue 'resume;
            }
        }
        if let Err(e) = p.finish() {
            // Wrong bytes: the part file must go, so that a retry starts over.
            let _ = dest.commit(size, blake3);
            return Err(e.to_string());
        }
        let path = dest.commit(size, blake3)?;
        return Ok(Pulled {
            path,
            moved: size - before,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coalloc_backends::{BackendError, RemoteId, RemoteState, SiteLoad, SubmitRequest};
    use std::sync::Mutex;

    /// A site whose file operations work on this machine but fail `cuts` times once a read
    /// reaches `cut` bytes (a link cut half-way).
    struct Flaky {
        cut: u64,
        cuts: Mutex<u32>,
    }

    impl Backend for Flaky {
        fn submit(&self, _: &SubmitRequest) -> Result<RemoteId, BackendError> {
            unreachable!()
        }
        fn query(&self, _: &[RemoteId]) -> Result<Vec<RemoteState>, BackendError> {
            unreachable!()
        }
        fn cancel(&self, _: &RemoteId) -> Result<(), BackendError> {
            unreachable!()
        }
        fn load(&self) -> Result<SiteLoad, BackendError> {
            unreachable!()
        }
        fn file(&self, base: &std::path::Path, op: FileOp) -> Result<FileAnswer, BackendError> {
            if let FileOp::Read { offset, len, .. } = &op {
                let mut cuts = self.cuts.lock().unwrap();
                if *cuts > 0 && offset + len > self.cut {
                    *cuts -= 1;
                    return Err(BackendError::Unavailable("link cut".into()));
                }
            }
            coalloc_backends::files::local(base, op).map_err(BackendError::Rejected)
        }
    }

    fn setup(name: &str, cut: u64, cuts: u32) -> (SiteFile, SiteFile, Vec<u8>, String) {
        let base = crate::scratch::dir(&format!("pump-{name}"));
        let data: Vec<u8> = (0..(3 * CHUNK + 5)).map(|i| (i * 7 % 253) as u8).collect();
        std::fs::write(base.join("src.dat"), &data).unwrap();
        let sum = blake3::hash(&data).to_hex().to_string();
        let backend: Arc<dyn Backend> = Arc::new(Flaky {
            cut,
            cuts: Mutex::new(cuts),
        });
        let end = |path: &str| SiteFile {
            backend: Some(backend.clone()),
            base: base.clone(),
            path: path.into(),
        };
        (end("src.dat"), end("dst/grid.dat"), data, sum)
    }

    use coalloc_backends::files::CHUNK;

    fn ctl(cancel: &AtomicBool, retries: u32) -> Control<'_> {
        Control {
            cancel,
            deadline: Instant::now() + Duration::from_secs(60),
            retries,
            backoff: Duration::ZERO,
        }
    }

    #[test]
    fn a_cut_half_way_resumes_from_the_destinations_length_and_the_checksum_holds() {
        let (src, dst, data, sum) = setup("cut", CHUNK + CHUNK / 2, 2);
        let cancel = AtomicBool::new(false);
        let mut seen = Vec::new();
        let n = data.len() as u64;
        let done = pull(&src, &dst, n, &sum, &ctl(&cancel, 3), &mut |b| seen.push(b)).unwrap();
        assert_eq!(done.moved, n);
        // One chunk made it before the cut; the resumed pull started there (the readers
        // ahead may meet both cuts at once, or one after the other).
        assert!(
            seen.iter().filter(|&&b| b == CHUNK).count() >= 2,
            "{seen:?}"
        );
        assert!(
            !seen[1..].contains(&0),
            "never from the start again: {seen:?}"
        );
        assert_eq!(std::fs::read(&done.path).unwrap(), data);
    }

    #[test]
    fn a_pull_given_up_after_a_cut_is_resumed_by_the_next_one() {
        let (src, dst, data, sum) = setup("later", 2 * CHUNK + 1, 1);
        let cancel = AtomicBool::new(false);
        let n = data.len() as u64;
        let e = pull(&src, &dst, n, &sum, &ctl(&cancel, 0), &mut |_| {}).unwrap_err();
        assert!(e.contains("link cut"), "{e}");
        let done = pull(&src, &dst, n, &sum, &ctl(&cancel, 0), &mut |_| {}).unwrap();
        // Chunks 0 and 1 are in before the cut (a reader ahead may meet the cut at chunk 3
        // first, and chunk 2 gets in too): only the rest moved.
        assert!(done.moved <= n - 2 * CHUNK, "{} of {n} moved", done.moved);
        assert_eq!(std::fs::read(&done.path).unwrap(), data);
    }

    #[test]
    fn a_wrong_checksum_or_a_vanished_replica_fails_and_leaves_no_file() {
        let (src, dst, data, _) = setup("bad", u64::MAX, 0);
        let cancel = AtomicBool::new(false);
        let n = data.len() as u64;
        let wrong = blake3::hash(b"x").to_hex().to_string();
        let e = pull(&src, &dst, n, &wrong, &ctl(&cancel, 0), &mut |_| {}).unwrap_err();
        assert!(e.contains("checksum mismatch"), "{e}");
        let dest = dst.base.join(&dst.path);
        assert!(!dest.exists());
        assert!(!coalloc_backends::files::part_of(&dest).exists());
        let gone = SiteFile {
            path: "nothing".into(),
            ..src.clone()
        };
        let e = pull(&gone, &dst, n, &wrong, &ctl(&cancel, 0), &mut |_| {}).unwrap_err();
        assert!(e.contains("reading the replica"), "{e}");
        cancel.store(true, Ordering::Relaxed);
        let e = pull(&src, &dst, n, &wrong, &ctl(&cancel, 0), &mut |_| {}).unwrap_err();
        assert_eq!(e, "cancelled");
    }
}
