//! The driver: one thread that owns the scheduling core and feeds it the wall clock
//! (DESIGN.md principle 1; the simulator is the other driver of the same core).
//!
//! Each turn it takes every message that has arrived (API requests, site reports), turns
//! them into core events, and hands those to the core in arrival order. An event the core
//! refuses changes nothing and is not journaled; an accepted one is appended to the journal,
//! and the whole turn's entries are committed in one transaction (group commit) before any
//! reply is sent or any command leaves for a resource manager. So what a client was told,
//! and what a resource manager was asked to do, always follows from the journal.
//!
//! A turn that holds only what the server learns of its own launches (a handle, a check-in:
//! `Driver::commit`) and answers nobody is committed without waiting for the disk; a crash
//! may drop it, and the restart finds the same as after a crash before it (the launch is
//! looked up by its number, the processes check in again). Whatever leaves the server next
//! (a reply, a command, a barrier's answer, a read, a result line, a snapshot) waits for
//! `Driver::durable` first.
//!
//! On start the journal is replayed into a fresh core (commands are then only booked, not
//! carried out), then reconciled with the backends: launches still running are adopted,
//! vanished ones are reported failed, launches the server was submitting when it died
//! are looked up by their launch number, and the launches of ended jobs that the core
//! cancelled are read once more at their sites and cancelled again if still running (their
//! cancel may have died with the server that journaled the job's end).
//!
//! The driver is a machine a test can step (DESIGN.md, "The server as a machine", habit 4):
//! [`Driver::open`] takes its journal ([`crate::journal::Store`]), its sites' links
//! ([`SiteLink`]) and where its file work runs ([`work::Spawner`]) from the caller and
//! reads no clock; [`Driver::step`] takes the time and
//! the messages that arrived and runs one turn; [`Driver::next_wakeup`] says when it wants
//! the next. [`Driver::run`] is the pump of `coalloc serve` around it (a channel and the
//! wall clock); the simulation harness (coalloc-testkit) is the other.

mod aging;
pub mod arrays;
mod clouds;
mod codec;
mod commands;
mod files;
pub mod forked;
mod metrics;

mod rendezvous;
mod reports;
mod requests;
mod reserve;
mod results;
mod secrets;
mod snapfile;
mod snapshot;
mod staging;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_local;
mod transfers;
mod view;
pub mod work;

use crate::config::ServerConfig;
use crate::entry::Entry;
use crate::journal::{JournalError, Record, ReplayError, Store};
use crate::logs::JsonLines;
use crate::metrics::Metrics;
use crate::msg::{self, Msg, Request, SiteCall, SiteLink};
use crate::state::StateDir;
use coalloc_backends::{Backend, SiteLoad};
use coalloc_core::model::{Job, Time};
use coalloc_core::scheduler::{Event, Rejected, Reply as CoreReply, Scheduler};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

/// What the driver knows of one launch beyond the core.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct LaunchInfo {
    pub job: u64,
    pub component: usize,
    pub site: usize,
    pub count: u32,
    /// The resource manager's handle, once it accepted the launch.
    pub remote: Option<String>,
    pub processes: u32,
    /// Cancelled, failed or finished: nothing more is reported about it.
    pub ended: bool,
    /// Ready as soon as it runs: the component does not call the barrier itself.
    pub auto_ready: bool,
}

/// A monitor reading as given to the core: idle, total, other users', healthy.
type Reading = (u32, u32, u32, bool);

/// Channels shared with the API.
#[derive(Clone)]
pub struct Shared {
    pub tx: Sender<Msg>,
    /// Job, component and site state changes, as JSON (the event stream).
    pub events: broadcast::Sender<String>,
    /// The Prometheus metrics (`/metrics`).
    pub metrics: Arc<Metrics>,
}

/// The driver's state.
pub struct Driver {
    core: Scheduler,
    journal: Box<dyn Store>,
    now: Time,
    state: StateDir,
    /// The API's address components are told (`COALLOC_URL`): this server's, or every
    /// server's of the journal, comma-separated (`server.urls`).
    url: String,
    /// The fingerprint of the API's certificate when `url` is `https://`: components get it
    /// (`COALLOC_SERVER_FINGERPRINT`) to pin the server they check in with.
    fingerprint: Option<String>,
    config: ServerConfig,
    /// Each site's link (`workers[site]`).
    workers: Vec<Box<dyn SiteLink>>,
    launches: BTreeMap<u64, LaunchInfo>,
    /// Launches at agent sites whose submission a restart (or a standby taking over) found
    /// sent but not answered in the journal: the agent's next hello says whether it holds
    /// them (adopted) or not (sent again, or failed and placed again), `reports::agent_back`.
    unrecorded: std::collections::BTreeSet<u64>,
    /// Secrets, barrier check-ins, the rendezvous store, and the calls waiting on them.
    rv: rendezvous::Rendezvous,
    /// Why each job's last start was aborted.
    abort_reasons: BTreeMap<u64, String>,
    /// Every stopped run of the jobs that are not over, for the result log.
    aborts: BTreeMap<u64, Vec<crate::logs::Abort>>,
    /// Jobs whose current run has committed (a failure now is after commit).
    committed: BTreeSet<u64>,
    /// Launches that failed, per site, since this server started (the core's counts are of
    /// consecutive errors and fall back to 0 on a success).
    site_failures: Vec<u64>,
    /// Every site's backend (the workers own clones), for resizing cloud sites on replay.
    backends: Vec<Arc<dyn Backend>>,
    /// Cloud VMs asked for and not yet given back, by the core's number.
    vms: BTreeMap<u64, clouds::VmInfo>,
    /// Read requests held until the end of the turn.
    reads: Vec<Request>,
    /// Jobs that ended badly (failed or cancelled).
    failed: std::collections::BTreeSet<u64>,
    /// The last load each site's backend reported, and whether it answered.
    loads: Vec<(SiteLoad, bool)>,
    /// The last SiteStatus given to the core, per site, and the core's idle count of the
    /// site after it.
    statuses: Vec<Option<(Reading, Option<u32>)>>,
    /// Entries of this turn, to commit.
    pending: Vec<Record>,
    /// Ended jobs that leave memory in this turn, to write to the history with its commit.
    history: Vec<crate::history::HistoryRow>,
    /// Ended jobs still in memory, by end (`aging`).
    ended_at: VecDeque<(Time, u64)>,
    /// When to look for jobs old enough to leave memory.
    next_age: Time,
    /// Job arrays: first job -> (first index, elements) (`arrays`).
    arrays: BTreeMap<u64, (u32, u32)>,
    /// Replies waiting for the commit.
    replies: Vec<Box<dyn FnOnce() + Send>>,
    /// Entries the driver makes itself (ready, failed, transfer done), for the next apply.
    internal: VecDeque<Entry>,
    /// Calls to sites that follow from this turn's entries, made once they are durable
    /// (after the commit): a site never acts on what a restart would not know.
    after_commit: Vec<(usize, SiteCall)>,
    /// Launches a site took for a job that had already left memory, by launch number: their
    /// site and handle. Cancelled when their handle came and watched; dropped from their
    /// site once a poll finds them ended (`reports.rs`, `submitted` and `remote_state`).
    orphans: BTreeMap<u64, (usize, String)>,
    /// Launches of ended jobs that a restart watches until a reading finds them gone from
    /// their sites, and whether their cancel went again: their cancel may have died with
    /// the process that journaled the job's end (`commands.rs`, `recheck_ended`). Their
    /// jobs stay in memory until then (`aging.rs`).
    unsettled: BTreeMap<u64, bool>,
    /// Replaying the journal: commands are booked, not carried out.
    replaying: bool,
    events: broadcast::Sender<String>,
    results: JsonLines,
    surveillance: JsonLines,
    next_sample: Time,
    /// The last surveillance sample written per site.
    logged: Vec<Option<crate::logs::SiteSample>>,
    metrics: Arc<Metrics>,
    /// The replica catalog (seed 000 §2.3).
    catalog: crate::catalog::Catalog,
    /// Transfers of the current runs, by the core's number.
    transfers: BTreeMap<u64, transfers::TransferRun>,
    /// What live launches stage out (see `staging`).
    staging: BTreeMap<u64, staging::Staging>,
    /// Where its file work runs (transfers, staging: `work`).
    work: Box<dyn work::Spawner>,
    /// Snapshots of the state and compaction of the journal.
    snapshots: snapshot::Snapshots,
    /// The journal could not be written: nothing more may be done (a restart replays what
    /// was committed).
    fatal: Option<String>,
    /// Reservations a component was started into (`reserve`): deleting one is no roll back.
    honoured: BTreeSet<String>,
    /// Per site, while a restart's list of its reservations is under way: those asked for
    /// and not answered when it was asked for (`driver/reserve.rs`).
    listing: BTreeMap<usize, Vec<String>>,
}

/// What the driver is given to work with besides its configuration.
pub struct Parts {
    /// Where the journal is kept.
    pub journal: Box<dyn Store>,
    /// Each site's link, in the configuration's order.
    pub sites: Vec<Box<dyn SiteLink>>,
    /// Each site's backend (resized with a cloud site's VMs; files of transfers and staging).
    pub backends: Vec<Arc<dyn Backend>>,
    /// The driver's own channel (what [`Shared`] hands out).
    pub tx: Sender<Msg>,
    /// Where the file work runs: [`work::Threads`] in `coalloc serve`.
    pub work: Box<dyn work::Spawner>,
    /// Snapshots are written within the turn that takes them, not by a forked child or a
    /// thread (the simulation harness: no process, no thread, the same turn every run).
    pub inline_snapshots: bool,
}

/// What a [`Driver::step`] ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Go,
    /// A [`Msg::Stop`] came: stop after this turn ([`Driver::stop`]).
    Stop,
}

/// The journal could not be written: the driver stops, nothing of the turn was
/// acknowledged, and a restart replays what was committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Fatal(pub String);

/// The wall clock in milliseconds since the Unix epoch.
pub fn wall_ms() -> Time {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as Time)
        .unwrap_or(0)
}

/// Why the driver could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The journal's entry numbered so (its `seq`) could not be replayed.
    #[error("journal entry {0}: {1}")]
    Replay(i64, String),
    #[error("snapshot {0}: {1}")]
    Snapshot(String, String),
}

impl Driver {
    /// Whether site `site` is reached through its agent (`coalloc-agent`), not directly.
    pub(super) fn at_agent(&self, site: usize) -> bool {
        matches!(
            self.config.backends[site],
            crate::config::BackendKind::Agent { .. }
        )
    }
}

impl LaunchInfo {
    /// The call that cancels launch `launch` (this one) at its site: by its handle, or by
    /// its name while its submission's answer has not come.
    pub(crate) fn cancel_call(&self, launch: u64) -> SiteCall {
        match &self.remote {
            Some(remote) => SiteCall::Cancel(remote.clone()),
            None => SiteCall::CancelUnrecorded {
                job: self.job,
                component: self.component,
                launch,
            },
        }
    }
}

impl Driver {
    /// Start on the state directory with the site workers of `coalloc serve`: `journal`
    /// (SQLite's or PostgreSQL's, [`crate::journal::open`]), [`Driver::open`] and
    /// [`Driver::resume`] on the wall clock.
    /// `tx` is the sender of the channel [`Driver::run`] will read; `fingerprint` is the
    /// API certificate's when `url` is `https://`.
    pub fn start(
        config: ServerConfig,
        parts: Vec<crate::server::SiteParts>,
        state: StateDir,
        url: String,
        fingerprint: Option<String>,
        tx: Sender<Msg>,
        journal: Box<dyn Store>,
    ) -> Result<(Driver, Shared), StartError> {
        let interval = Duration::from_millis(config.monitor_interval as u64);
        let backends: Vec<Arc<dyn Backend>> = parts.iter().map(|p| p.backend.clone()).collect();
        let sites = parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| match p.agent {
                // An agent site's calls go into its link, taken by the hub's pump.
                Some(site) => Box::new(crate::link::remote::AgentLink {
                    site,
                    provider: p.provider,
                    driver: tx.clone(),
                }) as Box<dyn SiteLink>,
                None => {
                    let w = crate::sites::SiteWorker::spawn(
                        i,
                        p.backend,
                        p.provider,
                        interval,
                        tx.clone(),
                    );
                    Box::new(w) as Box<dyn SiteLink>
                }
            })
            .collect();
        let parts = Parts {
            journal,
            sites,
            backends,
            work: Box::new(work::Threads { tx: tx.clone() }),
            tx,
            inline_snapshots: false,
        };
        let (mut d, shared) = Driver::open(config, parts, state, url)?;
        d.fingerprint = fingerprint;
        d.resume(wall_ms());
        Ok((d, shared))
    }

    /// Restore the snapshot in the state directory and replay the journal after it into a
    /// fresh core. Nothing is carried out yet: [`Driver::resume`] reconciles with the sites.
    pub fn open(
        config: ServerConfig,
        parts: Parts,
        state: StateDir,
        url: String,
    ) -> Result<(Driver, Shared), StartError> {
        let Parts {
            journal,
            sites,
            backends,
            tx,
            work,
            inline_snapshots,
        } = parts;
        let state_for_snapshots = state.clone();
        let place = journal.snapshot_place();
        let core = Scheduler::new(config.scheduler.clone(), config.sites.clone());
        let (events, _) = broadcast::channel(4096);
        let n = config.sites.len();
        let mut d = Driver {
            backends,
            vms: BTreeMap::new(),
            core,
            journal,
            now: Time::MIN,
            results: JsonLines::new(&state.result_log()),
            surveillance: JsonLines::new(&state.surveillance_log()),
            state,
            url,
            fingerprint: None,
            workers: sites,
            launches: BTreeMap::new(),
            unrecorded: Default::default(),
            rv: rendezvous::Rendezvous::default(),
            abort_reasons: BTreeMap::new(),
            aborts: BTreeMap::new(),
            committed: BTreeSet::new(),
            failed: Default::default(),
            reads: Vec::new(),
            site_failures: vec![0; config.sites.len()],
            loads: vec![(SiteLoad::default(), true); n],
            statuses: vec![None; n],
            pending: Vec::new(),
            history: Vec::new(),
            ended_at: VecDeque::new(),
            next_age: 0,
            arrays: BTreeMap::new(),
            replies: Vec::new(),
            internal: VecDeque::new(),
            after_commit: Vec::new(),
            orphans: BTreeMap::new(),
            unsettled: BTreeMap::new(),
            replaying: true,
            events: events.clone(),
            next_sample: 0,
            logged: vec![None; n],
            metrics: Arc::new(Metrics::new()),
            catalog: crate::catalog::Catalog::from_sites(&config.sites),
            transfers: BTreeMap::new(),
            staging: BTreeMap::new(),
            work,
            snapshots: snapshot::Snapshots::new(&state_for_snapshots, inline_snapshots, place),
            config,
            fatal: None,
            honoured: BTreeSet::new(),
            listing: BTreeMap::new(),
        };
        // The snapshot, if any, then the journal's entries after it. The journal is lent to
        // the thread that reads it, one record at a time.
        let t = std::time::Instant::now();
        let covered = d.restore_snapshot()?;
        let restore_ms = t.elapsed().as_millis() as u64;
        let journal = std::mem::replace(&mut d.journal, Box::new(crate::journal::Lent));
        let (replayed, journal) = d.replay_journal(journal, covered);
        let replayed = replayed.map_err(|e| match e {
            ReplayError::Journal(e) => StartError::Journal(e),
            ReplayError::Record(seq, e) => StartError::Replay(seq, e),
        })?;
        d.journal = journal;
        d.replaying = false;
        let replay_ms = t.elapsed().as_millis() as u64 - restore_ms;
        tracing::info!(
            covered,
            replayed,
            restore_ms,
            replay_ms,
            "snapshot restored and journal replayed"
        );
        let metrics = d.metrics.clone();
        Ok((
            d,
            Shared {
                tx,
                events,
                metrics,
            },
        ))
    }

    /// After [`Driver::open`], at `now`: adopt what still runs at the sites, fail what
    /// vanished, and carry out what the replay left to do.
    pub fn resume(&mut self, now: Time) {
        self.now = self.now.max(now);
        self.reconcile();
        // An agent site's link is down until its agent's hello: the core hears so now and
        // keeps the grace from here (a site whose agent never comes is lost past it).
        for site in 0..self.config.sites.len() {
            self.agent_gone(site);
        }
        // Journaled and carried out now, not at the next turn: a crash before that turn
        // would leave the next restart with the links up where this run had them down
        // (harness seed 274).
        self.turn();
    }

    /// Replay the journal's records after `covered`: a thread reads them and makes their
    /// core events (SQLite, JSON and job specs: about half the work) while this one feeds
    /// them to the core, in order. How many there were, and the journal back.
    fn replay_journal(
        &mut self,
        journal: Box<dyn Store>,
        covered: i64,
    ) -> (Result<usize, ReplayError<String>>, Box<dyn Store>) {
        type Read = (i64, Record, Result<Option<Event>, String>);
        // Records cross in batches: one wake-up of the other thread per batch, not per
        // record (those wake-ups were a fifth of the reader's time).
        const BATCH: usize = 256;
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Read>>(16);
            let reader = std::thread::Builder::new()
                .name("replay-read".into())
                .spawn_scoped(scope, move || {
                    let mut batch = Vec::with_capacity(BATCH);
                    let mut read = journal.replay_after(covered, &mut |seq, r| {
                        let ev = r.entry.to_event();
                        batch.push((seq, r, ev));
                        if batch.len() == BATCH {
                            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                            // A closed channel: the driver stopped at a record it refused.
                            tx.send(full).map_err(|_| String::new())?;
                        }
                        Ok(())
                    });
                    if read.is_ok() && !batch.is_empty() && tx.send(batch).is_err() {
                        read = Err(ReplayError::Record(0, String::new()));
                    }
                    (read, journal)
                })
                .expect("a thread to read the journal");
            let mut refused = None;
            'batches: for batch in rx.iter() {
                for (seq, r, ev) in batch {
                    if let Err(e) = self.replay(r, ev) {
                        refused = Some(ReplayError::Record(seq, e));
                        break 'batches;
                    }
                }
            }
            drop(rx);
            let (read, journal) = reader.join().expect("the journal's reader ended");
            match refused {
                Some(e) => (Err(e), journal),
                None => (read, journal),
            }
        })
    }

    /// Feed one journal record and its core event to the core, booking (not carrying out)
    /// what it commands.
    fn replay(&mut self, r: Record, ev: Result<Option<Event>, String>) -> Result<(), String> {
        self.now = self.now.max(r.at);
        self.book(&r.entry);
        if let Some(ev) = ev? {
            let reply = self.core.handle(r.at, ev);
            if reply.is_ok() {
                self.vm_effect(&r.entry);
                self.catalog_effect(&r.entry);
                self.transfer_effect(&r.entry);
            }
            if let (Entry::Submit { secret, .. }, Ok(CoreReply::Submitted(id))) = (&r.entry, reply)
            {
                self.rv.secrets.insert(id, secret);
            }
        }
        self.run_commands();
        Ok(())
    }

    /// The driver's own bookkeeping of an entry (secrets, handles, rendezvous values).
    fn book(&mut self, e: &Entry) {
        match e {
            Entry::Launched { launch, remote } => {
                if let Some(l) = self.launches.get_mut(launch) {
                    l.remote = Some(remote.clone());
                }
                self.touch_input(*launch);
            }
            Entry::KvPut { job, key, value } => {
                self.rv.kv.insert((*job, key.clone()), value.clone());
            }
            Entry::Forget { jobs } => self.drop_jobs(jobs),
            Entry::Array {
                first,
                start,
                count,
            } => {
                self.arrays.insert(*first, (*start, *count));
            }
            _ => {}
        }
    }

    /// Hand an entry to the core now; journal it if the core took it.
    pub(crate) fn apply(&mut self, entry: Entry) -> Result<CoreReply, Rejected> {
        let ev = match entry.to_event() {
            Ok(Some(ev)) => ev,
            Ok(None) => {
                self.book(&entry);
                self.pending.push(Record {
                    at: self.now,
                    entry,
                });
                return Ok(CoreReply::Done);
            }
            Err(e) => return Err(Rejected::Invalid(e)),
        };
        self.apply_event(entry, ev)
    }

    /// Submit `job` with `secret`: [`Driver::apply`] of its `submit` entry, with the job
    /// handed to the core as it is instead of read back from the entry's JSON (the same
    /// job: the native spec is lossless; issue 23, item 5).
    pub(crate) fn submit(&mut self, job: Job, secret: String) -> Result<CoreReply, Rejected> {
        let entry = Entry::submit(&job, secret);
        self.apply_event(entry, Event::Submit(Box::new(job)))
    }

    /// [`Driver::apply`] of an entry whose core event is `ev`.
    fn apply_event(&mut self, entry: Entry, ev: Event) -> Result<CoreReply, Rejected> {
        let reply = self.core.handle(self.now, ev)?;
        self.vm_effect(&entry);
        self.catalog_effect(&entry);
        self.transfer_effect(&entry);
        if let (Entry::Submit { secret, .. }, CoreReply::Submitted(id)) = (&entry, &reply) {
            self.rv.secrets.insert(*id, secret);
        }
        self.pending.push(Record {
            at: self.now,
            entry,
        });
        Ok(reply)
    }

    /// The pump of `coalloc serve`: take what arrives on `rx`, step on the wall clock,
    /// sleep until the next wake-up; until `Msg::Stop` or until every sender is gone.
    pub fn run(mut self, rx: Receiver<Msg>) {
        loop {
            let timeout = (self.next_wakeup() - wall_ms()).clamp(1, 1000) as u64;
            let mut inputs = Vec::new();
            match rx.recv_timeout(Duration::from_millis(timeout)) {
                Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Ok(m) => {
                    inputs.push(m);
                    // Group commit: everything that is already waiting goes in this turn.
                    while inputs.len() < 8192 {
                        match rx.try_recv() {
                            Ok(m) => {
                                let stop = matches!(m, Msg::Stop);
                                inputs.push(m);
                                if stop {
                                    break;
                                }
                            }
                            Err(_) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            match self.step(wall_ms(), inputs) {
                Ok(Flow::Go) => {}
                Ok(Flow::Stop) => break,
                Err(Fatal(e)) => {
                    // Nothing may be acknowledged that is not on disk: stop here; a restart
                    // replays what was committed.
                    tracing::error!("{e}");
                    eprintln!("coalloc serve: fatal: {e}");
                    std::process::exit(1);
                }
            }
        }
        self.stop();
    }

    /// One turn at `now` (never before the last one's): take `inputs` in order, journal
    /// and commit what the core accepted, then carry out its commands and send the replies.
    /// A [`Msg::Stop`] among them ends the turn there ([`Flow::Stop`]).
    pub fn step(&mut self, now: Time, inputs: Vec<Msg>) -> Result<Flow, Fatal> {
        if let Some(e) = &self.fatal {
            return Err(Fatal(e.clone()));
        }
        self.now = self.now.max(now);
        let mut flow = Flow::Go;
        for m in inputs {
            if matches!(m, Msg::Stop) {
                flow = Flow::Stop;
                break;
            }
            self.on_msg(m);
        }
        self.turn();
        if let Some(e) = &self.fatal {
            return Err(Fatal(e.clone()));
        }
        self.snapshot_if_due(false);
        match &self.fatal {
            Some(e) => Err(Fatal(e.clone())),
            None => Ok(flow),
        }
    }

    /// The last turn: the final snapshot.
    pub fn stop(mut self) {
        if self.fatal.is_none() {
            self.snapshot_if_due(true);
        }
        tracing::info!("driver stopped");
    }

    /// When the driver wants its next turn even if nothing arrives: the core's timers, the
    /// surveillance sample, aging, transfer deadlines.
    pub fn next_wakeup(&self) -> Time {
        let mut until = self.next_sample.min(self.next_age);
        if let Some(w) = self.core.next_wakeup() {
            until = until.min(w);
        }
        if let Some(w) = self.next_transfer_deadline() {
            until = until.min(w);
        }
        until
    }

    /// The clock of the last turn.
    pub fn now(&self) -> Time {
        self.now
    }

    /// The scheduling core (for the simulation harness's checks).
    pub fn core(&self) -> &Scheduler {
        &self.core
    }

    fn on_msg(&mut self, m: Msg) {
        match m {
            // Reads wait for the end of the turn, so that they see its effects complete (a job
            // the core ended in this turn is shown with its outcome).
            Msg::Api(r @ (Request::Jobs { .. } | Request::Job { .. } | Request::Sites { .. })) => {
                self.reads.push(r)
            }
            Msg::Api(r) => self.on_request(r),
            Msg::Site(r) => self.on_report(r),
            Msg::Stop => {}
        }
    }

    /// Ticks, then apply, commit and carry out until nothing new is made.
    fn turn(&mut self) {
        if self.core.next_wakeup().is_some_and(|w| w <= self.now) {
            let _ = self.apply(Entry::Tick);
        }
        self.age_out();
        self.transfer_timeouts();
        loop {
            while let Some(e) = self.internal.pop_front() {
                let _ = self.apply(e);
            }
            self.commit();
            if self.fatal.is_some() {
                return;
            }
            if !self.after_commit.is_empty() {
                if !self.durable() {
                    return;
                }
                for (site, call) in std::mem::take(&mut self.after_commit) {
                    self.workers[site].send(call);
                }
            }
            self.run_commands();
            if self.internal.is_empty() {
                break;
            }
        }
        if !self.reads.is_empty() && !self.durable() {
            return;
        }
        for r in std::mem::take(&mut self.reads) {
            self.on_request(r);
        }
        if self.now >= self.next_sample {
            // Every interval while jobs are live, so that a run's load has a shape; otherwise
            // only changes are written (at the site's next monitor reading).
            let live = self.core.queued() > 0 || self.launches.values().any(|l| !l.ended);
            if live {
                self.sample(None);
            }
            self.next_sample = self.now + self.config.sample_interval;
        }
        // Held barrier check-ins hear of their job's commit or abort.
        self.answer_held();
    }

    /// Journal this turn's entries, then send the replies that waited for them. Entries
    /// that only record what became of the server's own launches, with no reply waiting,
    /// are committed without an fsync ([`Store::append_unsynced`]).
    fn commit(&mut self) {
        // A driver whose journal failed writes nothing more: a second try of the same
        // entries (the next turn of a `resume`, whose errors wait for the next step) could
        // keep them while their effects (a discard) were never carried out (harness seed
        // 1011285: a cut commit's `forget` kept by the next turn's, its discards never sent).
        if self.fatal.is_some() {
            return;
        }
        let changed = !self.pending.is_empty();
        let t = std::time::Instant::now();
        let lazy = self.replies.is_empty()
            && self.history.is_empty()
            && self.pending.iter().all(|r| {
                matches!(
                    r.entry,
                    Entry::Launched { .. }
                        | Entry::Queued { .. }
                        | Entry::Started { .. }
                        | Entry::Ready { .. }
                )
            });
        let appended = if lazy {
            self.journal.append_unsynced(&self.pending, &self.history)
        } else {
            self.journal.append(&self.pending, &self.history)
        };
        if changed {
            self.metrics
                .journal_commit
                .observe(t.elapsed().as_secs_f64());
        }
        if let Err(e) = appended {
            // Nothing may be acknowledged that is not on disk: no reply goes, no command is
            // carried out; the driver stops (`Driver::step`'s error).
            self.fatal = Some(e.to_string());
            self.replies.clear();
            return;
        }
        self.pending.clear();
        self.history.clear();
        for r in self.replies.drain(..) {
            r();
        }
    }

    /// Make every committed entry durable before something leaves the server; false when
    /// the journal failed (the driver stops, as for a failed commit).
    pub(crate) fn durable(&mut self) -> bool {
        if self.fatal.is_some() {
            return false;
        }
        if let Err(e) = self.journal.sync() {
            self.fatal = Some(e.to_string());
            self.replies.clear();
            return false;
        }
        true
    }

    /// Queue a reply to send after the commit.
    fn reply_later<T: Send + 'static>(&mut self, to: msg::Reply<T>, value: T) {
        self.replies.push(Box::new(move || {
            let _ = to.send(value);
        }));
    }

    /// Tell the event stream.
    fn emit(&self, mut value: serde_json::Value) {
        if !self.replaying && value.is_object() {
            value["time"] = self.now.into();
            let _ = self.events.send(value.to_string());
        }
    }
}
