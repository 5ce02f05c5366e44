//! Where snapshots are kept (issue 32, item 1): the storage seam's part for them. The driver
//! writes a snapshot to a temporary file in the state directory and syncs it
//! (`driver::snapshot`); the place then makes it the newest snapshot, whole or not at all,
//! and hands the newest back at a restart. [`FilePlace`] renames it to `snapshot.bin` (the
//! embedded default); the PostgreSQL journal's place copies it into the database
//! (`journal::postgres::snapshots`), so that a server on another host finds it.

use std::path::{Path, PathBuf};

/// The bytes of a snapshot read back: the file mapped, or a copy read from a database.
pub enum SnapshotBytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for SnapshotBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            SnapshotBytes::Mapped(m) => m,
            SnapshotBytes::Owned(v) => v,
        }
    }
}

/// Where snapshots are kept.
pub trait SnapshotPlace: Send + Sync {
    /// What to call it in messages.
    fn describe(&self) -> String;

    /// Make `tmp` (written and synced) the newest snapshot, the state after journal entry
    /// `seq`: when this returns Ok it is durable, and a restart reads it; on an error, the
    /// previous snapshot is still the newest. Called from a thread other than the driver's.
    fn publish(&self, tmp: &Path, seq: i64) -> Result<(), String>;

    /// The newest snapshot, if there is one.
    fn load(&self) -> Result<Option<SnapshotBytes>, String>;
}

/// A file: `snapshot.bin` in the state directory.
pub struct FilePlace {
    pub path: PathBuf,
}

impl SnapshotPlace for FilePlace {
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    /// `tmp` becomes the file: renamed, and the directory synced, so that the file holds
    /// either its old content or all of the new.
    fn publish(&self, tmp: &Path, _seq: i64) -> Result<(), String> {
        std::fs::rename(tmp, &self.path)
            .and_then(|()| {
                std::fs::File::open(self.path.parent().unwrap_or(Path::new(".")))?.sync_all()
            })
            .map_err(|e| e.to_string())
    }

    fn load(&self) -> Result<Option<SnapshotBytes>, String> {
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        // SAFETY: the file is never written in place, only replaced by a rename
        // (`publish`), so the mapped file does not change under the map.
        let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }
            .map_err(|e| e.to_string())?;
        Ok(Some(SnapshotBytes::Mapped(map)))
    }
}
