//! A fake resource manager: a pool of processors with a FIFO queue, launches that wait
//! their pending delay and then run their processes, other users' load, and the faults of
//! its plan (down for a while, refusing or losing launches). It answers what a
//! [`coalloc_backends::Backend`] would, in virtual time. Like the local launcher's launch
//! log (`coalloc-backends`' `local`, issue 23 item 4) it keeps every launch it took until
//! the server discards it once ended ([`Rm::discard`]); what is never discarded is a log
//! that grows for ever. A manager whose plan lets it reserve keeps a calendar of advance
//! reservations (issue 31; [`super::calendar`]).

use super::calendar::Window;
use super::plan::SitePlan;
use coalloc_backends::{BackendError, RemoteState, SiteLoad, SubmitRequest};
use coalloc_core::model::Time;
use std::collections::{BTreeMap, BTreeSet};

/// Where a launch is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum St {
    /// Waiting: runnable from `ready` on, when there is room.
    Pending {
        ready: Time,
    },
    Running {
        since: Time,
    },
    Finished,
    Failed(String),
    Lost,
    Cancelled,
}

/// One launch the manager took.
#[derive(Debug, Clone)]
pub struct Launch {
    pub launch: u64,
    pub job: u64,
    pub component: usize,
    pub count: u32,
    pub processes: u32,
    pub runtime: Time,
    pub state: St,
    /// Its processes never check in (a fault).
    pub mute: bool,
    /// Ranks that checked in with ok.
    pub checked: BTreeSet<u32>,
    /// Some process heard `released`: the program runs past the barrier.
    pub released: bool,
    /// Its end is scheduled.
    pub ending: bool,
    /// The server discarded it: it is out of the log once ended.
    pub discarded: bool,
    /// When a site worker was first asked to cancel it.
    pub cancel_asked: Option<Time>,
    /// The server heard its id in a submission's answer (and may have recorded it).
    pub told: bool,
    /// Cancelled by its launch number: the server did not record its id.
    pub by_number: bool,
    /// How long it holds its processors in the manager's calendar: its wall time, or the
    /// site's default limit past its runtime ([`DEFAULT_WALL`]).
    pub wall: Time,
    /// The reservation it was submitted into, and that reservation's start then.
    pub reservation: Option<(String, Time)>,
    /// Since when it has waited for room: runnable (its pending delay over, its window
    /// begun), and not started because the processors it needs are taken.
    pub waiting: Option<Time>,
}

/// A launch's wall time past its runtime when its request gives none: the site's default
/// limit, longer than the barrier's wait (20 s in the plans).
pub const DEFAULT_WALL: Time = 30_000;

impl Launch {
    pub fn running(&self) -> bool {
        matches!(self.state, St::Running { .. })
    }

    pub fn ended(&self) -> bool {
        !matches!(self.state, St::Pending { .. } | St::Running { .. })
    }
}

/// One site's manager.
#[derive(Debug)]
pub struct Rm {
    pub plan: SitePlan,
    /// Launches by remote id, in submission order (the ids sort by number).
    pub launches: BTreeMap<u64, Launch>,
    next: u64,
    /// Down (answers nothing) until then.
    pub down_until: Time,
    /// Fails every cancel until then (`Fault::SlowCancels`).
    pub slow_cancels_until: Time,
    /// Its advance reservations, by name; a deleted one leaves, one whose window passed
    /// stays listed (holding nothing) until deleted, so that one left behind is seen.
    pub windows: BTreeMap<String, Window>,
    /// Reservations made.
    pub made: u32,
}

fn remote(id: u64) -> String {
    format!("R{id}")
}

/// The remote id's number, if it is one of ours.
pub fn parse_remote(r: &str) -> Option<u64> {
    r.strip_prefix('R')?.parse().ok()
}

impl Rm {
    pub fn new(plan: SitePlan) -> Rm {
        Rm {
            plan,
            launches: BTreeMap::new(),
            next: 1,
            down_until: 0,
            slow_cancels_until: 0,
            windows: BTreeMap::new(),
            made: 0,
        }
    }

    pub fn up(&self, now: Time) -> bool {
        now >= self.down_until
    }

    pub(super) fn down_error() -> BackendError {
        BackendError::Unavailable("the manager does not answer".into())
    }

    /// Take a submission; `refuse` says the manager fails it (drawn by the caller).
    pub fn submit(
        &mut self,
        now: Time,
        r: &SubmitRequest,
        pending: Time,
        refuse: bool,
        mute: bool,
    ) -> Result<String, BackendError> {
        if !self.up(now) {
            return Err(Self::down_error());
        }
        if refuse {
            return Err(BackendError::Unavailable(
                "sbatch: slurmctld refused".into(),
            ));
        }
        let runtime = r
            .arguments
            .first()
            .and_then(|a| a.parse().ok())
            .unwrap_or(1000);
        // `sbatch --reservation` of one that does not exist: refused.
        let reservation = match &r.reservation {
            None => None,
            Some(name) => match self.windows.get(name) {
                Some(w) => Some((name.clone(), w.start)),
                None => {
                    return Err(BackendError::Rejected(format!(
                        "sbatch: Requested reservation {name} is invalid"
                    )))
                }
            },
        };
        let id = self.next;
        self.next += 1;
        self.launches.insert(
            id,
            Launch {
                launch: r.launch,
                job: r.job,
                component: r.component,
                count: r.count,
                processes: r.processes,
                runtime,
                state: St::Pending {
                    ready: now + pending,
                },
                mute,
                checked: BTreeSet::new(),
                released: false,
                ending: false,
                discarded: false,
                told: false,
                cancel_asked: None,
                by_number: false,
                wall: r.wall_time_ms.unwrap_or(runtime + DEFAULT_WALL),
                reservation,
                waiting: None,
            },
        );
        Ok(remote(id))
    }

    pub fn used(&self) -> u32 {
        self.launches
            .values()
            .filter(|l| l.running())
            .map(|l| l.count)
            .sum()
    }

    /// Start what may start now: ordinary launches in FIFO order where their processors stay
    /// free for their wall time (so none runs into a reservation's window), and launches
    /// submitted into a reservation once its window has begun, on its processors; the
    /// launches started.
    pub fn schedule(&mut self, now: Time) -> Vec<u64> {
        let mut started = Vec::new();
        let mut blocked = false;
        let ready: Vec<u64> = self
            .launches
            .iter()
            .filter(|(_, l)| matches!(l.state, St::Pending { ready } if ready <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in ready {
            let l = &self.launches[&id];
            let window = l
                .reservation
                .as_ref()
                .and_then(|(n, _)| Some((n, self.windows.get(n)?)));
            // Whether it may start, and else whether for want of room.
            let (ok, room) = match window {
                // Its reservation was deleted: `unreserve` ended it.
                None if l.reservation.is_some() => (false, false),
                Some((_, w)) if now < w.start => (false, false),
                Some((name, w)) if now < w.end => (self.used_by(name) + l.count <= w.count, true),
                // An ordinary launch, or one whose window has passed.
                _ => {
                    let fits = !blocked && self.fits(now, l.count, now, now + l.wall);
                    blocked |= !fits && l.reservation.is_none();
                    (fits, true)
                }
            };
            let l = self.launches.get_mut(&id).expect("listed");
            if ok {
                l.state = St::Running { since: now };
                started.push(id);
            } else if room {
                l.waiting.get_or_insert(now);
            }
        }
        started
    }

    /// When the manager looks again by itself: a pending launch's delay over, a
    /// reservation's window beginning or ending.
    pub fn next_ready(&self, now: Time) -> Option<Time> {
        let ready = self.launches.values().filter_map(|l| match l.state {
            St::Pending { ready } if ready > now => Some(ready),
            _ => None,
        });
        let windows = self.windows.values().flat_map(|w| [w.start, w.end]);
        ready.chain(windows.filter(|t| *t > now)).min()
    }

    /// Until when a cancel cannot be taken: the manager down, or its cancels failing.
    pub fn cancels_back(&self) -> Time {
        self.down_until.max(self.slow_cancels_until)
    }

    pub(super) fn cancels_taken(&self, now: Time) -> Result<(), BackendError> {
        if !self.up(now) {
            return Err(Self::down_error());
        }
        if now < self.slow_cancels_until {
            return Err(BackendError::Unavailable("scancel: timed out".into()));
        }
        Ok(())
    }

    pub fn cancel(&mut self, now: Time, r: &str) -> Result<(), BackendError> {
        self.cancels_taken(now)?;
        if let Some(l) = parse_remote(r).and_then(|id| self.launches.get_mut(&id)) {
            if matches!(l.state, St::Pending { .. } | St::Running { .. }) {
                l.state = St::Cancelled;
            }
        }
        Ok(())
    }

    /// Cancel whatever a submission of `launch` left here (by its launch number, as the
    /// real backends find it by name).
    pub fn cancel_launch(&mut self, now: Time, launch: u64) -> Result<(), BackendError> {
        self.cancels_taken(now)?;
        for l in self.launches.values_mut().filter(|l| l.launch == launch) {
            l.by_number = true;
            if matches!(l.state, St::Pending { .. } | St::Running { .. }) {
                l.state = St::Cancelled;
            }
        }
        Ok(())
    }

    /// A site worker was first asked to cancel launch `remote`, or whatever launch number
    /// `launch` left here.
    pub fn asked_to_cancel(&mut self, now: Time, remote: Option<&str>, launch: Option<u64>) {
        let id = remote.and_then(parse_remote);
        for (i, l) in self.launches.iter_mut() {
            if Some(*i) == id || Some(l.launch) == launch {
                l.cancel_asked.get_or_insert(now);
            }
        }
    }

    /// The server will never ask about these launches again: they leave the log, those not
    /// ended yet once they end (the server lets a launch go when its job ends, and may
    /// discard it while its cancel still waits for a manager that does not answer). The
    /// log is the launcher's own file: it takes discards while the manager does not answer.
    pub fn discard(&mut self, ids: &[String]) {
        for id in ids {
            if let Some(l) = parse_remote(id).and_then(|id| self.launches.get_mut(&id)) {
                l.discarded = true;
            }
        }
    }

    /// A program's end.
    pub fn exit(&mut self, id: u64, ok: bool) {
        if let Some(l) = self.launches.get_mut(&id) {
            if l.running() {
                l.state = if ok {
                    St::Finished
                } else {
                    St::Failed("exit code 1".into())
                };
            }
        }
    }

    /// A node dies under a running launch.
    pub fn lose(&mut self, id: u64) {
        if let Some(l) = self.launches.get_mut(&id) {
            if l.running() {
                l.state = St::Lost;
            }
        }
    }

    pub fn load(&self, now: Time) -> Result<SiteLoad, String> {
        if !self.up(now) {
            return Err("the manager does not answer".into());
        }
        // Launches past their wall time may overrun a window: never below none idle.
        let taken = self.used() + self.held_idle(now);
        Ok(SiteLoad {
            total: self.plan.processors,
            idle: (self.plan.processors - self.plan.other).saturating_sub(taken),
            other: self.plan.other,
        })
    }

    /// What the manager says of a launch.
    pub fn state(&self, r: &str) -> RemoteState {
        match parse_remote(r).and_then(|id| self.launches.get(&id)) {
            None => RemoteState::Unknown,
            Some(l) => match &l.state {
                St::Pending { .. } => RemoteState::Queued,
                St::Running { .. } => RemoteState::Running,
                St::Finished => RemoteState::Finished,
                St::Failed(why) => RemoteState::Failed(why.clone()),
                St::Lost => RemoteState::Lost("the node died".into()),
                St::Cancelled => RemoteState::Failed("cancelled".into()),
            },
        }
    }
}
