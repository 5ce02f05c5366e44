//! The scheduler: one sans-IO state machine that every driver runs (DESIGN.md, "one
//! scheduling core, two drivers").
//!
//! ```text
//! let mut s = Scheduler::new(config, sites);
//! s.handle(now, Event::Submit(job))?;           // input, stamped with the driver's time
//! while let Some(cmd) = s.poll_command() { .. } // output: start, cancel, release, ...
//! let t = s.next_wakeup();                      // call s.handle(t, Event::Tick) then
//! ```
//!
//! It owns the co-allocation transaction (seed 002 §3.2): a placed job's components are
//! started together, held at a barrier, and committed when every required one is ready; a
//! failure before commit aborts (required), re-places (interactive) or drops (optional) the
//! component. It owns fault handling (seed 000 §3.4, seed 003 §4.3.4–4.3.5): after commit a
//! failure sends the whole job back to its queue, sites count consecutive errors, jobs count
//! failures against their limits, launches that never start time out, started components
//! that never check in time out at the barrier, and a failed job waits a growing back-off
//! before its next try. Which queued job
//! goes next is the queue policy's decision ([`crate::queue`]); where it goes is placement's
//! ([`crate::placement`]).

mod admission;
pub mod api;
mod bandwidth;
mod clouds;
pub mod config;
pub mod draining;
mod edit;
pub mod faults;
pub mod icp;
pub mod jobs;
mod launches;
pub mod link;
pub mod recovery;
pub mod reserve;
pub mod sites;
pub mod snapshot;
mod transaction;
mod transfers;

pub use api::*;
pub use config::{Claiming, InteractiveDefault, QueueConfig, SchedulerConfig};
pub use faults::Fault;
pub use icp::IcpParams;

use crate::model::{Job, Site, Time};
use crate::queue::{PassCtx, QueuePolicy, RunningJob, StartOptions};
use jobs::{JobState, Phase};
use sites::SiteTable;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A timer the scheduler set for itself. Timers of an old run of a job carry an old
/// generation and are ignored when they fire.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
enum Timer {
    /// A launch that has not started by now has failed.
    Pending {
        job: JobId,
        component: usize,
        launch: LaunchId,
    },
    /// A launch that has started but is not at the barrier by now has failed its start.
    Barrier {
        job: JobId,
        component: usize,
        launch: LaunchId,
    },
    /// A job's retry back-off is over: it goes back into its queue.
    Retry { job: JobId, generation: u64 },
    /// Probe a site its errors made unusable (the probe timed for `at`).
    Probe { site: SiteId, at: Time },
    /// The job may commit from now on.
    Hold { job: JobId, generation: u64 },
    /// The job's runtime limit is reached: kill it and queue it again.
    Limit { job: JobId, generation: u64 },
    /// A claiming try is due (ICP).
    Claim { job: JobId, generation: u64 },
    /// The grace of a site's link that fell silent at `since` is over.
    LinkGrace { site: SiteId, since: Time },
    /// A reserving run's sites have had their time to answer ([`reserve`]).
    ReserveAnswer { job: JobId, generation: u64 },
    /// A reserving run's common start has come within every site's lead time
    /// ([`reserve::reserve_ahead`]): make the reservations now.
    ReserveDue { job: JobId, generation: u64 },
    /// A draining launch's cancel goes again, if it still drains ([`draining`]). The last
    /// variant, so that at one time it fires after every other timer, and so that the
    /// encodings of the others are those of the snapshot forms before it (7 and older).
    Recancel { launch: LaunchId },
}

/// `true`, for a field that serde fills when it is not in a snapshot.
fn yes() -> bool {
    true
}

/// Everything but the queue policy, so that the policy can call back into it during a pass.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Core {
    /// Not in a snapshot: a restored core takes the configuration it is started with.
    #[serde(skip)]
    config: SchedulerConfig,
    /// Reserve claiming's reservations (issue 31); read as none from a form-5 head.
    #[serde(default, deserialize_with = "reserve::read")]
    reserve: reserve::Reservations,
    sites: SiteTable,
    jobs: jobs::JobTable,
    /// Jobs placed and not ended.
    active: jobs::Active,
    launches: launches::Launches,
    /// Launches of stopped committed runs that may still run at their sites
    /// ([`draining`]); read as none from a head of form 6 or older.
    #[serde(default, deserialize_with = "draining::read")]
    draining: draining::Draining,
    /// Transfers under way: the job and component they feed, and the file's site.
    transfers: BTreeMap<TransferId, transfers::OpenTransfer>,
    /// Measured throughput per (from, to) pair, bytes per second (an EWMA).
    measured: BTreeMap<(SiteId, SiteId), u64>,
    next_transfer: u64,
    next_job: JobId,
    next_launch: u64,
    commands: VecDeque<Command>,
    timers: BTreeSet<(Time, Timer)>,
    now: Time,
    /// Something changed that may let a queued job start.
    dirty: bool,
    /// Jobs to put (back) into the queue after this event.
    requeued: Vec<JobId>,
    /// Jobs submitted while the queue was full, waiting for room.
    backlog: admission::Backlog,
    /// Jobs to take out of the queue after this event.
    unqueued: Vec<JobId>,
    /// Queued jobs edited during this event, to tell the policy.
    edited: Vec<JobId>,
    /// Jobs that finished, with their runtimes, for the policy's predictors.
    finished: Vec<(JobId, crate::model::Millis)>,
    /// Jobs that committed during this event, to ask the policy for a runtime limit.
    committed: Vec<JobId>,
    /// Jobs that ended during this event, to forget after it (`config.forget_ended`).
    ended: Vec<JobId>,
    /// Cloud sites' VMs under On-Demand provisioning, by site (`None`: a cluster, or a cloud
    /// under static provisioning).
    clouds: Vec<Option<crate::provisioning::CloudState>>,
    next_vm: u64,
    /// Provisioning must decide again at this event (a VM came or went, a first event).
    provision_now: bool,
    /// When provisioning wants to decide again if nothing else happens.
    provision_at: Option<Time>,
    /// The last On-Demand demand plan, used again while its inputs are unchanged (see
    /// `clouds.rs`, "Plans made once"). Not in a snapshot: a restored core plans afresh.
    #[serde(skip)]
    plan_memo: Option<clouds::PlanMemo>,
    /// Moves whenever the queue policy's demand may have changed: a job entered, left or
    /// was edited in the queue, a job finished, or a pass ran that was not blocked or that
    /// started or failed a job.
    #[serde(skip)]
    demand_version: u64,
    /// Jobs started or failed by passes (to tell whether a pass changed the queue).
    #[serde(skip)]
    pass_effects: u64,
    /// Jobs that ended other than by finishing (see [`PassCtx::unfinished_ends`]).
    #[serde(skip)]
    unfinished_ends: u64,
    /// Whether demand plans may be reused (always, but for tests that compare with runs
    /// that make every plan afresh).
    #[serde(skip, default = "yes")]
    reuse_plans: bool,
    /// Demand plans made afresh (for tests).
    #[serde(skip)]
    plans_made: u64,
    /// Component details that submitted jobs share.
    #[serde(skip)]
    shared: crate::model::SharedDetails,
}

/// The scheduling core. See the module documentation.
#[derive(Debug)]
pub struct Scheduler {
    core: Core,
    queue: Box<dyn QueuePolicy>,
}

impl Scheduler {
    pub fn new(config: SchedulerConfig, sites: Vec<Site>) -> Scheduler {
        let queue = config.queue.build();
        Scheduler::with_queue(config, sites, queue)
    }

    /// A scheduler with this queue policy instead of the one `config.queue` names.
    pub fn with_queue(
        config: SchedulerConfig,
        sites: Vec<Site>,
        queue: Box<dyn QueuePolicy>,
    ) -> Scheduler {
        let mut sites = SiteTable::new(sites, config.site_faults);
        let clouds = clouds::init(&mut sites, &config.provisioning);
        Scheduler {
            core: Core {
                provision_now: clouds.iter().any(Option::is_some),
                clouds,
                next_vm: 1,
                provision_at: None,
                plan_memo: None,
                demand_version: 0,
                pass_effects: 0,
                unfinished_ends: 0,
                reuse_plans: true,
                plans_made: 0,
                shared: crate::model::SharedDetails::default(),
                sites,
                config,
                reserve: reserve::Reservations::default(),
                jobs: jobs::JobTable::default(),
                active: jobs::Active::default(),
                launches: launches::Launches::default(),
                draining: draining::Draining::default(),
                transfers: BTreeMap::new(),
                measured: BTreeMap::new(),
                next_transfer: 1,
                next_job: 1,
                next_launch: 1,
                commands: VecDeque::new(),
                timers: BTreeSet::new(),
                now: Time::MIN,
                dirty: false,
                requeued: Vec::new(),
                backlog: admission::Backlog::default(),
                unqueued: Vec::new(),
                edited: Vec::new(),
                finished: Vec::new(),
                committed: Vec::new(),
                ended: Vec::new(),
            },
            queue,
        }
    }

    /// Take an event that happened at `now` (the driver's clock; a time earlier than one
    /// already seen counts as that one). A refused event changes nothing: not the clock, no
    /// timer fires, no pass runs (the server journals only what the core accepted, and a
    /// replay of the journal must reach the same state; the simulation harness found that a
    /// refused cancel moved the clock and ran a pass that no entry recorded).
    pub fn handle(&mut self, now: Time, event: Event) -> Result<Reply, Rejected> {
        let before = self.core.now;
        let reply = self.apply(now, event);
        if reply.is_err() {
            self.core.now = before;
            return reply;
        }
        self.fire_timers();
        self.settle();
        reply
    }

    /// Take several events that happened at the same instant, then decide once: the pass
    /// sees all of them (every job that ended at `now` has given its processors back before
    /// any job is started), and submissions keep their order. One answer per event.
    pub fn handle_all(
        &mut self,
        now: Time,
        events: impl IntoIterator<Item = Event>,
    ) -> Vec<Result<Reply, Rejected>> {
        let mut replies = Vec::new();
        self.handle_all_into(now, events, &mut replies);
        replies
    }

    /// [`Scheduler::handle_all`], with the answers put into `replies` (cleared first): for a
    /// driver that calls it at every instant and keeps one vector for them.
    pub fn handle_all_into(
        &mut self,
        now: Time,
        events: impl IntoIterator<Item = Event>,
        replies: &mut Vec<Result<Reply, Rejected>>,
    ) {
        replies.clear();
        replies.extend(events.into_iter().map(|e| self.apply(now, e)));
        self.fire_timers();
        self.settle();
    }

    /// A user's edit, checked as a submission is: with the queue policy's fit and the sites
    /// it puts new jobs on. Out of the path every job takes, as `Core::apply_rare`.
    #[cold]
    #[inline(never)]
    fn edit(&mut self, job: JobId, edit: Edit) -> Result<Reply, Rejected> {
        let (fit, entries) = (self.queue.fit(), self.queue.entry_sites());
        self.core
            .edit(job, edit, fit, &entries)
            .map(|()| Reply::Done)
    }

    /// Change the state for one event, without deciding anything yet.
    fn apply(&mut self, now: Time, event: Event) -> Result<Reply, Rejected> {
        let core = &mut self.core;
        core.now = core.now.max(now);
        match event {
            Event::Submit(job) => {
                let wait = core.must_wait(self.queue.len());
                if let (Some(max), true, false) =
                    (core.config.max_queued, wait, core.config.admission_backlog)
                {
                    return Err(Rejected::QueueFull(max));
                }
                let id = core.submit(*job, self.queue.fit(), &self.queue.entry_sites())?;
                if wait {
                    core.hold_for_admission(id);
                }
                Ok(Reply::Submitted(id))
            }
            Event::Edit { job, edit } => self.edit(job, edit),
            Event::SiteStatus {
                site,
                idle,
                total,
                healthy,
                other,
            } => core
                .site_status(site, idle, total, other, healthy)
                .map(|()| Reply::Done),
            Event::ComponentQueued { .. } => Ok(Reply::Done),
            Event::ComponentStarted { launch } => {
                core.started(launch);
                Ok(Reply::Done)
            }
            Event::ComponentReady { launch } => {
                core.ready(launch);
                Ok(Reply::Done)
            }
            Event::ComponentFailed {
                launch,
                reason,
                fault,
            } => {
                core.failed(launch, reason, fault);
                Ok(Reply::Done)
            }
            Event::ComponentFinished { launch } => {
                core.finished(launch);
                Ok(Reply::Done)
            }
            Event::Tick => Ok(Reply::Done),
            event => core.apply_rare(event),
        }
    }

    /// The measured throughput per (from, to) site pair, bytes per second (the bandwidth
    /// model's EWMA; empty until a transfer was measured).
    pub fn measured_bandwidth(&self) -> &BTreeMap<(SiteId, SiteId), u64> {
        &self.core.measured
    }

    /// The next command for the driver, in the order they were decided.
    pub fn poll_command(&mut self) -> Option<Command> {
        self.core.commands.pop_front()
    }

    /// When the scheduler wants to be called (with [`Event::Tick`]) if nothing else happens.
    pub fn next_wakeup(&self) -> Option<Time> {
        let timer = self.core.timers.first().map(|(t, _)| *t);
        // A blocked policy's periodic passes would do nothing (QueuePolicy::blocked) until it
        // unblocks by itself, if it does (QueuePolicy::unblocks_at); but On-Demand
        // provisioning decides at every pass, so it keeps them (cheaply: the demand plan of
        // an unchanged queue and unchanged sites is reused, clouds.rs).
        let queue = if self.queue.blocked() && !self.core.clouds.iter().any(Option::is_some) {
            self.queue.unblocks_at()
        } else {
            self.queue.next_wakeup()
        };
        [timer, queue, self.core.provision_at]
            .into_iter()
            .flatten()
            .min()
    }

    /// Make every On-Demand demand plan afresh instead of reusing one whose inputs did not
    /// change (see `clouds.rs`, "Plans made once"): the same decisions, more slowly. For
    /// tests that check exactly that.
    #[doc(hidden)]
    pub fn set_plan_reuse(&mut self, reuse: bool) {
        self.core.reuse_plans = reuse;
        self.core.plan_memo = None;
    }

    /// How many On-Demand demand plans this scheduler made afresh (not reused), for tests.
    #[doc(hidden)]
    pub fn plans_made(&self) -> u64 {
        self.core.plans_made
    }

    /// A cloud site's VMs and bill under On-Demand provisioning (`None` for a cluster or a
    /// static cloud).
    pub fn cloud(&self, site: SiteId) -> Option<&crate::provisioning::CloudState> {
        self.core.clouds.get(site)?.as_ref()
    }

    /// Every cloud site's bill up to `now` (VMs gone, plus running ones billed per started
    /// hour so far), by site; clusters and static clouds owe nothing.
    pub fn bills(&self, now: Time) -> Vec<crate::provisioning::Bill> {
        self.core
            .clouds
            .iter()
            .map(|c| c.as_ref().map(|c| c.bill_until(now)).unwrap_or_default())
            .collect()
    }

    /// The sites, in [`SiteId`] order.
    pub fn sites(&self) -> &[Site] {
        &self.core.sites.sites
    }

    /// The live state of site `id`.
    pub fn site_state(&self, id: SiteId) -> Option<&sites::SiteState> {
        self.core.sites.state.get(id)
    }

    /// A job's state, if the scheduler knows it.
    pub fn job(&self, id: JobId) -> Option<&JobState> {
        self.core.jobs.get(&id)
    }

    /// The start command of a launch still waiting for its submission's answer, made again
    /// (a driver that restarted or took over from another and must send it again, whether
    /// its journal's replay met the command or its snapshot covered it): the command first
    /// made, its reservation included for a job placed by reservation (issue 31), with the
    /// sizes of the job as edited since (seed 002 §3.2). `None` unless the launch is current
    /// and `Submitted`.
    pub fn pending_start(&self, launch: LaunchId) -> Option<Start> {
        self.core.pending_start(launch)
    }

    /// The launches of stopped committed runs that may still run at their sites: the
    /// driver answers each with [`Event::CancelTaken`] once it is gone ([`draining`]).
    pub fn draining(&self) -> &draining::Draining {
        &self.core.draining
    }

    /// Every job the scheduler knows, by number.
    pub fn jobs(&self) -> impl Iterator<Item = &JobState> {
        self.core.jobs.values()
    }

    /// Every job the scheduler knows numbered after `after`, by number.
    pub fn jobs_after(&self, after: JobId) -> impl Iterator<Item = &JobState> {
        self.core.jobs.values_after(after)
    }

    /// Drop an ended job's state (the server keeps it in its history instead); its number
    /// is not given out again. A job that has not ended is kept: false.
    pub fn forget_ended(&mut self, id: JobId) -> bool {
        if !self.core.jobs.get(&id).is_some_and(JobState::ended) {
            return false;
        }
        self.core.jobs.forget(id);
        true
    }

    /// A hint from the driver: about `jobs` jobs will be submitted in all (a trace replay
    /// knows), so the tables kept per job number are sized once instead of growing. It
    /// changes no decision.
    pub fn reserve_jobs(&mut self, jobs: usize) {
        self.core.jobs.reserve(jobs);
        self.queue.reserve(jobs);
    }

    /// Jobs waiting in the queue.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Jobs waiting for admission to the queue (submitted while it was full).
    pub fn awaiting_admission(&self) -> usize {
        self.core.backlog.len()
    }

    /// The queue policy's name.
    pub fn policy(&self) -> &'static str {
        self.queue.name()
    }

    /// Put the jobs this event sent (back) to the queue into it.
    fn enqueue_requeued(&mut self) {
        let core = &mut self.core;
        if !core.requeued.is_empty() {
            core.demand_version += 1;
        }
        for &id in &core.requeued {
            if let Some(j) = core.jobs.get(&id) {
                self.queue.push(id, &j.job, core.now);
            }
        }
        core.requeued.clear();
    }

    fn fire_timers(&mut self) {
        while let Some(&(t, timer)) = self.core.timers.first() {
            if t > self.core.now {
                break;
            }
            self.core.timers.pop_first();
            self.core.timer(timer);
        }
    }

    /// One scheduling pass of the queue policy. The demand version moves unless the policy
    /// was blocked before it ([`QueuePolicy::blocked`]: no job entered or left its queue
    /// since its last pass) and the pass started and failed nothing: such a pass leaves the
    /// queue as it was.
    fn pass(&mut self) {
        let (blocked, effects) = (self.queue.blocked(), self.core.pass_effects);
        self.queue.pass(&mut self.core);
        if !blocked || self.core.pass_effects != effects {
            self.core.demand_version += 1;
        }
    }

    /// Move jobs in and out of the queue as the event decided, then run a pass if anything
    /// changed that could let a job start.
    fn settle(&mut self) {
        let core = &mut self.core;
        let changed = !core.unqueued.is_empty() || !core.edited.is_empty();
        if changed || !core.finished.is_empty() {
            core.demand_version += 1;
        }
        for id in core.unqueued.drain(..) {
            self.queue.remove(id);
        }
        core.admit(self.queue.len());
        self.enqueue_requeued();
        let core = &mut self.core;
        for id in core.edited.drain(..) {
            let queued = |j: &&JobState| {
                j.phase == Phase::Queued && j.retry_at().is_none() && !j.awaiting_admission
            };
            if let Some(j) = core.jobs.get(&id).filter(queued) {
                self.queue.edited(id, &j.job);
            }
        }
        for (id, runtime) in core.finished.drain(..) {
            if let Some(j) = core.jobs.get(&id) {
                self.queue.finished(id, &j.job, runtime);
            }
        }
        let pass = core.dirty || self.queue.next_wakeup().is_some_and(|t| t <= core.now);
        if pass {
            core.dirty = false;
            self.pass();
            // Jobs the pass started made room: admit from the backlog and decide again.
            if self.core.admit(self.queue.len()) > 0 {
                self.enqueue_requeued();
                self.core.dirty = false;
                self.pass();
            }
        }
        let core = &mut self.core;
        // Taken out for the loop and put back after, so that its room is kept.
        let mut committed = std::mem::take(&mut core.committed);
        for id in committed.drain(..) {
            if let (Some(limit), Some(j)) = (self.queue.runtime_limit(id), core.jobs.get(&id)) {
                let generation = j.generation();
                core.timers.insert((
                    core.now + limit,
                    Timer::Limit {
                        job: id,
                        generation,
                    },
                ));
            }
        }
        core.committed = committed;
        if core.wants_provisioning(pass) {
            core.provision(&*self.queue);
        }
        for id in core.ended.drain(..) {
            core.jobs.forget(id);
        }
    }
}

impl Core {
    /// [`Scheduler::apply`] of the events a busy queue's every job does not bring (a user's
    /// cancel or edit, operators, transfers, clouds, agents' links, reservations): out of
    /// the path every job takes, whose code must stay small for the processor's instruction
    /// cache (issue 34: the simulator's replay waits on instruction fetches).
    #[cold]
    #[inline(never)]
    fn apply_rare(&mut self, event: Event) -> Result<Reply, Rejected> {
        match event {
            Event::Submit(_)
            | Event::Edit { .. }
            | Event::SiteStatus { .. }
            | Event::ComponentQueued { .. }
            | Event::ComponentStarted { .. }
            | Event::ComponentReady { .. }
            | Event::ComponentFailed { .. }
            | Event::ComponentFinished { .. }
            | Event::Tick => unreachable!("applied by Scheduler::apply"),
            Event::Cancel { job } => self.cancel(job).map(|()| Reply::Done),
            Event::Commit { job } => self.owner_commit(job).map(|()| Reply::Done),
            Event::SetUsable { site, usable } => {
                self.set_usable(site, usable).map(|()| Reply::Done)
            }
            Event::SiteControl {
                site,
                control,
                reason,
            } => self
                .site_control(site, control, reason)
                .map(|()| Reply::Done),
            Event::CancelTaken { launch } => {
                self.cancel_taken(launch);
                Ok(Reply::Done)
            }
            Event::TransferDone { transfer, ok } => {
                self.transfer_done(transfer, ok);
                Ok(Reply::Done)
            }
            Event::Replica {
                site,
                file,
                present,
            } => self.replica(site, file, present).map(|()| Reply::Done),
            Event::TransferMeasured {
                from,
                to,
                bytes,
                millis,
            } => self
                .transfer_measured(from, to, bytes, millis)
                .map(|()| Reply::Done),
            Event::VmLeased { vm } => self.vm_leased(vm).map(|()| Reply::Done),
            Event::LeaseFailed { vm, reason } => {
                self.lease_failed(vm, &reason).map(|()| Reply::Done)
            }
            Event::VmReleased { vm } => self.vm_released(vm).map(|()| Reply::Done),
            Event::SiteDisconnected { site, grace } => {
                self.site_disconnected(site, grace).map(|()| Reply::Done)
            }
            Event::SiteReconnected { site } => self.site_reconnected(site).map(|()| Reply::Done),
            Event::ReserveOffer {
                reservation,
                earliest,
            } => self
                .reserve_offer(reservation, earliest)
                .map(|()| Reply::Done),
            Event::Reserved {
                reservation,
                result,
            } => self.reserved(reservation, result).map(|()| Reply::Done),
            Event::ReservationsFound {
                site,
                names,
                pending,
            } => self
                .reservations_found(site, names, pending)
                .map(|()| Reply::Done),
        }
    }
    /// The checks a job passes before it is queued, submitted or edited (seed 002 §3.2): a
    /// valid description, a fit on the empty sites with the queue policy's `fit` and on each
    /// of its `entries`, and, when it `reserves`, on the sites that may reserve. A job that
    /// fails one could never start, and would wait for good (an edit once skipped the last
    /// two: the simulation harness, seed 13588 and `--policies` seed 8052).
    #[inline]
    pub(super) fn check_startable(
        &self,
        job: &Job,
        fit: Option<crate::placement::Fit>,
        entries: &[&[SiteId]],
        reserves: bool,
    ) -> Result<(), Rejected> {
        crate::spec::validate::validate(job, &[]).map_err(|e| Rejected::Invalid(e.to_string()))?;
        self.check_fits_when_empty(job, fit)?;
        self.check_fits_entries(job, fit, entries)?;
        self.check_reservable(job, reserves)
    }

    fn submit(
        &mut self,
        mut job: Job,
        fit: Option<crate::placement::Fit>,
        entries: &[&[SiteId]],
    ) -> Result<JobId, Rejected> {
        let request = job.extra().reserve;
        self.check_startable(&job, fit, entries, request.is_some())?;
        self.shared.share(&mut job);
        let id = self.next_job;
        self.next_job += 1;
        if let Some(r) = request {
            self.reserve.requests.insert(id, r);
        }
        self.jobs.insert(id, JobState::new(id, job, self.now));
        self.requeued.push(id);
        self.dirty = true;
        Ok(id)
    }

    fn cancel(&mut self, id: JobId) -> Result<(), Rejected> {
        let j = self.jobs.get(&id).ok_or(Rejected::UnknownJob(id))?;
        if j.ended() {
            return Err(Rejected::Ended(id));
        }
        // A job in its retry back-off or waiting for admission is not in the queue.
        if j.awaiting_admission {
            self.backlog.remove(id);
            self.jobs.get_mut(&id).expect("known").awaiting_admission = false;
        } else if j.phase == Phase::Queued && j.retry_at().is_none() {
            self.unqueued.push(id);
        }
        self.cancel_launches(id);
        self.notify(Notice::Cancelled { job: id });
        self.end_job(id, Err("cancelled".to_owned()));
        Ok(())
    }

    fn site_status(
        &mut self,
        site: SiteId,
        idle: u32,
        total: u32,
        other: u32,
        healthy: bool,
    ) -> Result<(), Rejected> {
        if site >= self.sites.len() {
            return Err(Rejected::UnknownSite(site));
        }
        let was = self.sites.state[site].usable();
        // A provisioned cloud's size is what the scheduler has leased, whatever the reading.
        let (idle, total) = match self.clouds.get(site).and_then(Option::as_ref) {
            Some(c) => (idle.min(c.capacity()), c.capacity()),
            None => (idle, total),
        };
        if self.sites.report(site, idle, total, other, healthy) {
            self.dirty = true;
        }
        let s = &mut self.sites.state[site];
        match (healthy, s.healthy_since) {
            (true, None) => s.healthy_since = Some(self.now),
            (false, Some(_)) => s.healthy_since = None,
            _ => {}
        }
        self.usable_changed(site, was, "the resource manager does not answer");
        Ok(())
    }

    fn site_control(
        &mut self,
        site: SiteId,
        control: sites::SiteControl,
        reason: String,
    ) -> Result<(), Rejected> {
        if site >= self.sites.len() {
            return Err(Rejected::UnknownSite(site));
        }
        let was = self.sites.state[site].usable();
        let why = format!("{}: {reason}", control.name());
        self.sites.control(site, control, reason);
        self.dirty = true;
        self.usable_changed(site, was, &why);
        Ok(())
    }

    fn set_usable(&mut self, site: SiteId, usable: bool) -> Result<(), Rejected> {
        if site >= self.sites.len() {
            return Err(Rejected::UnknownSite(site));
        }
        let was = self.sites.state[site].usable();
        self.sites.set_enabled(site, usable);
        self.dirty = true;
        self.usable_changed(site, was, "marked unusable by an operator");
        Ok(())
    }

    /// A replica appeared or went away (seed 000 §2.3). A new one may let a job waiting
    /// for a replica be placed, so it counts as a change for placement.
    fn replica(&mut self, site: SiteId, file: String, present: bool) -> Result<(), Rejected> {
        let Some(s) = self.sites.sites.get_mut(site) else {
            return Err(Rejected::UnknownSite(site));
        };
        let at = s.files.iter().position(|f| *f == file);
        match (at, present) {
            (None, true) => {
                s.files.push(file);
                self.sites.epoch += 1;
                self.dirty = true;
            }
            (Some(i), false) => {
                s.files.remove(i);
                self.dirty = true;
            }
            _ => {}
        }
        Ok(())
    }

    /// After a change that may have taken site `site` out (`why`) or let it back: its
    /// `out_since` and the notice.
    fn usable_changed(&mut self, site: SiteId, was: bool, why: &str) {
        let s = &mut self.sites.state[site];
        let now = s.usable();
        s.out_since = match (now, s.out_since) {
            (true, _) => None,
            (false, None) => Some(self.now),
            (false, since) => since,
        };
        if was && !now {
            self.notify(Notice::SiteUnusable {
                site,
                reason: why.to_owned(),
            });
        } else if !was && now {
            self.notify(Notice::SiteUsable { site });
        }
    }

    fn timer(&mut self, timer: Timer) {
        match timer {
            Timer::Pending {
                job,
                component,
                launch,
            } => {
                let timeout = self.config.pending_timeout.unwrap_or(0);
                let on = (job, component, launch);
                self.time_out(on, jobs::CompPhase::Submitted, Fault::Site, |_| {
                    format!(
                        "did not start within the pending timeout ({})",
                        crate::spec::units::format_duration(timeout)
                    )
                });
            }
            Timer::Barrier {
                job,
                component,
                launch,
            } => {
                let default = self.config.barrier_timeout;
                let on = (job, component, launch);
                self.time_out(on, jobs::CompPhase::Started, Fault::Job, |j| {
                    let t = j.job.barrier_timeout_or(default).unwrap_or(0);
                    format!(
                        "started but did not check in at the barrier within the barrier \
                         timeout ({})",
                        crate::spec::units::format_duration(t)
                    )
                });
            }
            Timer::Retry { job, generation } => self.retry_now(job, generation),
            Timer::Probe { site, at } => self.probe(site, at),
            Timer::LinkGrace { site, since } => self.link_grace_over(site, since),
            Timer::ReserveAnswer { job, generation } => self.answer_overdue(job, generation),
            Timer::ReserveDue { job, generation } => self.reserve_due(job, generation),
            Timer::Recancel { launch } => self.recancel(launch),
            Timer::Hold { job, generation } => {
                if self
                    .jobs
                    .get(&job)
                    .is_some_and(|j| j.generation() == generation)
                {
                    self.check_commit(job);
                }
            }
            Timer::Claim { job, generation } => {
                if self
                    .jobs
                    .get(&job)
                    .is_some_and(|j| j.generation() == generation)
                {
                    self.claim_try(job);
                }
            }
            Timer::Limit { job, generation } => {
                let running = self
                    .jobs
                    .get(&job)
                    .is_some_and(|j| j.generation() == generation && j.phase == Phase::Running);
                if running {
                    self.cancel_launches(job);
                    let j = self.jobs.get_mut(&job).expect("running job");
                    j.record.run_mut().limit_kills += 1;
                    let ran = self.now - j.record.run().start.unwrap_or(self.now);
                    self.reset_to_queue(job);
                    self.notify(Notice::Requeued {
                        job,
                        reason: format!(
                            "killed at its runtime limit after {}; it starts again from scratch",
                            crate::spec::units::format_duration(ran)
                        ),
                    });
                }
            }
        }
    }

    fn notify(&mut self, notice: Notice) {
        if self.config.notices {
            self.commands.push_back(Command::Notify(notice));
        }
    }
}

impl Core {
    /// Tell the active set about job `id` after its phase, start or estimate changed
    /// ([`jobs::Active::set`]).
    fn active_changed(&mut self, id: JobId) {
        let Some(j) = self.jobs.get(&id) else {
            return;
        };
        let (old, new) = (j.holding_until, self.holding_until(j));
        self.active.set(id, old, new);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.holding_until = new;
        }
    }

    /// When a job that holds processors (starting or running) is expected to end: from its
    /// start (or, before commit, its placement) plus its estimate. `None` for other jobs.
    fn holding_until(&self, j: &JobState) -> Option<Time> {
        if !matches!(j.phase, Phase::Starting | Phase::Running) {
            return None;
        }
        let since = j
            .record
            .run()
            .start
            .or(j.record.run().placed)
            .unwrap_or(self.now);
        Some(since + self.estimate(j.id))
    }

    /// Tests (debug builds) check the end index against every job, on small runs.
    fn check_end_index(&self) {
        #[cfg(debug_assertions)]
        if self.jobs.len() <= 2_000 {
            let mut fresh: Vec<(Time, JobId)> = self
                .jobs
                .values()
                .filter_map(|j| Some((self.holding_until(j)?, j.id)))
                .collect();
            fresh.sort_unstable();
            let indexed: Vec<(Time, JobId)> = self.active.by_end().collect();
            debug_assert_eq!(indexed, fresh, "the end index is out of date");
        }
    }

    /// The processors per site a job's live components hold.
    fn holds(j: &JobState) -> crate::queue::Holds {
        Core::holdings(j).collect()
    }

    /// `(site, processors)` of each live component of a job.
    fn holdings(j: &JobState) -> impl Iterator<Item = (SiteId, u32)> + '_ {
        j.comps
            .iter()
            .filter(|c| c.live())
            .map(|c| (c.site.unwrap_or(0), c.count))
    }
}

impl PassCtx for Core {
    fn now(&self) -> Time {
        self.now
    }

    fn job(&self, id: JobId) -> &Job {
        &self.jobs[&id].job
    }

    fn record(&self, id: JobId) -> &JobRecord {
        &self.jobs[&id].record
    }

    fn ended(&self, id: JobId) -> bool {
        self.jobs.get(&id).is_none_or(|j| j.ended())
    }

    fn start_with(&mut self, id: JobId, options: &StartOptions) -> bool {
        let started = self.try_place_and_start(id, options, None);
        self.pass_effects += u64::from(started);
        started
    }

    fn start_placed(
        &mut self,
        id: JobId,
        allowed: Option<&[bool]>,
        placed: &[(SiteId, u32)],
    ) -> bool {
        if matches!(self.config.claiming, Claiming::Icp(_)) || self.reserves(id) {
            // Claiming routes files, which needs the whole placement: place again.
            return self.try_start(id, allowed);
        }
        let started = self.try_place_and_start(id, &StartOptions::default(), Some(placed));
        self.pass_effects += u64::from(started);
        started
    }

    fn fits(&self, id: JobId, allowed: Option<&[bool]>) -> bool {
        self.jobs
            .get(&id)
            .is_some_and(|j| self.place_sites_now(&j.job, allowed, None, false).is_ok())
    }

    fn idle(&self) -> Vec<u32> {
        self.sites.idle()
    }

    fn epoch(&self) -> u64 {
        self.sites.epoch
    }

    fn running_version(&self) -> u64 {
        self.active.version()
    }

    fn unfinished_ends(&self) -> u64 {
        self.unfinished_ends
    }

    fn usable(&self) -> Vec<bool> {
        self.sites.usable()
    }

    fn local_busy(&self) -> Vec<u32> {
        (0..self.sites.len())
            .filter_map(|i| self.site_now(i))
            .map(|s| s.local)
            .collect()
    }

    fn site_now(&self, site: SiteId) -> Option<crate::queue::SiteNow> {
        let s = self.sites.state.get(site)?;
        Some(crate::queue::SiteNow {
            idle: s.idle,
            usable: s.usable(),
            local: s.processors.saturating_sub(s.idle).saturating_sub(s.ours),
        })
    }

    fn running_by_end(&self) -> Box<dyn Iterator<Item = RunningJob> + '_> {
        self.check_end_index();
        Box::new(self.active.by_end().map(|(end, job)| RunningJob {
            job,
            end,
            holds: Core::holds(&self.jobs[&job]),
        }))
    }

    fn visit_running_by_end(&self, visit: &mut dyn FnMut(Time, SiteId, u32) -> bool) {
        self.check_end_index();
        for (end, job) in self.active.by_end() {
            for (site, n) in Core::holdings(&self.jobs[&job]) {
                if !visit(end, site, n) {
                    return;
                }
            }
        }
    }

    fn estimate(&self, id: JobId) -> crate::model::Millis {
        (self.jobs[&id].job.own_estimate()).unwrap_or(self.config.default_estimate)
    }

    fn place_on(
        &self,
        id: JobId,
        idle: &[u32],
        usable: &[bool],
    ) -> Option<crate::placement::SitesOf> {
        let job = &self.jobs.get(&id)?.job;
        self.place_sites(job, idle, usable, None).ok()
    }

    fn fits_when_empty(
        &self,
        id: JobId,
        sites: &[SiteId],
        fit: Option<crate::placement::Fit>,
    ) -> bool {
        self.jobs
            .get(&id)
            .is_some_and(|j| Core::fits_when_empty(self, &j.job, fit, Some(sites)).is_ok())
    }

    fn fail(&mut self, id: JobId, reason: String) {
        if self.jobs.get(&id).is_some_and(|j| j.phase == Phase::Queued) {
            self.pass_effects += 1;
            self.end_job(id, Err(reason));
        }
    }
}
