//! The simulation harness (DESIGN.md, "The server as a machine"; habits 3, 4 and 6): the
//! server's driver, stepped, with a fake resource manager and a site worker per site, the
//! components' processes and a client, all in one thread on a virtual clock, driven by one
//! seed ([`plan::plan`]). Between the driver and each manager a network delays every call
//! and answer; the faults of the plan strike at their times; after every step the
//! invariants of [`check`] are checked. A failing seed is one command that replays it
//! exactly: `cargo run -p coalloc-testkit --bin coalloc-simtest -- --seed N`.
//!
//! Some sites are agent sites ([`plan::AgentPlan`], in about half the seeds): the driver
//! reaches them through their agent over a seeded network with delay, loss and partitions,
//! each end running the link's real sans-IO session (`sim::net`, `sim::agent`); agents crash and
//! restart. With `--files`, in about a third, jobs take input files, whose transfers are
//! played on the clock and cut half-way (`sim::files`). In about half, some sites may reserve
//! and some jobs ask for advance reservation (issue 31, [`plan`]): the managers keep a
//! calendar of reservations (`sim::calendar`), the driver's reservation calls reach them as
//! its site workers make them, with the managers' and the link's faults (`sim::reserve`), and
//! [`check`] sees that no launch runs before its window, no barrier is released before
//! its run's promised start, and nothing is left at any manager. `--classic` runs a
//! seed's plan without agents, files or reservations, as before they came. `--failover`
//! adds fail-overs to a standby (issue 32, `sim::failover`): the leader frozen or cut off, a
//! second driver taking over from the shared, fenced journal, the deposed one running on
//! unaware until its writes are refused; about half the fail-overs wait for a turn that
//! submits two or more components of one job to agent sites and cut the leader off in the
//! middle of it, one of the job's submissions delivered and the rest lost with it.
//!
//! A harness of our own rather than turmoil or madsim: the driver is already a machine
//! that takes its time and inputs as arguments, so there is no async code to run on a
//! simulated runtime; what sits around it (site workers, managers, processes) is a few
//! hundred lines of plain state kept in one event queue, as quinn-proto's `Pair` keeps two
//! endpoints.

mod agent;
mod calendar;
pub mod check;
mod failover;
mod files;
mod link;
mod net;
pub mod plan;
mod reruns;
mod reserve;
mod rm;

use coalloc_backends::{Backend, BackendError, RemoteId, RemoteState, SiteLoad, SubmitRequest};
use coalloc_core::model::Time;
use coalloc_core::scheduler::jobs::Phase;
use coalloc_server::config::ServerConfig;
use coalloc_server::driver::{Driver, Fatal, Parts, Shared};
use coalloc_server::journal::MemJournal;
use coalloc_server::msg::{ApiError, BarrierAnswer, EditRequest, Msg, Report, Request, SiteLink};
use coalloc_server::state::StateDir;
use link::{Call, Outbox, SimLink, SimWork, WorkBox};
use net::{Net, NetEv};
use plan::{EditPlan, Fault, Plan};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rm::Rm;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::oneshot;

/// What went wrong in a run: the seed, the virtual time, the broken invariant.
#[derive(Debug, Clone, thiserror::Error)]
#[error("seed {seed} at +{at} ms: {what}\n  replay: cargo run -p coalloc-testkit --bin coalloc-simtest -- --seed {seed}{flags} --trace")]
pub struct Violation {
    pub seed: u64,
    /// The replay's other flags (` --classic`).
    pub flags: &'static str,
    /// Milliseconds since the run's start.
    pub at: Time,
    pub what: String,
}

/// What a run that kept every invariant did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Outcome {
    pub seed: u64,
    pub jobs: usize,
    pub crashes: u32,
    /// Crashes of the host that took unsynced journal records with them.
    pub lost_tails: u32,
    pub steps: u64,
    /// Virtual milliseconds the run took.
    pub length: Time,
    pub launches: usize,
    /// Sites reached through an agent.
    pub agent_sites: usize,
    pub partitions: u32,
    /// Agent connections the server welcomed.
    pub reconnects: u32,
    /// Input-file transfers started, and those cut half-way.
    pub transfers: u32,
    pub cut_transfers: u32,
    /// Jobs that asked for advance reservation, reservations the managers made, and
    /// launches that ran in their reservation's window.
    pub reserving_jobs: usize,
    pub reservations: u32,
    pub reserved_runs: u32,
    /// Fail-overs to a standby, writes of deposed leaders refused, and turns they ran after
    /// the takeover that wrote nothing.
    pub failovers: u32,
    pub refused: u32,
    pub deposed_turns: u32,
    /// Fail-overs that struck between two submissions of one job (`Fault::Failover`'s
    /// `split`).
    pub split_turns: u32,
    /// The started-twice check's reach (`reruns`): programs started, those started while
    /// the check held for their job (no fault that may start it again before), and the jobs
    /// such a fault excused by the run's end.
    pub starts: u32,
    pub starts_checked: u32,
    pub excused_jobs: usize,
}

/// Run the plan of `seed`; `trace` prints every event.
pub fn run(seed: u64, trace: bool) -> Result<Outcome, Violation> {
    run_plan(plan::plan(seed), trace)
}

/// Run the plan of `seed` with input files ([`plan::with_files`]).
pub fn run_files(seed: u64, trace: bool) -> Result<Outcome, Violation> {
    run_plan(plan::with_files(seed), trace)
}

/// Run the plan of `seed` with fail-overs ([`plan::failover`]).
pub fn run_failover(seed: u64, trace: bool) -> Result<Outcome, Violation> {
    run_plan(plan::failover(seed), trace)
}

/// Run the plan of `seed` under another queue policy ([`plan::policies`]).
pub fn run_policies(seed: u64, trace: bool) -> Result<Outcome, Violation> {
    run_plan(plan::policies(seed), trace)
}

/// Run the plan of `seed` without agent sites ([`plan::classic`]).
pub fn run_classic(seed: u64, trace: bool) -> Result<Outcome, Violation> {
    run_plan(plan::classic(seed), trace)
}

fn run_plan(plan: Plan, trace: bool) -> Result<Outcome, Violation> {
    // One directory per run: runs of one seed may go on at once (tests on threads).
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let seed = plan.seed;
    let dir = std::env::temp_dir().join(format!("coalloc-sim-{}-{run}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = World::new(plan, dir.clone(), trace).and_then(World::run);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// A backend for the driver's direct uses (a cloud site's size, files): none here.
struct NoBackend;

impl Backend for NoBackend {
    fn submit(&self, _: &SubmitRequest) -> Result<RemoteId, BackendError> {
        Err(BackendError::Unavailable("simulated".into()))
    }
    fn query(&self, ids: &[RemoteId]) -> Result<Vec<RemoteState>, BackendError> {
        Ok(vec![RemoteState::Unknown; ids.len()])
    }
    fn cancel(&self, _: &RemoteId) -> Result<(), BackendError> {
        Ok(())
    }
    fn load(&self) -> Result<SiteLoad, BackendError> {
        Err(BackendError::Unavailable("simulated".into()))
    }
}

/// Something that happens at a time.
enum Ev {
    Submit(usize),
    Cancel(usize),
    /// The client commits a job held at the barrier.
    Commit(usize),
    Edit(usize),
    Fault(Fault),
    Restart,
    /// A call of the server of incarnation `epoch` reaches a site's manager.
    Call(u64, usize, Call),
    /// A worker retries cancelling an unrecorded submission (`attempt` from 1).
    CancelUnrecorded(usize, u64, u32),
    /// A worker retries a cancel that failed (`attempt` from 1), as `SiteWorker` does.
    CancelAgain(usize, String, u32),
    /// The server of incarnation `epoch` tries a reservation call at a site again (a
    /// deletion or a list; `attempt` from 2).
    ReserveAgain(u64, usize, coalloc_server::msg::ReserveCall, u32),
    /// The worker of incarnation `epoch` hears an answer and reports it.
    Report(u64, Report),
    Poll(u64, usize),
    RmWake(usize),
    /// Process `rank` of launch `id` at a site checks in at the barrier.
    CheckIn(usize, u64, u32),
    Exit(usize, u64, bool),
    Lose(usize, u64),
    /// On the network between the server and its agents.
    Net(NetEv),
    /// File work of the server of incarnation `epoch` (0: the client's).
    Work(u64, files::Step),
}

/// A reply the harness waits for.
enum Wait {
    Submit(usize, oneshot::Receiver<Vec<Result<(u64, bool), String>>>),
    SubmitArray(usize, oneshot::Receiver<Result<u64, String>>),
    /// The client's commit of planned job `i`: asked again until it is taken.
    Commit(usize, oneshot::Receiver<Result<(), ApiError>>),
    Cancel(oneshot::Receiver<Result<(), ApiError>>),
    /// A process's check-in (site, manager's id, rank), asked of incarnation `.3`.
    Barrier(
        usize,
        u64,
        u32,
        u64,
        oneshot::Receiver<Result<BarrierAnswer, ApiError>>,
    ),
}

/// The running server.
struct Server {
    driver: Driver,
    outbox: Outbox,
    /// The driver's file work not played yet.
    work: WorkBox,
    /// Each direct site's worker's watched launches (in the server's memory: gone with it;
    /// an agent site's are in its `AgentCalls`).
    watched: Vec<BTreeMap<u64, String>>,
    _shared: Shared,
    _rx: std::sync::mpsc::Receiver<Msg>,
    /// The event stream, printed with `--trace`.
    events: tokio::sync::broadcast::Receiver<String>,
}

struct World {
    plan: Plan,
    config: ServerConfig,
    dir: PathBuf,
    trace: bool,
    rng: ChaCha8Rng,
    now: Time,
    queue: BTreeMap<(Time, u64), Ev>,
    seq: u64,
    rms: Vec<Rm>,
    journal: MemJournal,
    server: Option<Server>,
    epoch: u64,
    /// A leader another server took the lease from, running on ([`failover`]).
    deposed: Option<failover::Deposed>,
    /// The journal's last entry checked by [`World::check_epochs`], and its fencing number.
    epochs_seen: (i64, i64),
    waiting: Vec<Wait>,
    /// Acknowledged jobs: number -> planned job.
    acked: BTreeMap<u64, usize>,
    /// Planned job -> its numbers (an array's elements), once acknowledged.
    numbers: BTreeMap<usize, Vec<u64>>,
    /// Processes of launches started before this never check in.
    mute_until: Time,
    /// A cut commit or snapshot is armed: the server restarts this long after it dies,
    /// and (a snapshot's) everything it did was committed before.
    cut_down: Option<(Time, bool)>,
    /// The state before a clean crash, to compare with the restart's.
    digest: Option<Vec<(&'static str, Vec<u8>)>>,
    /// The agents, the server's ends of their links, and the network between.
    net: Net,
    files: files::Files,
    /// The core's state as text at the crash, to show a difference.
    described: String,
    /// Sites whose manager's reading the server has been given (before it, the core counts
    /// a site's every processor idle).
    read: Vec<bool>,
    /// Per agent site, the launches the server discarded that its agent has not yet been
    /// told of, and those a crash of the server took with it (kept in its memory only).
    discards_unsent: Vec<std::collections::BTreeSet<String>>,
    discards_lost: Vec<std::collections::BTreeSet<String>>,
    /// Since when every job is over and every fault past (`check::undiscarded`).
    quiet_since: Option<Time>,
    /// Since when the run is over with reservations still at some manager
    /// (`check::reservations_settled`).
    reservations_over: Option<Time>,
    /// What the started-twice check knows (`reruns`).
    reruns: reruns::Reruns,
    /// A fail-over armed to cut the leader off in the middle of a turn's submissions
    /// ([`Fault::Failover`]'s `split`): its `back` and `exit`, and since when it waits.
    split_armed: Option<(Time, Time, Time)>,
    out: Outcome,
}

const MONITOR: Time = 200;
const RETRY: Time = 1000;

/// When the site worker tries a failed cancel again, after `attempt` tries: the server's own
/// schedule.
fn retry_after(attempt: u32) -> Option<Time> {
    coalloc_server::sites::cancel_retry_after(attempt).map(|d| d.as_millis() as Time)
}

impl World {
    fn new(plan: Plan, dir: PathBuf, trace: bool) -> Result<World, Violation> {
        let bad = |what: String| Violation {
            seed: plan.seed,
            flags: plan.flags(),
            at: 0,
            what,
        };
        let config = ServerConfig::parse(&plan.config())
            .map_err(|e| bad(format!("the plan's configuration: {e}")))?;
        let rms = plan.sites.iter().cloned().map(Rm::new).collect();
        Ok(World {
            rng: ChaCha8Rng::seed_from_u64(plan.seed ^ 0x005e_ed0f_7e57),
            config,
            dir,
            trace,
            now: plan::T0,
            queue: BTreeMap::new(),
            seq: 0,
            rms,
            journal: MemJournal::default(),
            server: None,
            epoch: 0,
            deposed: None,
            epochs_seen: (0, 0),
            waiting: Vec::new(),
            acked: BTreeMap::new(),
            numbers: BTreeMap::new(),
            mute_until: 0,
            cut_down: None,
            digest: None,
            net: Net::new(&plan),
            files: files::Files::default(),
            described: String::new(),
            read: vec![false; plan.sites.len()],
            discards_unsent: vec![Default::default(); plan.sites.len()],
            discards_lost: vec![Default::default(); plan.sites.len()],
            quiet_since: None,
            reservations_over: None,
            reruns: reruns::Reruns::default(),
            split_armed: None,
            out: Outcome {
                seed: plan.seed,
                jobs: plan.jobs.len(),
                agent_sites: plan.sites.iter().filter(|s| s.agent.is_some()).count(),
                reserving_jobs: plan.jobs.iter().filter(|j| j.reserve.is_some()).count(),
                ..Outcome::default()
            },
            plan,
        })
    }

    fn at(&mut self, t: Time, ev: Ev) {
        self.seq += 1;
        self.queue.insert((t, self.seq), ev);
    }

    fn violation(&self, what: impl Into<String>) -> Violation {
        Violation {
            seed: self.plan.seed,
            flags: self.plan.flags(),
            at: self.now - plan::T0,
            what: what.into(),
        }
    }

    fn log(&self, what: impl FnOnce() -> String) {
        if self.trace {
            eprintln!("+{:>7} {}", self.now - plan::T0, what());
        }
    }

    /// A network delay.
    fn delay(&mut self) -> Time {
        self.rng.random_range(1..30)
    }

    fn run(mut self) -> Result<Outcome, Violation> {
        for i in 0..self.plan.jobs.len() {
            let j = &self.plan.jobs[i];
            let (at, cancel) = (j.at, j.cancel_at);
            self.at(at, Ev::Submit(i));
            if let Some(c) = cancel {
                self.at(c, Ev::Cancel(i));
            }
            if let Some(c) = self.plan.jobs[i].commit_at {
                self.at(c, Ev::Commit(i));
            }
            if let Some((t, _)) = self.plan.jobs[i].edit {
                self.at(t, Ev::Edit(i));
            }
        }
        for (t, f) in self.plan.faults.clone() {
            self.at(t, Ev::Fault(f));
        }
        for site in 0..self.plan.sites.len() {
            if self.net.is_agent(site) {
                self.at(self.now, Ev::Net(NetEv::Connect { site, gen: 0 }));
            }
        }
        self.log(|| format!("configuration:\n{}", self.plan.config()));
        self.files_start();
        self.start_server()?;
        let deadline = self.plan.faults_end + 40 * 60_000;
        loop {
            let ev_at = self.queue.keys().next().map(|k| k.0);
            let drv_at = self
                .server
                .as_ref()
                .map(|s| s.driver.next_wakeup().max(self.now + 1));
            let net_at = self.net.next_timeout().map(|t| t.max(self.now));
            let dep_at = self.deposed_at();
            let Some(t) = [ev_at, drv_at, net_at, dep_at].into_iter().flatten().min() else {
                break;
            };
            self.now = self.now.max(t);
            if self.now > deadline {
                return Err(self.violation(format!(
                    "not over 40 minutes after the last fault: {}",
                    self.unfinished()
                )));
            }
            self.net_timeouts();
            let mut inputs = Vec::new();
            while let Some(e) = self.queue.first_entry() {
                if e.key().0 > self.now {
                    break;
                }
                let ev = e.remove();
                self.handle(ev, &mut inputs)?;
            }
            let due = drv_at.is_some_and(|w| w <= self.now);
            if self.server.is_some() && (due || !inputs.is_empty()) {
                self.step(inputs)?;
            }
            self.deposed_step()?;
            self.check_epochs()?;
            self.check()?;
            if self.done() && self.discards_settled()? && self.reservations_settled()? {
                break;
            }
        }
        self.acked_survive()?;
        self.out.length = self.now - plan::T0;
        self.out.launches = self.rms.iter().map(|r| r.launches.len()).sum();
        (self.out.transfers, self.out.cut_transfers) = (self.files.transfers, self.files.cut);
        self.out.reservations = self.rms.iter().map(|r| r.made).sum();
        self.out.reserved_runs = (self.rms.iter())
            .flat_map(|r| r.launches.values())
            .filter(|l| l.reservation.is_some() && !matches!(l.state, rm::St::Pending { .. }))
            .count() as u32;
        (self.out.starts, self.out.starts_checked) = (self.reruns.starts, self.reruns.checked);
        self.out.excused_jobs = self.reruns.excused();
        Ok(self.out)
    }

    /// Every job acknowledged and ended, every fault past, nothing left at any manager.
    fn done(&self) -> bool {
        self.now >= self.plan.faults_end
            && self.server.is_some()
            && self.deposed.is_none()
            && self.split_armed.is_none()
            && !self
                .queue
                .values()
                .any(|e| matches!(e, Ev::Fault(_) | Ev::Restart))
            && self.unfinished().is_empty()
    }

    /// What is not over: jobs not ended, launches still at a manager.
    fn unfinished(&self) -> String {
        let mut out = Vec::new();
        if let Some(s) = &self.server {
            for (id, i) in &self.acked {
                match s.driver.core().job(*id) {
                    Some(j) if j.phase != Phase::Ended => {
                        out.push(format!("job {id} (j{i}) {:?}", j.phase))
                    }
                    _ => {}
                }
            }
        }
        if self.numbers.len() + self.files.refused.len() < self.plan.jobs.len() {
            out.push(format!(
                "{} of {} jobs acknowledged",
                self.numbers.len(),
                self.plan.jobs.len()
            ));
        }
        if self.server.is_none() {
            out.push("the server is down".into());
        }
        for (site, rm) in self.rms.iter().enumerate() {
            for (id, l) in &rm.launches {
                if matches!(l.state, rm::St::Pending { .. } | rm::St::Running { .. }) {
                    out.push(format!(
                        "R{id} at s{site} (job {} component {} launch {}) {:?}",
                        l.job, l.component, l.launch, l.state
                    ));
                }
            }
        }
        out.join("; ")
    }

    fn start_server(&mut self) -> Result<(), Violation> {
        let n = self.plan.sites.len();
        let outbox = Outbox::default();
        let sites = (0..n)
            .map(|site| {
                Box::new(SimLink {
                    site,
                    out: outbox.clone(),
                }) as Box<dyn SiteLink>
            })
            .collect();
        let backends = (0..n)
            .map(|_| Arc::new(NoBackend) as Arc<dyn Backend>)
            .collect();
        let (tx, rx) = std::sync::mpsc::channel();
        let work = WorkBox::default();
        let parts = Parts {
            // Every server takes the journal's lease as it starts (a restart too: the same
            // owner takes it at once), so that a deposed leader's writes are refused.
            journal: Box::new(self.journal.lead()),
            sites,
            backends,
            tx,
            work: Box::new(SimWork(work.clone())),
            inline_snapshots: true,
        };
        let state = StateDir::create(&self.dir)
            .map_err(|e| self.violation(format!("state directory: {e}")))?;
        let (mut driver, shared) = Driver::open(
            self.config.clone(),
            parts,
            state,
            "http://sim.invalid".into(),
        )
        .map_err(|e| self.violation(format!("the server did not start: {e}")))?;
        if let Some(before) = self.digest.take() {
            let after = driver.digest().unwrap_or_default();
            let differ: Vec<&str> = before
                .iter()
                .zip(&after)
                .filter(|(b, a)| b != a)
                .map(|(b, _)| b.0)
                .collect();
            if !differ.is_empty() || before.len() != after.len() {
                let dir = std::env::temp_dir();
                let (b, a) = (
                    dir.join(format!("coalloc-sim-{}-before.txt", self.plan.seed)),
                    dir.join(format!("coalloc-sim-{}-after.txt", self.plan.seed)),
                );
                let _ = std::fs::write(&b, &self.described);
                let _ = std::fs::write(&a, driver.describe_core());
                return Err(self.violation(format!(
                    "a restart from the journal reached another state than the run that wrote it (differs: {differ:?}; the cores: diff {} {})",
                    b.display(),
                    a.display()
                )));
            }
        }
        let history = self.journal.history();
        for (id, i) in &self.acked {
            // An ended job leaves memory for the history (`min_job_age`).
            if driver.core().job(*id).is_none() && !history.iter().any(|h| h.job == *id) {
                return Err(self.violation(format!(
                    "acknowledged job {id} (j{i}) is gone after a restart"
                )));
            }
        }
        driver.resume(self.now);
        self.epoch += 1;
        self.net_server_up();
        self.log(|| format!("server up (incarnation {})", self.epoch));
        self.server = Some(Server {
            driver,
            outbox,
            work,
            watched: vec![BTreeMap::new(); n],
            events: shared.events.subscribe(),
            _shared: shared,
            _rx: rx,
        });
        // An agent site's link polls it (`AgentCalls`), while it is up.
        let direct: Vec<usize> = (0..n).filter(|s| !self.net.is_agent(*s)).collect();
        for site in direct {
            let t = self.now + 1 + site as Time * 7;
            self.at(t, Ev::Poll(self.epoch, site));
        }
        self.after_step()
    }

    fn crash(&mut self, down: Time, clean: bool) {
        if let Some(s) = self.server.take() {
            // The next incarnation has been given no reading yet: one delivered in a turn
            // whose commit was cut is not in its journal (seed 100351: the idle check failed
            // on a restarted core that still counted the configured size idle).
            self.read.iter_mut().for_each(|r| *r = false);
            // Every other crash is the host's: what the journal had not synced is gone
            // (the driver's lazy commits, `Store::append_unsynced`); a restart then reaches
            // an earlier state, so the state is compared only when nothing was lost.
            let host = (self.plan.seed + u64::from(self.out.crashes)) % 2 == 1;
            let lost = if host {
                self.journal.lose_unsynced()
            } else {
                0
            };
            // Numbering goes on after the durable entries.
            let last = coalloc_server::journal::Store::last_seq(&self.journal);
            self.epochs_seen.0 = self.epochs_seen.0.min(last);
            if clean && lost == 0 {
                self.digest = s.driver.digest();
                self.described = s.driver.describe_core();
            }
            self.out.crashes += 1;
            self.out.lost_tails += u32::from(lost > 0);
            self.log(|| {
                format!("server crashes (restart in {down} ms; {lost} unsynced records lost)")
            });
            // Discards not yet sent to an agent were in the server's memory only.
            for (unsent, lost) in self.discards_unsent.iter_mut().zip(&mut self.discards_lost) {
                lost.append(unsent);
            }
            drop(s);
            self.net_server_gone();
            // Their replies are gone with the server: the callers try again.
            for w in std::mem::take(&mut self.waiting) {
                match w {
                    Wait::Submit(i, _) | Wait::SubmitArray(i, _) => {
                        self.at(self.now + RETRY, Ev::Submit(i))
                    }
                    Wait::Commit(i, _) => self.at(self.now + RETRY, Ev::Commit(i)),
                    Wait::Barrier(site, id, rank, _, _) => {
                        self.at(self.now + RETRY, Ev::CheckIn(site, id, rank))
                    }
                    Wait::Cancel(_) => {}
                }
            }
            self.at(self.now + down, Ev::Restart);
        }
    }

    fn step(&mut self, inputs: Vec<Msg>) -> Result<(), Violation> {
        let s = self.server.as_mut().expect("server up");
        self.out.steps += 1;
        match s.driver.step(self.now, inputs) {
            Ok(_) => self.after_step(),
            Err(Fatal(e)) => {
                self.log(|| format!("commit cut: {e}"));
                let (down, clean) = self.cut_down.take().unwrap_or((0, false));
                // A snapshot is written after the turn: its replies and calls went out.
                // All of them: a fail-over armed to split the turn's submissions waits for
                // the next leader's, since a dead server is cut off from nothing and
                // deposed by no one (it ran on as the deposed leader, and its next turn
                // failed with this error again: seed 6775 of `--failover`).
                if e.contains("snapshot") {
                    let armed = self.split_armed.take();
                    let sent = self.after_step();
                    self.split_armed = armed;
                    sent?;
                }
                self.crash(down, clean);
                Ok(())
            }
        }
    }

    /// Take the replies and the calls of the turn.
    fn after_step(&mut self) -> Result<(), Violation> {
        if self.trace {
            if let Some(s) = &mut self.server {
                while let Ok(e) = s.events.try_recv() {
                    eprintln!("+{:>7}   server: {e}", self.now - plan::T0);
                }
            }
        }
        for w in std::mem::take(&mut self.waiting) {
            self.answer(w)?;
        }
        let calls: Vec<(usize, Call)> = match &self.server {
            Some(s) => std::mem::take(&mut *s.outbox.lock().unwrap_or_else(|e| e.into_inner())),
            None => return Ok(()),
        };
        let work = match &self.server {
            Some(s) => std::mem::take(&mut *s.work.lock().unwrap_or_else(|e| e.into_inner())),
            None => Vec::new(),
        };
        for w in work {
            self.play(w);
        }
        self.files_after_step()?;
        let epoch = self.epoch;
        let mut to_agents: BTreeMap<usize, Vec<Call>> = BTreeMap::new();
        for (site, call) in calls {
            // Reservation calls go on threads of their own, at every kind of site.
            if let Call::Reserve(rc) = call {
                self.reserve_sent(epoch, site, rc);
                continue;
            }
            // An agent site's calls all go to its link (`AgentLink`).
            if self.net.is_agent(site) {
                if let Call::Discard(remote) = &call {
                    self.discards_unsent[site].insert(remote.clone());
                }
                to_agents.entry(site).or_default().push(call);
                continue;
            }
            match call {
                Call::Watch { launch, remote } => {
                    if let Some(s) = &mut self.server {
                        s.watched[site].insert(launch, remote);
                    }
                }
                Call::Forget(launch) => {
                    if let Some(s) = &mut self.server {
                        s.watched[site].remove(&launch);
                    }
                }
                Call::KillLocal(_) | Call::Lease(_) | Call::Release { .. } => {}
                c => {
                    if let Call::CancelUnrecorded { launch, job, .. } = &c {
                        // A direct site's manager cannot say whether it took the submission:
                        // the server fails it and places its component again in this same
                        // turn, so its job may start again from now, not from when this
                        // cancel reaches the site (the replacement's submission, to another
                        // site, may get there first: seed 3336 of `--failover`). An agent's
                        // hello says instead.
                        let (launch, job) = (*launch, *job);
                        self.excuse_job(job, || {
                            format!("launch {launch} at direct s{site} cancelled by number")
                        });
                    }
                    let t = self.now + self.delay();
                    self.at(t, Ev::Call(epoch, site, c));
                }
            }
        }
        if self.split_armed.is_some() {
            self.agent_calls_split(to_agents);
        } else {
            for (site, calls) in to_agents {
                self.agent_calls(site, calls);
            }
        }
        Ok(())
    }

    /// A turn's agent calls with a fail-over armed to split it ([`Fault::Failover`]'s
    /// `split`): handed over one at a time, and the leader cut off (the fail-over) right
    /// after a submission to a linked agent site when a later one of the turn is of the
    /// same job; the turn's calls after it never leave the leader. Armed for 20 s at most:
    /// then the fail-over strikes after the turn.
    fn agent_calls_split(&mut self, to_agents: BTreeMap<usize, Vec<Call>>) {
        let calls: Vec<(usize, Call)> = to_agents
            .into_iter()
            .flat_map(|(site, calls)| calls.into_iter().map(move |c| (site, c)))
            .collect();
        let job_of = |c: &Call| match c {
            Call::Submit(r) => Some(r.job),
            _ => None,
        };
        let jobs: Vec<Option<u64>> = calls.iter().map(|(_, c)| job_of(c)).collect();
        for (k, (site, call)) in calls.into_iter().enumerate() {
            let linked = self.net.ends[site]
                .as_ref()
                .is_some_and(|e| e.conn.is_some());
            self.agent_calls(site, vec![call]);
            let again = jobs[k].is_some_and(|j| jobs[k + 1..].contains(&Some(j)));
            // One deposed leader at a time ([`World::failover`]).
            if linked && again && self.deposed.is_none() {
                if let Some((back, exit, _)) = self.split_armed.take() {
                    self.out.split_turns += 1;
                    self.log(|| {
                        format!(
                            "the leader is cut off in the middle of job {}'s submissions",
                            jobs[k].unwrap_or_default()
                        )
                    });
                    self.failover(back, exit);
                    return;
                }
            }
        }
        if let Some((back, exit, since)) = self.split_armed {
            if self.now >= since + 20_000 && self.deposed.is_none() {
                self.split_armed = None;
                self.failover(back, exit);
            }
        }
    }

    fn answer(&mut self, w: Wait) -> Result<(), Violation> {
        use oneshot::error::TryRecvError;
        match w {
            Wait::Submit(i, mut rx) => match rx.try_recv() {
                Ok(v) => match v.into_iter().next() {
                    Some(Ok((id, _))) => {
                        self.log(|| format!("j{i} acknowledged as job {id}"));
                        self.acked.insert(id, i);
                        self.numbers.insert(i, vec![id]);
                    }
                    Some(Err(e)) if self.files_refusal(i, &e) => {}
                    other => {
                        return Err(self.violation(format!("j{i} refused: {other:?}")));
                    }
                },
                Err(TryRecvError::Empty) => self.waiting.push(Wait::Submit(i, rx)),
                Err(TryRecvError::Closed) => self.at(self.now + RETRY, Ev::Submit(i)),
            },
            Wait::SubmitArray(i, mut rx) => match rx.try_recv() {
                Ok(Ok(first)) => {
                    let n = u64::from(self.plan.jobs[i].array);
                    self.log(|| format!("j{i} acknowledged as array {first}..{}", first + n));
                    let ids: Vec<u64> = (first..first + n).collect();
                    for id in &ids {
                        self.acked.insert(*id, i);
                    }
                    self.numbers.insert(i, ids);
                }
                Ok(Err(e)) => return Err(self.violation(format!("array j{i} refused: {e}"))),
                Err(TryRecvError::Empty) => self.waiting.push(Wait::SubmitArray(i, rx)),
                Err(TryRecvError::Closed) => self.at(self.now + RETRY, Ev::Submit(i)),
            },
            Wait::Commit(i, mut rx) => match rx.try_recv() {
                Err(TryRecvError::Empty) => self.waiting.push(Wait::Commit(i, rx)),
                // Taken, or committed already: the owner looks again later, for a run after
                // an abort waits for a commit of its own.
                Ok(r) if r.as_ref().map_or_else(|e| e.status == 409, |()| true) => {
                    self.log(|| format!("j{i} committed by its owner: {r:?}"));
                    let ended = self.numbers.get(&i).and_then(|ids| {
                        let s = self.server.as_ref()?;
                        Some(s.driver.core().job(ids[0])?.phase == Phase::Ended)
                    });
                    if ended == Some(false) {
                        self.at(self.now + 5 * RETRY, Ev::Commit(i));
                    }
                }
                Ok(Err(e)) if e.status == 404 => {}
                // Not at the barrier yet (or the server went away): again later.
                Ok(_) | Err(TryRecvError::Closed) => self.at(self.now + RETRY, Ev::Commit(i)),
            },
            Wait::Cancel(mut rx) => {
                if let Err(TryRecvError::Empty) = rx.try_recv() {
                    self.waiting.push(Wait::Cancel(rx));
                }
            }
            Wait::Barrier(site, id, rank, inc, mut rx) => match rx.try_recv() {
                Err(TryRecvError::Empty) => {
                    self.waiting.push(Wait::Barrier(site, id, rank, inc, rx))
                }
                Err(TryRecvError::Closed) => self.at(self.now + RETRY, Ev::CheckIn(site, id, rank)),
                Ok(Ok(BarrierAnswer::Released)) => {
                    check::released(self, site, id, inc)?;
                    self.files_released(site, id)?;
                    let l = self.rms[site].launches.get_mut(&id).expect("known launch");
                    l.released = true;
                    if !l.ending {
                        l.ending = true;
                        let t = self.now + l.runtime;
                        self.at(t, Ev::Exit(site, id, true));
                    }
                }
                Ok(Ok(BarrierAnswer::Waiting)) => {
                    self.at(self.now + RETRY, Ev::CheckIn(site, id, rank));
                }
                answer @ (Ok(Ok(BarrierAnswer::Aborted { .. })) | Ok(Err(_))) => {
                    if let Ok(Err(e)) = &answer {
                        // The program fails (the job's fault): its job may start again.
                        let job = self.rms[site].launches[&id].job;
                        self.excuse_job(job, || {
                            format!("R{id} at s{site} exits failing: its check-in refused ({e:?})")
                        });
                    }
                    let l = self.rms[site].launches.get_mut(&id).expect("known launch");
                    if !l.ending {
                        l.ending = true;
                        self.at(self.now + 1, Ev::Exit(site, id, false));
                    }
                }
            },
        }
        Ok(())
    }

    fn handle(&mut self, ev: Ev, inputs: &mut Vec<Msg>) -> Result<(), Violation> {
        // A client's or a component's request may reach a deposed leader ([`failover`]);
        // a component of an agent site reaches the server its agent is linked to.
        let request = match &ev {
            Ev::Submit(_) | Ev::Cancel(_) | Ev::Commit(_) | Ev::Edit(_) => true,
            Ev::CheckIn(site, ..) => !self.net.is_agent(*site),
            _ => false,
        };
        if request && self.asks_deposed() {
            let d = self.deposed.as_mut().expect("deposed");
            let (mut old, inc) = (std::mem::take(&mut d.inputs), d.incarnation);
            let r = self.handle_at(ev, true, inc, &mut old);
            if let Some(d) = self.deposed.as_mut() {
                d.inputs.append(&mut old);
            }
            return r;
        }
        let ev = match ev {
            Ev::Report(epoch, r) => match self.deposed_heard(epoch, r) {
                Some(r) => Ev::Report(epoch, r),
                None => return Ok(()),
            },
            ev => ev,
        };
        let up = self.server.is_some();
        self.handle_at(ev, up, self.epoch, inputs)
    }

    /// [`World::handle`] with a server of incarnation `inc` (`up`) taking the `inputs`.
    fn handle_at(
        &mut self,
        ev: Ev,
        up: bool,
        inc: u64,
        inputs: &mut Vec<Msg>,
    ) -> Result<(), Violation> {
        match ev {
            Ev::Submit(i) if !up => self.at(self.now + RETRY, Ev::Submit(i)),
            Ev::Submit(i) => {
                let job = coalloc_core::spec::native::from_toml(&self.plan.job_toml(i))
                    .map_err(|e| self.violation(format!("j{i}'s spec: {e}")))?;
                let n = self.plan.jobs[i].array;
                if n > 1 {
                    let (reply, rx) = oneshot::channel();
                    inputs.push(Msg::Api(Request::SubmitArray {
                        job: Box::new(job),
                        indexes: (0, n - 1),
                        reply,
                    }));
                    self.waiting.push(Wait::SubmitArray(i, rx));
                } else {
                    let (reply, rx) = oneshot::channel();
                    inputs.push(Msg::Api(Request::Submit {
                        jobs: vec![job],
                        reply,
                    }));
                    self.waiting.push(Wait::Submit(i, rx));
                }
            }
            Ev::Commit(i) => match self.numbers.get(&i) {
                Some(ids) if up => {
                    let (reply, rx) = oneshot::channel();
                    inputs.push(Msg::Api(Request::Commit { job: ids[0], reply }));
                    self.waiting.push(Wait::Commit(i, rx));
                }
                None if !self.submitting(i) => {}
                _ => self.at(self.now + RETRY, Ev::Commit(i)),
            },
            Ev::Edit(i) => match (self.numbers.get(&i), self.plan.jobs[i].edit) {
                (Some(ids), Some((_, e))) if up => {
                    let job = ids[0];
                    let runtime = self.plan.jobs[i].runtime;
                    let comp = || {
                        coalloc_core::model::Component::new(1).with(|d| {
                            d.executable = Some("sim".into());
                            d.arguments = vec![runtime.to_string()];
                        })
                    };
                    let edit = match e {
                        EditPlan::Add => EditRequest::Add(comp()),
                        EditPlan::Delete(c) => EditRequest::Delete(c),
                        EditPlan::Substitute(c) => EditRequest::Substitute(c, comp()),
                    };
                    self.log(|| format!("client edits job {job}: {e:?}"));
                    // It stops, adds or replaces components.
                    self.excuse_job(job, || format!("the client edits it: {e:?}"));
                    let (reply, rx) = oneshot::channel();
                    inputs.push(Msg::Api(Request::Edit { job, edit, reply }));
                    self.waiting.push(Wait::Cancel(rx));
                }
                (None, _) if !self.submitting(i) => {}
                _ => self.at(self.now + RETRY, Ev::Edit(i)),
            },
            Ev::Cancel(i) => match self.numbers.get(&i).cloned() {
                // Not acknowledged yet when its submission is no longer under way: the job
                // was never there to cancel.
                None if !self.submitting(i) => {}
                Some(ids) if up => {
                    for job in ids {
                        self.log(|| format!("client cancels job {job}"));
                        self.excuse_job(job, || "the client cancels it".into());
                        let (reply, rx) = oneshot::channel();
                        inputs.push(Msg::Api(Request::Cancel { job, reply }));
                        self.waiting.push(Wait::Cancel(rx));
                    }
                }
                // Not acknowledged yet, or the server is down: ask again later.
                _ => self.at(self.now + RETRY, Ev::Cancel(i)),
            },
            Ev::Fault(f) => self.fault(f),
            Ev::Restart => self.start_server()?,
            Ev::Call(epoch, site, call) => self.call(epoch, site, call),
            Ev::CancelAgain(site, remote, attempt) => {
                if attempt == 1 {
                    self.rms[site].asked_to_cancel(self.now, Some(&remote), None);
                }
                let r = self.rms[site].cancel(self.now, &remote);
                self.log(|| format!("s{site} cancels {remote}: {r:?}"));
                if let (Err(_), Some(t)) = (&r, retry_after(attempt)) {
                    self.at(self.now + t, Ev::CancelAgain(site, remote, attempt + 1));
                }
                self.rm_wake(site);
            }
            Ev::ReserveAgain(epoch, site, call, attempt) => {
                self.reserve_again(epoch, site, call, attempt)
            }
            Ev::CancelUnrecorded(site, launch, attempt) => {
                if attempt == 1 {
                    self.rms[site].asked_to_cancel(self.now, None, Some(launch));
                }
                let r = self.rms[site].cancel_launch(self.now, launch);
                if let (Err(_), Some(t)) = (r, retry_after(attempt)) {
                    self.at(
                        self.now + t,
                        Ev::CancelUnrecorded(site, launch, attempt + 1),
                    );
                }
            }
            Ev::Report(epoch, r) => {
                if up && epoch == self.epoch {
                    if let Report::Polled { site, load, states } = &r {
                        self.log(|| format!("s{site} reading: {load:?} {states:?}"));
                        self.read[*site] |= load.is_ok();
                    }
                    self.told(&r);
                    inputs.push(Msg::Site(r));
                }
            }
            Ev::Poll(epoch, site) => {
                // A deposed leader's site workers poll on once it is back ([`failover`]).
                if let Some(back) = self.deposed_back(epoch).filter(|b| *b > self.now) {
                    self.at(back, Ev::Poll(epoch, site));
                } else if let Some(s) = self.server_of(epoch) {
                    let rm = &self.rms[site];
                    let load = rm.load(self.now);
                    let watched = &s.watched[site];
                    let states = if load.is_ok() {
                        watched.iter().map(|(l, r)| (*l, rm.state(r))).collect()
                    } else {
                        Vec::new()
                    };
                    let t = self.now + self.delay();
                    self.at(t, Ev::Report(epoch, Report::Polled { site, load, states }));
                    self.at(self.now + MONITOR, Ev::Poll(epoch, site));
                }
            }
            Ev::RmWake(site) => self.rm_wake(site),
            Ev::Net(e) => self.net_event(e),
            Ev::Work(epoch, step) => self.files_event(epoch, step, inputs),
            Ev::CheckIn(site, id, rank) => {
                let Some(l) = self.rms[site].launches.get_mut(&id) else {
                    return Ok(());
                };
                if !l.running() || l.ending {
                    return Ok(());
                }
                // On an agent site, through the agent's relay.
                if !up || !self.net.relay_up(site, self.now) {
                    self.at(self.now + RETRY, Ev::CheckIn(site, id, rank));
                    return Ok(());
                }
                l.checked.insert(rank);
                let (job, launch) = (l.job, l.launch);
                let (reply, rx) = oneshot::channel();
                inputs.push(Msg::Api(Request::Barrier {
                    job,
                    secret: None,
                    launch,
                    local_rank: rank,
                    ok: true,
                    reason: None,
                    hold: true,
                    reply,
                }));
                self.waiting.push(Wait::Barrier(site, id, rank, inc, rx));
            }
            Ev::Exit(site, id, ok) => {
                self.rms[site].exit(id, ok);
                self.rm_wake(site);
            }
            Ev::Lose(site, id) => {
                self.log(|| format!("s{site} loses R{id}"));
                if let Some(l) = self.rms[site].launches.get(&id) {
                    let job = l.job;
                    self.excuse_job(job, || format!("s{site} lost R{id}"));
                }
                self.rms[site].lose(id);
                self.rm_wake(site);
            }
        }
        Ok(())
    }

    /// The server hears of launches its managers took: it may record their ids (and so
    /// discard them once their job leaves memory).
    fn told(&mut self, r: &Report) {
        let taken: Vec<(u64, &String)> = match r {
            Report::Submitted {
                launch,
                result: Ok(remote),
                ..
            } => vec![(*launch, remote)],
            Report::SubmittedMany(_, all) => all
                .iter()
                .filter_map(|(l, r)| Some((*l, r.as_ref().ok()?)))
                .collect(),
            _ => return,
        };
        for (launch, remote) in taken {
            let Some(id) = rm::parse_remote(remote) else {
                continue;
            };
            for rm in &mut self.rms {
                if let Some(l) = rm.launches.get_mut(&id).filter(|l| l.launch == launch) {
                    l.told = true;
                }
            }
        }
    }

    /// Planned job `i`'s submission is under way (queued or waiting for its answer).
    fn submitting(&self, i: usize) -> bool {
        self.queue
            .values()
            .any(|e| matches!(e, Ev::Submit(j) if *j == i))
            || self
                .waiting
                .iter()
                .any(|w| matches!(w, Wait::Submit(j, _) | Wait::SubmitArray(j, _) if *j == i))
    }

    fn fault(&mut self, f: Fault) {
        self.log(|| format!("fault: {f:?}"));
        self.fault_excuses(f);
        match f {
            Fault::Crash { down } => self.crash(down, true),
            Fault::CutCommit { down } => {
                if self.server.is_some() {
                    self.journal.cut_next_append();
                    self.cut_down = Some((down, false));
                }
            }
            Fault::CutSnapshot { down } => {
                if let Some(s) = &mut self.server {
                    s.driver.cut_next_snapshot();
                    // Not clean if a cut commit is armed too (it may strike first).
                    let clean = self.cut_down.is_none_or(|(_, clean)| clean);
                    self.cut_down = Some((down, clean));
                }
            }
            Fault::ManagerDown { site, length } => {
                let rm = &mut self.rms[site];
                rm.down_until = rm.down_until.max(self.now + length);
            }
            Fault::SlowCancels { site, length } => {
                let rm = &mut self.rms[site];
                rm.slow_cancels_until = rm.slow_cancels_until.max(self.now + length);
            }
            Fault::Mute { length } => self.mute_until = self.mute_until.max(self.now + length),
            Fault::Partition { .. } | Fault::AgentCrash { .. } => self.net_fault(f),
            Fault::CutTransfers { length } => {
                self.files.cut_until = self.files.cut_until.max(self.now + length)
            }
            Fault::Failover { back, exit, split } => {
                if split && self.server.is_some() && self.deposed.is_none() {
                    self.log(|| "fail-over armed: it strikes in a turn's submissions".into());
                    self.split_armed.get_or_insert((back, exit, self.now));
                } else {
                    self.failover(back, exit);
                }
            }
        }
    }

    /// The jobs fault `f` may start again (`reruns`): those with a launch at the site it
    /// strikes, while it lasts; no job for the others.
    fn fault_excuses(&mut self, f: Fault) {
        let until = |length: Time| self.now + length;
        match f {
            // They start nothing twice (issue 32, failover_netns).
            Fault::Crash { .. }
            | Fault::CutCommit { .. }
            | Fault::CutSnapshot { .. }
            | Fault::Failover { .. } => {}
            // Its launches' jobs are excused as they are submitted (`World::rm_submit`).
            Fault::Mute { .. } => {}
            // Only what the server let go of is cancelled; the room it holds longer is the
            // wait excuse's (`reruns`).
            Fault::SlowCancels { .. } => {}
            // Only jobs with an input file transfer one, excused from their first start.
            Fault::CutTransfers { .. } => {}
            Fault::ManagerDown { site, length } => {
                let until = until(length);
                self.trouble(site, until, None, || format!("s{site}'s manager down"));
            }
            Fault::Partition { site, length } => {
                let until = until(length);
                self.trouble(site, until, None, || format!("s{site} partitioned"));
            }
            Fault::AgentCrash { site, down } => {
                let (until, broken) = (until(down), self.net.last_conn());
                let why = || format!("s{site}'s agent crashed");
                self.trouble(site, until, Some(broken), why);
            }
        }
    }

    /// A call reaches a site's manager.
    fn call(&mut self, epoch: u64, site: usize, call: Call) {
        let now = self.now;
        match call {
            Call::Submit(r) => {
                let (result, lost, pending) = self.rm_submit(site, &r);
                let (result, back) = match result {
                    Ok(_) if lost => (Err(BackendError::Unavailable("timed out".into())), 5_000),
                    other => (other, self.delay()),
                };
                let report = Report::Submitted {
                    site,
                    launch: r.launch,
                    result,
                };
                self.at(now + back, Ev::Report(epoch, report));
                self.rm_submitted(site, pending);
            }
            Call::Cancel(remote) => self.at(now, Ev::CancelAgain(site, remote, 1)),
            // Its job was excused as the call left the server (`after_step`).
            Call::CancelUnrecorded { launch, .. } => {
                self.at(now, Ev::CancelUnrecorded(site, launch, 1));
            }
            // The site worker hands it to the backend on its own thread.
            Call::Discard(remote) => {
                self.log(|| format!("s{site} discards {remote} (incarnation {epoch})"));
                self.rms[site].discard(&[remote])
            }
            Call::Reserve(rc) => self.direct_reserve(epoch, site, rc, 1),
            _ => {}
        }
    }

    /// A submission reaches a site's manager (with its draws: refused, answer lost, pending
    /// delay); whether its answer is lost on the way, and the launch's pending delay for
    /// [`World::rm_submitted`].
    fn rm_submit(
        &mut self,
        site: usize,
        r: &coalloc_backends::SubmitRequest,
    ) -> (Result<String, BackendError>, bool, Time) {
        let now = self.now;
        let p = self.rms[site].plan.clone();
        let refuse = self.rng.random_range(0..1000) < p.refuse;
        let lost = self.rng.random_range(0..1000) < p.lost_answer;
        let pending = self.rng.random_range(p.pending.0..=p.pending.1);
        let mute = now < self.mute_until;
        let result = self.rms[site].submit(now, r, pending, refuse, mute);
        if result.is_err() || lost || mute {
            self.excuse_job(r.job, || {
                format!("launch {} at s{site} refused, unanswered or mute", r.launch)
            });
        }
        self.log(|| {
            format!(
                "s{site} takes launch {} of job {}: {result:?}",
                r.launch, r.job
            )
        });
        (result, lost, pending)
    }

    /// After a submission: the manager looks now and when its pending delay is over.
    fn rm_submitted(&mut self, site: usize, pending: Time) {
        self.at(self.now, Ev::RmWake(site));
        self.at(self.now + pending, Ev::RmWake(site));
    }

    /// The manager starts what it can; the started launches' processes begin.
    fn rm_wake(&mut self, site: usize) {
        let started = self.rms[site].schedule(self.now);
        for id in started {
            let l = self.rms[site].launches[&id].clone();
            self.log(|| format!("s{site} runs R{id} (job {} launch {})", l.job, l.launch));
            self.ran(site, id);
            if l.mute {
                // It runs, never checks in, and ends by itself.
                self.at(self.now + l.runtime, Ev::Exit(site, id, true));
            } else {
                for rank in 0..l.processes {
                    let t = self.now + self.rng.random_range(5..300);
                    self.at(t, Ev::CheckIn(site, id, rank));
                }
            }
            if self.rng.random_range(0..1000) < self.rms[site].plan.lose {
                let t = self.now + self.rng.random_range(100..l.runtime.max(200));
                self.at(t, Ev::Lose(site, id));
            }
        }
        if let Some(t) = self.rms[site].next_ready(self.now) {
            self.at(t, Ev::RmWake(site));
        }
    }
}
