//! The PMI server of one component, as a sans-IO state machine (DESIGN.md "Sites apart" 1):
//! [`Session::handle`] takes what happened (a client's line, a process's exit, the answer
//! of a store or barrier call), [`Session::poll_transmit`] gives the lines to write to the
//! clients and [`Session::poll_event`] the calls to make (rendezvous `put`/`get`, the
//! barrier check-in, killing the ranks, exiting). The session has no timer of its own, so
//! there is no `poll_timeout`: waiting at the co-allocation barrier is bounded by the
//! server's side (seed 002 §3.3; today the component's wall time ends a component whose
//! processes never get there, a failed start).
//!
//! What it means (seed 002 §3.3, §4.3: the co-allocator hidden in the MPI library):
//! - ranks are job-wide, `rank_offset + local` of `total`; the KVS is the job's rendezvous
//!   store (key `pmi/kvs/KEY`), so business cards cross components and sites;
//! - the first `barrier_in` of the component's processes is the co-allocation barrier: once
//!   every local rank entered it the component checks in, and the answer (released or
//!   aborted) is the `barrier_out` — or the end of the ranks;
//! - a process that exits, or calls `abort`, before that is a failed start (check-in with
//!   `ok: false`); after it, a process failing ends the component with its code;
//! - later barriers are job-wide, through the store: each component marks
//!   `pmi/{attempt}/barrier/{epoch}/{component}` and waits for every other component's mark
//!   (`attempt` joins every component's launch number, published before the check-in, so a
//!   retried job never reads an earlier attempt's marks).

use super::wire::Answer;
use crate::barrier::BarrierOutcome;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// How long one wait for another component's barrier mark lasts before it is asked again.
const MARK_WAIT_MS: u64 = 60_000;
/// How long a launch number published before the check-in may take to be read.
const LAUNCH_WAIT_MS: u64 = 10_000;

/// Who the component is in its job (from the runtime's [`Config`](crate::Config)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    pub job: u64,
    pub launch: u64,
    pub component: usize,
    /// Every component's size, by index (the job-wide barriers wait for each of them).
    pub sizes: Vec<u32>,
    pub rank_offset: u64,
    pub total: u64,
    /// MPI processes of this component (the local ranks `0..processes`).
    pub processes: u32,
}

/// What happened, for [`Session::handle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A line from local rank `local`, without its `\n`.
    Line { local: u32, line: String },
    /// Local rank `local` ended (`code` `None`: killed by a signal or never started).
    Exited {
        local: u32,
        code: Option<i32>,
        detail: String,
    },
    /// The answer of [`Event::Put`] `token`.
    PutDone {
        token: u64,
        result: Result<(), String>,
    },
    /// The answer of [`Event::Get`] `token`: the value, or `None` when still missing.
    GetDone {
        token: u64,
        result: Result<Option<String>, String>,
    },
    /// The answer of [`Event::CheckIn`].
    CheckedIn(Result<BarrierOutcome, String>),
}

/// What the pump must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Store `value` under `key` in the job's rendezvous store; answer with `PutDone`.
    Put {
        token: u64,
        key: String,
        value: String,
    },
    /// Read `key`, waiting up to `wait_ms` for it; answer with `GetDone`.
    Get {
        token: u64,
        key: String,
        wait_ms: u64,
    },
    /// Check in at the co-allocation barrier; answer with `CheckedIn`.
    CheckIn { ok: bool, reason: Option<String> },
    /// Kill every rank still running.
    KillAll,
    /// Leave with this exit code; nothing more is handled.
    Exit(i32),
    /// A line for the component's log (bad input, failures).
    Log(String),
}

/// A line to write to local rank `local`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    pub local: u32,
    pub line: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the co-allocation barrier.
    Starting,
    /// Checked in with ok, waiting for the job's fate.
    CheckingIn,
    /// Checked in with a failure: waiting only to leave.
    Failing,
    /// The job committed.
    Running,
    /// Exit was asked for.
    Done,
}

#[derive(Debug, Default, Clone)]
struct Client {
    in_barrier: bool,
    finalized: bool,
    exited: bool,
    /// Inside a multi-line `mcmd=` request, until `endcmd`.
    multiline: Option<&'static str>,
}

#[derive(Debug, Clone)]
enum Pending {
    LaunchMark,
    Put { local: u32 },
    Get { local: u32, key: String },
    LaunchOf { component: usize },
    BarrierMark,
    BarrierSeen { component: usize },
}

/// A job-wide barrier under way (epoch 1 and later).
#[derive(Debug, Default)]
struct JobBarrier {
    /// Components whose mark is not seen yet.
    waiting: BTreeSet<usize>,
}

/// The PMI server of one component (see the module documentation).
#[derive(Debug)]
pub struct Session {
    setup: Setup,
    kvsname: String,
    clients: Vec<Client>,
    phase: Phase,
    /// Barriers completed (the co-allocation barrier is epoch 0).
    epoch: u64,
    launch_marked: bool,
    /// The ranks were told to die.
    killed: bool,
    /// Every component's launch number, once read (the attempt's name).
    launches: BTreeMap<usize, String>,
    job_barrier: Option<JobBarrier>,
    pending: HashMap<u64, Pending>,
    next_token: u64,
    cache: HashMap<String, String>,
    outbox: VecDeque<Transmit>,
    events: VecDeque<Event>,
}

impl Session {
    /// A session for `setup`; its first event publishes the launch number.
    pub fn new(setup: Setup) -> Session {
        let n = setup.processes as usize;
        let mut s = Session {
            kvsname: format!("kvs_{}", setup.job),
            clients: vec![Client::default(); n],
            phase: Phase::Starting,
            epoch: 0,
            launch_marked: false,
            killed: false,
            launches: BTreeMap::new(),
            job_barrier: None,
            pending: HashMap::new(),
            next_token: 0,
            cache: HashMap::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            setup,
        };
        let key = launch_key(s.setup.component);
        let value = s.setup.launch.to_string();
        s.put(Pending::LaunchMark, key, value);
        s
    }

    /// The job-wide rank of local rank `local`.
    pub fn rank_of(&self, local: u32) -> u64 {
        self.setup.rank_offset + u64::from(local)
    }

    /// `PMI_process_mapping`: every rank a node of its own, `(vector,(0,TOTAL,1))`.
    ///
    /// MPICH uses the mapping for shared memory: ranks said to share a node that sit on
    /// different hosts break, ranks on one host said to be apart only talk over the network
    /// (UCX still finds its own shared-memory transports between them). Every rank of the
    /// job must read the same mapping, and it reads it in `MPI_Init`, before the
    /// co-allocation barrier: when a component's ranks are spread over the nodes of a Slurm
    /// allocation (`pmi::spread`), only that component knows its layout, and waiting for
    /// every other component's layout there would keep a component that started first from
    /// checking in until the last one started (its barrier timeout running meanwhile). The
    /// one mapping every proxy can give without asking anyone is the one that never claims
    /// two ranks share a node.
    pub fn process_mapping(&self) -> String {
        format!("(vector,(0,{},1))", self.setup.total)
    }

    /// The next line to write, if any.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    /// The next thing to do, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Take in what happened.
    pub fn handle(&mut self, input: Input) {
        if self.phase == Phase::Done {
            return;
        }
        match input {
            Input::Line { local, line } => self.line(local, &line),
            Input::Exited {
                local,
                code,
                detail,
            } => self.exited(local, code, &detail),
            Input::PutDone { token, result } => self.put_done(token, result),
            Input::GetDone { token, result } => self.get_done(token, result),
            Input::CheckedIn(outcome) => self.checked_in(outcome),
        }
    }

    fn send(&mut self, local: u32, answer: Answer) {
        self.outbox.push_back(Transmit {
            local,
            line: answer.to_string(),
        });
    }

    fn log(&mut self, text: String) {
        self.events.push_back(Event::Log(text));
    }

    fn token(&mut self, what: Pending) -> u64 {
        self.next_token += 1;
        self.pending.insert(self.next_token, what);
        self.next_token
    }

    fn put(&mut self, what: Pending, key: String, value: String) {
        let token = self.token(what);
        self.events.push_back(Event::Put { token, key, value });
    }

    fn get(&mut self, what: Pending, key: String, wait_ms: u64) {
        let token = self.token(what);
        self.events.push_back(Event::Get {
            token,
            key,
            wait_ms,
        });
    }

    fn checked_in(&mut self, outcome: Result<BarrierOutcome, String>) {
        match (self.phase, outcome) {
            (Phase::CheckingIn, Ok(BarrierOutcome::Released)) => {
                self.phase = Phase::Running;
                self.release_barrier();
            }
            (Phase::CheckingIn, Ok(BarrierOutcome::Aborted(why))) => {
                self.log(format!("job aborted at the co-allocation barrier: {why}"));
                self.leave(1);
            }
            (Phase::CheckingIn, Err(e)) => {
                self.log(format!("the co-allocation barrier failed: {e}"));
                self.leave(1);
            }
            (Phase::Failing, _) => self.leave(1),
            _ => {}
        }
    }

    fn exited(&mut self, local: u32, code: Option<i32>, detail: &str) {
        let rank = self.rank_of(local);
        let Some(c) = self.clients.get_mut(local as usize) else {
            return;
        };
        c.exited = true;
        let finalized = c.finalized;
        match self.phase {
            Phase::Starting | Phase::CheckingIn => {
                let why = format!("MPI process {rank} {detail} before the co-allocation barrier");
                self.fail(why, 1);
            }
            Phase::Running if code != Some(0) => {
                self.fail(
                    format!("MPI process {rank} {detail}"),
                    code.filter(|c| *c != 0).unwrap_or(1),
                );
            }
            Phase::Running => {
                if !finalized {
                    self.log(format!("MPI process {rank} exited without MPI_Finalize"));
                }
                if self.clients.iter().all(|c| c.exited) {
                    self.phase = Phase::Done;
                    self.events.push_back(Event::Exit(0));
                } else {
                    self.check_barrier();
                }
            }
            Phase::Failing | Phase::Done => {}
        }
    }

    /// Something failed: before the co-allocation barrier a failed start (check in with
    /// `ok: false`, then leave), after it the end of the component with `code`.
    fn fail(&mut self, why: String, code: i32) {
        self.log(why.clone());
        self.kill();
        match self.phase {
            Phase::Starting => {
                self.phase = Phase::Failing;
                self.events.push_back(Event::CheckIn {
                    ok: false,
                    reason: Some(why),
                });
            }
            Phase::Failing | Phase::Done => {}
            Phase::CheckingIn => self.leave(1),
            Phase::Running => self.leave(code),
        }
    }

    /// Kill the ranks, once.
    fn kill(&mut self) {
        if !self.killed {
            self.killed = true;
            self.events.push_back(Event::KillAll);
        }
    }

    fn leave(&mut self, code: i32) {
        self.kill();
        self.phase = Phase::Done;
        self.events.push_back(Event::Exit(code));
    }
}

/// The store key where component `c` publishes its launch number.
fn launch_key(c: usize) -> String {
    format!("pmi/launch/{c}")
}

mod barriers;
mod requests;
#[cfg(test)]
mod tests;
