//! Fail-over in the simulation harness (issue 32, item 2; `--failover`, [`plan::failover`]):
//! the leader is frozen, or cut off with its lease's renewals stalled
//! ([`Fault::Failover`](super::plan::Fault::Failover)); when its lease runs out a standby
//! takes the journal's lease (the in-memory journal's fencing number,
//! [`MemJournal::lead`](coalloc_server::journal::MemJournal::lead)) and starts from the
//! shared journal as a restart does (snapshot, tail, running components adopted: the
//! harness's `start_server`). The agents hear the old leader's links go silent and connect
//! to the new one; the fake managers answer the old one's calls still on their way to it.
//!
//! The deposed leader comes back unaware: it runs its timers and whatever reached it (the
//! answers of its calls, its site workers' polls, requests of clients and components that
//! still try it first) until a write of its is refused (`JournalError::Fenced`: its driver
//! stops, as `coalloc serve` exits) or its renewal tells it it was deposed. Not played: an
//! agent connecting to the deposed leader (each agent site has one server end here); the
//! driver's unit tests cover the orphan cancel that would then be its only call. Its
//! snapshots go to the shared state directory's file, unfenced, as a restart's do: it
//! takes none, since its journal handle's count of entries stops at its deposition.
//! Checked besides the invariants of `check`:
//! - nothing the deposed leader does after the takeover leaves it: no call to any site, no
//!   file work (every one follows a commit, and its commits are refused); a barrier it
//!   answers is judged by its own core (`check::released`);
//! - no record of the journal was written under a fencing number older than one before it
//!   (never two leaders writing under the same number);
//! - every acknowledged submission is in the leader's memory or its history when the run
//!   ends, as at every takeover and restart.

use super::link::Call;
use super::{Ev, Server, Violation, World};
use coalloc_core::model::Time;
use coalloc_server::driver::Fatal;
use coalloc_server::msg::{Msg, Report};
use rand::Rng;

/// The lease's term (`server.lease`'s default) and a standby's poll of it (`lease::poll`):
/// the standby takes over this long after the leader was frozen or cut off.
pub(super) const TAKEOVER: Time = 3_000 + 250;

/// A leader another server took the lease from, still running.
pub(super) struct Deposed {
    pub(super) server: Server,
    /// Its incarnation (what its calls and their answers are tagged with).
    pub(super) incarnation: u64,
    /// Frozen or cut off until then.
    back: Time,
    /// Its renewal ends it then at the latest.
    exit: Time,
    /// What reached it while it was away, and since.
    pub(super) inputs: Vec<Msg>,
}

impl World {
    /// The leader is frozen or cut off now: a standby takes over at the lease's end, and
    /// the leader comes back `back` ms after that, to be ended by its renewal `exit` ms
    /// later at the latest.
    pub(super) fn failover(&mut self, back: Time, exit: Time) {
        if self.deposed.is_some() {
            return;
        }
        let Some(s) = self.server.take() else {
            return;
        };
        self.out.failovers += 1;
        // The standby's core has been given no reading yet.
        self.read.iter_mut().for_each(|r| *r = false);
        // Discards not yet sent to an agent stay in the old leader's memory.
        for (unsent, lost) in self.discards_unsent.iter_mut().zip(&mut self.discards_lost) {
            lost.append(unsent);
        }
        // Its agents' links go silent: the agents' heartbeats end them.
        self.net_server_silent();
        let takeover = self.now + TAKEOVER;
        self.log(|| {
            format!(
                "leader (incarnation {}) frozen or cut off: a standby takes over at +{}, it comes back {back} ms later",
                self.epoch,
                takeover - super::plan::T0
            )
        });
        self.deposed = Some(Deposed {
            server: s,
            incarnation: self.epoch,
            back: takeover + back,
            exit: takeover + back + exit,
            inputs: Vec::new(),
        });
        self.at(takeover, Ev::Restart);
    }

    /// When the deposed leader wants its next turn (or its end).
    pub(super) fn deposed_at(&self) -> Option<Time> {
        let d = self.deposed.as_ref()?;
        let want = if d.inputs.is_empty() {
            d.server.driver.next_wakeup().max(self.now + 1)
        } else {
            self.now
        };
        Some(want.max(d.back).min(d.exit).max(self.now))
    }

    /// A request of a client or a component goes to the deposed leader (it is the first
    /// one they try and it still answers connections): while no other leads, and now and
    /// then after.
    pub(super) fn asks_deposed(&mut self) -> bool {
        match &self.deposed {
            None => false,
            Some(_) if self.server.is_none() => true,
            Some(_) => self.rng.random_range(0..3) == 0,
        }
    }

    /// An answer of a call the deposed leader made reaches it (`None`), or is another's.
    pub(super) fn deposed_heard(&mut self, epoch: u64, r: Report) -> Option<Report> {
        match &mut self.deposed {
            Some(d) if d.incarnation == epoch => {
                d.inputs.push(Msg::Site(r));
                None
            }
            _ => Some(r),
        }
    }

    /// When the deposed leader of incarnation `inc`, if it is one, is back.
    pub(super) fn deposed_back(&self, inc: u64) -> Option<Time> {
        self.deposed
            .as_ref()
            .filter(|d| d.incarnation == inc)
            .map(|d| d.back)
    }

    /// The server of incarnation `inc`, the leader or the deposed one, if it still runs.
    pub(super) fn server_of(&self, inc: u64) -> Option<&Server> {
        match &self.deposed {
            Some(d) if d.incarnation == inc => Some(&d.server),
            _ => self.server.as_ref().filter(|_| inc == self.epoch),
        }
    }

    /// The deposed leader's turn, if due: what it does must leave nothing; it ends at its
    /// first refused write, or at its renewal's end.
    pub(super) fn deposed_step(&mut self) -> Result<(), Violation> {
        let Some(at) = self.deposed_at() else {
            return Ok(());
        };
        if at > self.now {
            return Ok(());
        }
        let d = self.deposed.as_mut().expect("deposed");
        if self.now >= d.exit {
            self.log(|| "the deposed leader's renewal hears it was deposed: it exits".into());
            return self.deposed_gone();
        }
        let inputs = std::mem::take(&mut d.inputs);
        let r = d.server.driver.step(self.now, inputs);
        let calls = std::mem::take(&mut *d.server.outbox.lock().unwrap_or_else(|e| e.into_inner()));
        let work = std::mem::take(&mut *d.server.work.lock().unwrap_or_else(|e| e.into_inner()));
        // What its site workers watch (their polls go on); anything else is a call that
        // leaves it.
        let mut sent = None;
        for (site, c) in calls {
            match c {
                Call::Watch { launch, remote } => {
                    d.server.watched[site].insert(launch, remote);
                }
                Call::Forget(launch) => {
                    d.server.watched[site].remove(&launch);
                }
                c => {
                    sent.get_or_insert((site, c));
                }
            }
        }
        let incarnation = d.incarnation;
        if let Some(c) = sent {
            return Err(self.violation(format!(
                "the deposed leader (incarnation {incarnation}) sent {c:?} after the takeover"
            )));
        }
        if !work.is_empty() {
            return Err(self.violation(format!(
                "the deposed leader (incarnation {incarnation}) started file work after the takeover"
            )));
        }
        self.check_epochs()?;
        // Its replies, if any, while its core is there to judge a barrier's.
        for w in std::mem::take(&mut self.waiting) {
            self.answer(w)?;
        }
        match r {
            Ok(_) => {
                self.out.deposed_turns += 1;
                Ok(())
            }
            Err(Fatal(e)) => {
                if !e.contains("deposed") {
                    return Err(self.violation(format!(
                        "the deposed leader's write failed, but not for its lease: {e}"
                    )));
                }
                self.out.refused += 1;
                self.log(|| format!("the deposed leader's write is refused: {e}"));
                self.deposed_gone()
            }
        }
    }

    /// The deposed leader's process ends: its callers hear the connection close and try
    /// again (the leader, by then).
    fn deposed_gone(&mut self) -> Result<(), Violation> {
        self.deposed = None;
        for w in std::mem::take(&mut self.waiting) {
            self.answer(w)?;
        }
        Ok(())
    }

    /// No record of the journal was written under an older fencing number than one before
    /// it: one writer per number, and none after the number moved on.
    pub(super) fn check_epochs(&mut self) -> Result<(), Violation> {
        for (seq, epoch) in self.journal.epochs_after(self.epochs_seen.0) {
            if epoch < self.epochs_seen.1 {
                return Err(self.violation(format!(
                    "journal entry {seq} written under fencing number {epoch} after one under {}",
                    self.epochs_seen.1
                )));
            }
            self.epochs_seen = (seq, epoch);
        }
        Ok(())
    }

    /// Every acknowledged submission is in the leader's memory or its history.
    pub(super) fn acked_survive(&self) -> Result<(), Violation> {
        let Some(s) = &self.server else {
            return Ok(());
        };
        let history = self.journal.history();
        for (id, i) in &self.acked {
            if s.driver.core().job(*id).is_none() && !history.iter().any(|h| h.job == *id) {
                return Err(self.violation(format!(
                    "acknowledged job {id} (j{i}) is neither in the leader's memory nor in its history"
                )));
            }
        }
        Ok(())
    }
}
