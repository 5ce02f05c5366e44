//! Files on a site, for input-file transfers (seed 000 §2.5) and for bringing outputs back
//! (seed 003 §5.2's GASS role): the few operations a transfer needs, as one serializable
//! request ([`FileOp`]) so that an agent site can carry them out on its own file system
//! exactly as a local site does here ([`local`]).
//!
//! A file is written as `PATH.part` by appends at its current end and put in place by a
//! commit that checks the whole part file's size and BLAKE3 checksum: a transfer cut
//! half-way resumes at the part file's length, and a file with wrong bytes never appears.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Bytes read or written at once by callers (a transfer's chunk).
pub const CHUNK: u64 = 1 << 20;

/// One operation on a site's files. Relative paths are relative to the site's own
/// directory (an agent's state directory; the server's for local sites).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileOp {
    /// Size and BLAKE3 of a whole file.
    Stat { path: String },
    /// Up to `len` bytes at `offset` (fewer at the end).
    Read { path: String, offset: u64, len: u64 },
    /// The length of `PATH.part` (0 when absent); a part longer than `size` is started over.
    PartLen { path: String, size: u64 },
    /// Append to `PATH.part`, which must be `offset` bytes long.
    Append {
        path: String,
        offset: u64,
        #[serde(with = "b64")]
        data: Vec<u8>,
    },
    /// Remove a file (an evicted cached replica); one already gone is no error.
    Remove { path: String },
    /// Check `PATH.part` (size and BLAKE3) and rename it to `PATH`; a wrong one is removed.
    Commit {
        path: String,
        size: u64,
        blake3: String,
    },
}

/// A [`FileOp`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileAnswer {
    Stat {
        size: u64,
        blake3: String,
    },
    Data(#[serde(with = "b64")] Vec<u8>),
    Len(u64),
    /// Done; the file's absolute path on the site.
    Done(String),
}

/// A file's size and BLAKE3 (hex), read whole.
pub fn stat(path: &Path) -> std::io::Result<(u64, String)> {
    let mut f = File::open(path)?;
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; CHUNK as usize];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        size += n as u64;
    }
    Ok((size, h.finalize().to_hex().to_string()))
}

/// The part file next to a destination.
pub fn part_of(dest: &Path) -> PathBuf {
    let mut p = dest.as_os_str().to_owned();
    p.push(".part");
    PathBuf::from(p)
}

/// An I/O error, with its path.
fn io(p: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", p.display())
}

/// Carry out `op` on this machine's file system, relative paths under `base`.
pub fn local(base: &Path, op: FileOp) -> Result<FileAnswer, String> {
    let at = |p: &str| base.join(p);
    match op {
        FileOp::Stat { path } => {
            let p = at(&path);
            let (size, blake3) = stat(&p).map_err(io(&p))?;
            Ok(FileAnswer::Stat { size, blake3 })
        }
        FileOp::Read { path, offset, len } => {
            let p = at(&path);
            let mut f = File::open(&p).map_err(io(&p))?;
            f.seek(SeekFrom::Start(offset)).map_err(io(&p))?;
            let mut data = Vec::new();
            f.take(len.min(4 * CHUNK))
                .read_to_end(&mut data)
                .map_err(io(&p))?;
            Ok(FileAnswer::Data(data))
        }
        FileOp::PartLen { path, size } => {
            let part = part_of(&at(&path));
            let len = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
            if len > size {
                std::fs::remove_file(&part).map_err(io(&part))?;
                return Ok(FileAnswer::Len(0));
            }
            Ok(FileAnswer::Len(len))
        }
        FileOp::Append { path, offset, data } => {
            let dest = at(&path);
            if let Some(dir) = dest.parent() {
                std::fs::create_dir_all(dir).map_err(io(dir))?;
            }
            let part = part_of(&dest);
            let mut f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&part)
                .map_err(io(&part))?;
            let len = f.metadata().map_err(io(&part))?.len();
            if len != offset {
                return Err(format!(
                    "{}: {len} bytes, an append at {offset}",
                    part.display()
                ));
            }
            f.write_all(&data).map_err(io(&part))?;
            Ok(FileAnswer::Len(offset + data.len() as u64))
        }
        FileOp::Remove { path } => {
            let p = at(&path);
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&p)(e)),
                _ => Ok(FileAnswer::Done(p.to_string_lossy().into_owned())),
            }
        }
        FileOp::Commit { path, size, blake3 } => {
            let dest = at(&path);
            let part = part_of(&dest);
            let (got_size, got) = stat(&part).map_err(io(&part))?;
            if got_size != size || !got.eq_ignore_ascii_case(&blake3) {
                let _ = std::fs::remove_file(&part);
                return Err(format!(
                    "checksum mismatch at the destination: expected {size} bytes with blake3 {blake3}, got {got_size} with {got}"
                ));
            }
            File::open(&part)
                .and_then(|f| f.sync_all())
                .map_err(io(&part))?;
            std::fs::rename(&part, &dest).map_err(io(&dest))?;
            Ok(FileAnswer::Done(dest.to_string_lossy().into_owned()))
        }
    }
}

/// Bytes as base64 in JSON (agent links carry JSON text).
mod b64 {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_resume_at_the_part_length_and_a_wrong_commit_leaves_no_file() {
        let base = std::env::temp_dir().join(format!("coalloc-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let op = |op| local(&base, op);
        let len = |size| {
            op(FileOp::PartLen {
                path: "d/f".into(),
                size,
            })
        };
        assert_eq!(len(10), Ok(FileAnswer::Len(0)));
        let append = |offset, data: &[u8]| {
            op(FileOp::Append {
                path: "d/f".into(),
                offset,
                data: data.to_vec(),
            })
        };
        assert_eq!(append(0, b"hello"), Ok(FileAnswer::Len(5)));
        assert!(append(3, b"x")
            .unwrap_err()
            .contains("5 bytes, an append at 3"));
        assert_eq!(len(10), Ok(FileAnswer::Len(5)));
        assert_eq!(append(5, b" you"), Ok(FileAnswer::Len(9)));
        let sum = blake3::hash(b"hello you").to_hex().to_string();
        let bad = op(FileOp::Commit {
            path: "d/f".into(),
            size: 9,
            blake3: blake3::hash(b"hello yo!").to_hex().to_string(),
        });
        assert!(bad.unwrap_err().contains("checksum mismatch"));
        assert!(!part_of(&base.join("d/f")).exists() && !base.join("d/f").exists());
        append(0, b"hello you").unwrap();
        let done = op(FileOp::Commit {
            path: "d/f".into(),
            size: 9,
            blake3: sum.clone(),
        });
        assert_eq!(
            done,
            Ok(FileAnswer::Done(base.join("d/f").to_string_lossy().into()))
        );
        assert_eq!(
            op(FileOp::Read {
                path: "d/f".into(),
                offset: 6,
                len: 100
            }),
            Ok(FileAnswer::Data(b"you".to_vec()))
        );
        assert_eq!(
            op(FileOp::Stat { path: "d/f".into() }),
            Ok(FileAnswer::Stat {
                size: 9,
                blake3: sum
            })
        );
        let removed = op(FileOp::Remove { path: "d/f".into() });
        assert!(removed.is_ok() && !base.join("d/f").exists());
        assert!(op(FileOp::Remove { path: "d/f".into() }).is_ok());
        // The wire form carries bytes as base64.
        let wire = serde_json::to_string(&FileAnswer::Data(b"hi".to_vec())).unwrap();
        assert_eq!(wire, r#"{"data":"aGk="}"#);
    }
}
