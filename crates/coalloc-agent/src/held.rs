//! The agent's record of the launches it made at its resource manager (`launches.jsonl` in
//! its state directory, one JSON line per change, synced before the answer leaves). It makes
//! a submission idempotent by launch number (a submission repeated after a lost answer gets
//! the first one's id and starts nothing), lets a restarted agent find its launches again,
//! and is what the agent's hello reports, so the server can cancel those it no longer wants.
//! A launch leaves it once the server has heard that it ended (a query's answer) or asked
//! its cancel; one the agent stopped itself (heartbeat stop) stays until then.

use coalloc_link::proto::HeldLaunch;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum Line {
    Made(HeldLaunch),
    Ended { launch: u64, ended: bool },
}

/// The launches made whose end the server has not heard of, by launch number.
pub struct Held {
    path: PathBuf,
    launches: Mutex<BTreeMap<u64, HeldLaunch>>,
    /// Lines of ended launches in the file since it was last compacted.
    dead: std::sync::atomic::AtomicUsize,
}

/// The file is rewritten with the live launches alone once it holds this many lines of
/// ended ones, and at least as many as live ones.
const COMPACT_AFTER: usize = 4096;

impl Held {
    /// Read the record (a torn last line, from a crash, is skipped).
    pub fn open(path: PathBuf) -> std::io::Result<Held> {
        let mut launches = BTreeMap::new();
        if let Ok(text) = std::fs::read_to_string(&path) {
            for line in text.lines() {
                match serde_json::from_str::<Line>(line) {
                    Ok(Line::Made(h)) => {
                        launches.insert(h.launch, h);
                    }
                    Ok(Line::Ended { launch, .. }) => {
                        launches.remove(&launch);
                    }
                    Err(_) => {}
                }
            }
        }
        let held = Held {
            path,
            launches: Mutex::new(launches),
            dead: Default::default(),
        };
        held.compact(&held.lock())?;
        Ok(held)
    }

    /// Write the live launches alone (at start, and once enough have ended, so that the
    /// file does not grow for ever).
    /// `all` is the locked map: no line is appended meanwhile.
    fn compact(&self, all: &BTreeMap<u64, HeldLaunch>) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = self.path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp)?;
        for h in all.values() {
            writeln!(f, "{}", serde_json::to_string(&Line::Made(h.clone()))?)?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, &self.path)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, HeldLaunch>> {
        self.launches.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Append `lines` with one write, and one sync when `sync` (a burst of launches costs
    /// one sync). Called with the map locked, so that a compaction cannot drop them.
    fn append(&self, lines: &[Line], sync: bool) -> std::io::Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let mut text = String::new();
        for line in lines {
            text += &serde_json::to_string(line)?;
            text.push('\n');
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        f.write_all(text.as_bytes())?;
        if sync {
            f.sync_data()?;
        }
        Ok(())
    }

    pub fn get(&self, launch: u64) -> Option<HeldLaunch> {
        self.lock().get(&launch).cloned()
    }

    pub fn by_remote(&self, remote: &str) -> Option<u64> {
        self.lock()
            .values()
            .find(|h| h.remote == remote)
            .map(|h| h.launch)
    }

    pub fn all(&self) -> Vec<HeldLaunch> {
        self.lock().values().cloned().collect()
    }

    /// Launches were made: recorded (on disk, together) before their ids are answered.
    pub fn made(&self, made: &[HeldLaunch]) -> std::io::Result<()> {
        let lines: Vec<Line> = made.iter().cloned().map(Line::Made).collect();
        let mut all = self.lock();
        self.append(&lines, true)?;
        for h in made {
            all.insert(h.launch, h.clone());
        }
        Ok(())
    }

    /// Launches ended or were cancelled. Not synced: an end lost in a crash only makes a
    /// restarted agent report a launch that has ended, which the server then cancels, and
    /// cancelling an ended launch does nothing.
    pub fn ended(&self, launches: &[u64]) {
        let mut all = self.lock();
        let lines: Vec<Line> = launches
            .iter()
            .filter(|l| all.remove(l).is_some())
            .map(|&launch| Line::Ended {
                launch,
                ended: true,
            })
            .collect();
        if let Err(e) = self.append(&lines, false) {
            tracing::warn!(?launches, "recording the end of launches: {e}");
        }
        // Each ended launch left two lines: its making and its end.
        use std::sync::atomic::Ordering::Relaxed;
        let dead = self.dead.fetch_add(2 * lines.len(), Relaxed) + 2 * lines.len();
        if dead >= COMPACT_AFTER.max(all.len()) {
            self.dead.store(0, Relaxed);
            // A failure leaves the file as it was: longer, and as right.
            if let Err(e) = self.compact(&all) {
                tracing::warn!("compacting {}: {e}", self.path.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_survive_a_reopen_and_ended_ones_are_forgotten() {
        let dir = std::env::temp_dir().join(format!("coalloc-held-{}", std::process::id()));
        let path = dir.join("launches.jsonl");
        let h = |launch| HeldLaunch {
            launch,
            job: 1,
            component: launch as usize,
            remote: format!("R{launch}"),
        };
        {
            let held = Held::open(path.clone()).unwrap();
            held.made(&[h(1), h(2)]).unwrap();
            held.ended(&[1]);
        }
        // A torn line from a crash.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"launch\":3,\"jo")
            .unwrap();
        let held = Held::open(path.clone()).unwrap();
        assert_eq!(held.all(), vec![h(2)]);
        assert_eq!(held.by_remote("R2"), Some(2));
        assert_eq!(held.get(1), None);
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_file_is_compacted_once_enough_launches_ended() {
        let dir = std::env::temp_dir().join(format!("coalloc-held-c-{}", std::process::id()));
        let path = dir.join("launches.jsonl");
        let h = |launch| HeldLaunch {
            launch,
            job: launch,
            component: 0,
            remote: format!("R{launch}"),
        };
        let held = Held::open(path.clone()).unwrap();
        let lines = || std::fs::read_to_string(&path).unwrap().lines().count();
        held.made(&[h(0)]).unwrap();
        let n = COMPACT_AFTER as u64 / 2;
        for l in 1..n {
            held.made(&[h(l)]).unwrap();
            held.ended(&[l]);
        }
        assert_eq!(lines(), 1 + 2 * (n as usize - 1), "not compacted yet");
        held.made(&[h(n)]).unwrap();
        held.ended(&[n]);
        assert_eq!(lines(), 1, "compacted to the one live launch");
        held.made(&[h(n + 1)]).unwrap();
        drop(held);
        let held = Held::open(path.clone()).unwrap();
        assert_eq!(held.all(), vec![h(0), h(n + 1)]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
