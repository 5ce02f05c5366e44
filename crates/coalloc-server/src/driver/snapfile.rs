//! The snapshot file's layout (issue 23, item 4): the state without the core's job slots
//! (the head), then the slots in [`RUNS`] runs, then a trailer that says where each part
//! ends. A restart decodes the runs on threads of their own while it decodes the head, so
//! the work (and the memory it touches for the first time, most of a restart's cost) is
//! shared by the machine's cores. Each part is one [`super::codec`] value.
//!
//! ```text
//! head | run 0 | … | run RUNS-1 | head's end | RUNS × a run's end | RUNS | MAGIC
//! ```
//! The ends are byte offsets from the start of the file, u64 little-endian; `RUNS` is a u32
//! little-endian; `MAGIC` is 8 bytes.
//!
//! Files of the older forms (`coalsnp3` to `coalsnp7`, the same layout; the core's
//! [`PREVIOUS_SNAPSHOT_VERSION`] and [`SAME_SLOTS_FORMS`] say how their state differs) are
//! read too, and made whole in this form by [`join`], so that an upgrade keeps its state
//! directory; the next snapshot is written in this form.

use super::codec::{self, CodecError};
use coalloc_core::scheduler::snapshot::{
    reading_form, reading_previous_form, JobSlots, PreviousJobSlots, Snapshot, SnapshotRef,
    PREVIOUS_SNAPSHOT_VERSION, SAME_SLOTS_FORMS,
};
use std::io::Write;

/// How many runs the job slots are written in.
pub const RUNS: usize = 4;

/// The file's last bytes: `coalsnp` and the form's number, bumped whenever the state's
/// form changes (4: the queue's job index is no longer saved; 5: the sites' links are; 6:
/// the core's reservations are, issue 31; 7: its draining launches are; 8: the timers of
/// their repeated cancels are).
const MAGIC: &[u8; 8] = b"coalsnp8";

/// This form's number, as its last bytes give it.
const FORM: u32 = (MAGIC[7] - b'0') as u32;

/// The last bytes of a file of form `form` (one digit).
fn magic_of(form: u32) -> [u8; 8] {
    let mut m = *MAGIC;
    m[7] = b'0' + form as u8;
    m
}

/// The runs of job slots a file held, in its form.
#[derive(Debug)]
pub enum Runs {
    /// This form's, or those of an older form with the same slots ([`SAME_SLOTS_FORMS`];
    /// its head was read in that form).
    Slots {
        form: u32,
        runs: Vec<JobSlots>,
    },
    Previous(Vec<PreviousJobSlots>),
}

impl Runs {
    /// How many runs.
    #[cfg(test)]
    fn count(&self) -> usize {
        match self {
            Runs::Slots { runs, .. } => runs.len(),
            Runs::Previous(r) => r.len(),
        }
    }

    /// The file's form (8, or 7 to 3 for the older ones).
    pub fn form(&self) -> u32 {
        match self {
            Runs::Slots { form, .. } => *form,
            Runs::Previous(_) => PREVIOUS_SNAPSHOT_VERSION,
        }
    }
}

/// The core's snapshot made whole from its head and the file's runs, in this form.
pub fn join(core: Snapshot, runs: Runs) -> Snapshot {
    match runs {
        Runs::Slots { runs, .. } => Snapshot::join(core, runs),
        Runs::Previous(runs) => Snapshot::join_previous(core, runs),
    }
}

/// Passes bytes on and counts them (allocates nothing: a snapshot's forked child uses it).
struct Counting<'w> {
    inner: &'w mut dyn Write,
    n: u64,
}

impl Write for Counting<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Write `head`, a value whose core is `core.head()`, then `core`'s job slots in [`RUNS`]
/// runs, then the trailer. Allocates nothing.
pub fn write<T: serde::Serialize>(
    head: &T,
    core: &SnapshotRef<'_>,
    w: &mut dyn Write,
) -> Result<(), CodecError> {
    let mut c = Counting { inner: w, n: 0 };
    codec::to_writer(head, &mut c)?;
    let head_end = c.n;
    let mut ends = [0u64; RUNS];
    for (i, end) in ends.iter_mut().enumerate() {
        codec::to_writer(&core.job_slots(i, RUNS), &mut c)?;
        *end = c.n;
    }
    c.write_all(&head_end.to_le_bytes())?;
    for end in ends {
        c.write_all(&end.to_le_bytes())?;
    }
    c.write_all(&(RUNS as u32).to_le_bytes())?;
    c.write_all(MAGIC)?;
    Ok(())
}

/// Read what [`write`] wrote, or the previous form: the head, decoded on this thread while
/// each run is decoded on a thread of its own, and the runs in order (for [`join`]).
pub fn read<H: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<(H, Runs), CodecError> {
    let bad = |m: &str| CodecError::new(format!("not a snapshot of this build's form: {m}"));
    let len = bytes.len();
    let tail = bytes.get(len.saturating_sub(8)..).unwrap_or_default();
    if len >= 12 && tail == magic_of(PREVIOUS_SNAPSHOT_VERSION) {
        let (head, runs) = read_parts(bytes, |head| {
            reading_previous_form(|| codec::from_bytes(head))
        })?;
        return Ok((head, Runs::Previous(runs)));
    }
    let older = SAME_SLOTS_FORMS.into_iter().find(|&f| tail == magic_of(f));
    if let Some(form) = older.filter(|_| len >= 12) {
        let (head, runs) =
            read_parts(bytes, |head| reading_form(form, || codec::from_bytes(head)))?;
        return Ok((head, Runs::Slots { form, runs }));
    }
    if len < 12 || tail != MAGIC {
        return Err(if len >= 12 && tail.starts_with(&MAGIC[..7]) {
            let mut forms = vec![PREVIOUS_SNAPSHOT_VERSION];
            forms.extend(SAME_SLOTS_FORMS);
            let forms: Vec<String> = forms.iter().map(u32::to_string).collect();
            bad(&format!(
                "form {} (this build reads forms {} and {FORM})",
                String::from_utf8_lossy(&tail[7..]),
                forms.join(", ")
            ))
        } else {
            bad("no trailer (written by an older build?)")
        });
    }
    let (head, runs) = read_parts(bytes, |head| codec::from_bytes(head))?;
    Ok((head, Runs::Slots { form: FORM, runs }))
}

/// The parts of a file whose trailer has been checked: the head, decoded on this thread by
/// `head`, and the runs, each decoded as an `R` on a thread of its own.
fn read_parts<H, R: serde::de::DeserializeOwned + Send>(
    bytes: &[u8],
    head: impl FnOnce(&[u8]) -> Result<H, CodecError>,
) -> Result<(H, Vec<R>), CodecError> {
    let bad = |m: &str| CodecError::new(format!("not a snapshot of this build's form: {m}"));
    let len = bytes.len();
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let runs = u32::from_le_bytes(bytes[len - 12..len - 8].try_into().expect("4 bytes")) as usize;
    let table = runs
        .checked_add(1)
        .and_then(|n| n.checked_mul(8))
        .and_then(|t| (len - 12).checked_sub(t))
        .ok_or_else(|| bad("a trailer longer than the file"))?;
    // Part k spans bounds[k]..bounds[k + 1]: the head, then each run.
    let mut bounds = vec![0usize];
    for k in 0..=runs {
        let end = usize::try_from(word(table + 8 * k)).unwrap_or(usize::MAX);
        if end < *bounds.last().expect("one bound") || end > table {
            return Err(bad("parts out of order"));
        }
        bounds.push(end);
    }
    std::thread::scope(|scope| {
        let threads: Vec<_> = (1..=runs)
            .map(|k| {
                let part = &bytes[bounds[k]..bounds[k + 1]];
                let decode = move || codec::from_bytes::<R>(part);
                std::thread::Builder::new()
                    .name("snapshot-read".into())
                    .spawn_scoped(scope, decode)
                    .map_err(|_| decode)
            })
            .collect();
        let head = head(&bytes[..bounds[1]]);
        let runs = threads
            .into_iter()
            .map(|t| match t {
                Ok(thread) => thread
                    .join()
                    .unwrap_or_else(|_| Err(CodecError::new("a decoding thread panicked"))),
                // No thread: decoded here.
                Err(decode) => decode(),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((head?, runs))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use coalloc_core::model::{Component, Job, JobKind, Site};
    use coalloc_core::scheduler::{Event, Scheduler, SchedulerConfig};

    fn scheduler(jobs: u32) -> Scheduler {
        let mut s = Scheduler::new(SchedulerConfig::default(), vec![Site::cluster("a", 2)]);
        for t in 0..jobs {
            let c = Component {
                count: 1 + t % 2,
                ..Component::default()
            };
            let job = Job::new(JobKind::Unordered, vec![c]);
            s.handle(t as i64, Event::Submit(Box::new(job))).unwrap();
            while s.poll_command().is_some() {}
        }
        s
    }

    fn written(s: &Scheduler) -> Vec<u8> {
        let snap = s.snapshot().unwrap();
        let mut bytes = Vec::new();
        write(&("head", snap.head()), &snap, &mut bytes).unwrap();
        bytes
    }

    #[test]
    fn a_file_reads_back_whole_and_a_damaged_one_is_an_error_not_a_panic() {
        for jobs in [0, 1, 3, 50] {
            let s = scheduler(jobs);
            let bytes = written(&s);
            let ((name, head), runs): ((String, Snapshot), _) = read(&bytes).unwrap();
            assert_eq!((name.as_str(), runs.count()), ("head", RUNS));
            let (back, _) = Scheduler::restore(
                SchedulerConfig::default(),
                &[Site::cluster("a", 2)],
                join(head, runs),
            )
            .unwrap();
            let ids = |s: &Scheduler| s.jobs().map(|j| j.id).collect::<Vec<_>>();
            assert_eq!(ids(&back), ids(&s));
            assert_eq!(ids(&back).len(), jobs as usize);
        }
        let bytes = written(&scheduler(20));
        for cut in [0, 1, 11, 12, 40, bytes.len() / 2, bytes.len() - 1] {
            assert!(
                read::<(String, Snapshot)>(&bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut older = bytes.clone();
        let at = older.len() - 1;
        older[at] = b'2';
        let e = read::<(String, Snapshot)>(&older).unwrap_err().to_string();
        assert!(
            e.contains("form 2 (this build reads forms 3, 4, 5, 6, 7 and 8)"),
            "{e}"
        );
        let mut flipped = bytes.clone();
        let at = bytes.len() - 20;
        flipped[at] ^= 0xff;
        assert!(read::<(String, Snapshot)>(&flipped).is_err());
    }

    #[test]
    fn the_older_forms_with_this_forms_slots_are_read_as_their_form() {
        let s = scheduler(5);
        let snap = s.snapshot().unwrap();
        let mut bytes = Vec::new();
        write(&("head", 7u32), &snap, &mut bytes).unwrap();
        for form in [4u32, 5, 6, 7, 8] {
            let mut b = bytes.clone();
            let at = b.len() - 1;
            b[at] = b'0' + form as u8;
            let ((name, n), runs): ((String, u32), _) = read(&b).unwrap();
            assert_eq!(
                (name.as_str(), n, runs.form(), runs.count()),
                ("head", 7, form, RUNS)
            );
        }
    }
}
